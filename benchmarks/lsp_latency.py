"""How long the language server takes to diagnose an edited agent file again, in-process.

    python benchmarks/lsp_latency.py --repo PATH [--file REL] [--edits N] [--at end|call|top]

Opens REL (default: the simple agent) of the checkout at PATH in the server's editor state, as
`didOpen` does (the first analysis, cold: the project is listed and read, the facts extracted),
then changes the buffer N times, each time another comment, so the bytes change as typing does,
and times the function the `didChange` handler calls, `Editor.diagnostics`, for each. Where the
comment goes (`--at`): a new line at the end of the file (`end`, the default), the end of the
line of its first diagnostic (`call`: the method holding that self-call is edited, the others
not), one more line at the top (`top`: every line of the file moves down by one each edit). It
prints the median and fastest wall time and CPU time of this process against the 20 ms target,
the ratio to it, and where the median edit's time goes (the cumulative time of the stages, from
one profiled edit). Last, the quick fix the warm server gives for the file's own text, applied as
an editor applies it, is compared with what `fix` writes for that file (planned cold, nothing
written): a mismatch is printed and the exit code is 1. The checkout is only read.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

from lsprotocol import types as lsp
from pygls import uris
from pygls.workspace import TextDocument

from selfcall_audit import api
from selfcall_audit.frontends.editor import Document, Editor
from selfcall_audit.migrate.imports import Helper
from selfcall_audit.migrate.vendor import helper_placement

TARGET = 0.020
STAGES = {  # a stage of a run, by the function that runs it
    "facts of the edited file": "extract_facts",
    "files to report on (importers walk)": "scoped",
    "resolution (agents, calls, paths)": "findings_in",
    "  (within resolution) self-call fixability at the site": "site_blocker",
    "listing, YAML instances": "instances",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--file", default="responses_api_agents/simple_agent/app.py")
    parser.add_argument("--edits", type=int, default=30)
    parser.add_argument("--at", choices=("end", "call", "top"), default="end", help="where each edit goes")
    args = parser.parse_args()
    path = (args.repo / args.file).resolve()
    text = path.read_text()
    editor = Editor(uris.from_fs_path)
    editor.documents[path] = Document(path, text)
    started = time.perf_counter()
    first = editor.diagnostics(path)
    print(f"first analysis (didOpen): {time.perf_counter() - started:.2f} s, {len(first)} diagnostic(s)")
    if args.at == "call" and not first:
        parser.error(f"--at call: {args.file} has no diagnostic to edit at")
    walls, cpus = [], []
    for number in range(args.edits):
        editor.documents[path] = Document(path, edited(text, args.at, first, number))
        wall, cpu = time.perf_counter(), time.process_time()
        found = editor.diagnostics(path)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        api.settle()  # as the server does once the diagnostics are sent
        assert [d.code for d in found] == [d.code for d in first], found
    for name, times in (("wall", walls), ("cpu", cpus)):
        median = statistics.median(times)
        print(
            f"re-diagnose after an edit, {name}: median {median * 1000:.1f} ms, fastest "
            f"{min(times) * 1000:.1f} ms; {median / TARGET:.2f}x the {TARGET * 1000:.0f} ms target"
        )
    profile = cProfile.Profile()
    editor.documents[path] = Document(path, edited(text, args.at, first, args.edits))
    profile.runcall(editor.diagnostics, path)
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = max(entry[3] for entry in stats.values())
    print("where the time goes (profiled, so slower; share of the edit):")
    for stage, function in STAGES.items():
        spent = sum(entry[3] for (_, _, name), entry in stats.items() if name == function)
        print(f"  {stage}: {spent / total:.0%}")
    fixed, expected = quick_fix(editor, path, text), fix_writes(editor, path)
    if fixed != expected:
        print(f"MISMATCH: the quick fix rewrites {sorted(fixed)}, `fix` writes {sorted(expected)}")
        for rel in sorted(set(fixed) & set(expected)):
            print(f"  {rel}: {'the same' if fixed[rel] == expected[rel] else 'another text'}")
        sys.exit(1)
    print(
        f"quick fix after the edits: what `fix` writes ({', '.join(sorted(fixed)) or 'nothing to rewrite'})"
    )


def quick_fix(editor: Editor, path: Path, text: str) -> dict[str, str]:
    """The files the warm server's quick fix for the file's own text rewrites (not the helper's
    copy it creates), each as an editor holding it applies the edit."""
    editor.documents[path] = Document(path, text)
    root = editor.session(path).root
    edit = editor.fix(path)
    texts = {}
    for change in edit.document_changes if edit else ():
        if not isinstance(change, lsp.TextDocumentEdit):
            continue
        file = Path(uris.to_fs_path(change.text_document.uri))
        if not file.exists():  # the helper's copy, created by the same edit
            continue
        document = TextDocument(change.text_document.uri, text if file == path else file.read_text())
        for text_edit in change.edits:
            document.apply_change(lsp.TextDocumentContentChangePartial(text_edit.range, text_edit.new_text))
        texts[file.relative_to(root).as_posix()] = document.source
    return texts


def fix_writes(editor: Editor, path: Path) -> dict[str, str]:
    """What `fix` writes for the file, from the disk, planned by a cold analysis of the project
    (the session's settings: no cache is written into the checkout)."""
    session = editor.session(path)
    rel = path.relative_to(session.root).as_posix()
    placement = helper_placement(session.root, session.settings, [rel])
    plan = api.plan_fix(session.root, session.settings, [path], Helper.parse(placement.spec))
    return {file.path: file.after.decode("utf-8", "surrogateescape") for file in plan.files if file.changed}


def edited(text: str, at: str, diagnostics: list, number: int) -> str:
    """The text of edit `number`: a comment where `--at` says (see the module's docstring)."""
    comment = f"# edit {number}"
    if at == "end":
        return f"{text}{comment}\n"
    if at == "top":
        return "".join(f"# edit {n}\n" for n in range(number + 1)) + text
    lines = text.splitlines(keepends=True)
    index = diagnostics[0].range.start.line
    code = lines[index].rstrip("\r\n")
    lines[index] = f"{code}  {comment}{lines[index][len(code) :]}"
    return "".join(lines)


if __name__ == "__main__":
    main()

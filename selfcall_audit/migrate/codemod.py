"""`fix` on a project: analyse it, rewrite every file with fixable SCA001 self-calls, write them.

The rewrite of one file is `rewrite.rewrite_source`; this module plans it over the project and
writes the results, each file atomically, only when its new text parses and its bytes on disk
are still the ones that were analysed. It also vendors the helper into a project.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..config import DEFAULT_HELPER
from ..ftypes import Finding, Progress, Report
from ..report.escape import git_quoted
from ..report.messages import message, reason
from ..rules import SELF_CALL
from ..workspace.workers import Workers
from ..workspace.write import resolved_inside, write_all
from .fixes import CodemodError, Helper, Move, Outcome, Position, moved
from .house_style import is_first_party
from .test_impact import Impact, Rewritten

__all__ = ["DEFAULT_HELPER", "CodemodError", "FixPlan", "Helper", "Outcome", "plan_rewrites", "tried_by_fix"]


# --------------------------------------------------------------------------------------------
# A whole project
# --------------------------------------------------------------------------------------------


@dataclass
class FileFix:
    """One file with SCA001 findings: its bytes as analysed and after the rewrite."""

    path: str
    before: bytes
    after: bytes
    outcomes: list[Outcome]
    removed_aliases: list[tuple[int, str]] = field(default_factory=list)
    moves: tuple[Move, ...] = ()  # the edits that make `after` (see `fixes.moved`)
    write_error: str | None = None  # why the new bytes were not written

    @property
    def changed(self) -> bool:
        return self.after != self.before

    @property
    def rewritten(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.reason is None] if self.changed else []

    def diff(self) -> bytes:
        return file_diff(self.path, self.before, self.after)


def file_diff(path: str, before: bytes, after: bytes) -> bytes:
    """The patch as `git diff` prints it: the file's own bytes, whatever its encoding, in lines
    that only a newline ends (for git and patch, a form feed or a lone carriage return ends none),
    and names quoted as git quotes them."""
    old, new = git_quoted(f"a/{path}"), git_quoted(f"b/{path}")  # the code stays as it is
    return _ended(difflib.diff_bytes(difflib.unified_diff, _lines(before), _lines(after), old, new))


def new_file_diff(path: str, data: bytes) -> bytes:
    """The patch of a new file, as `git diff` prints one: `git apply` creates the file."""
    old, new = git_quoted(f"a/{path}"), git_quoted(f"b/{path}")
    lines = _lines(data)
    head = [
        b"diff --git %s %s\n" % (old, new),
        b"new file mode 100644\n",
        b"--- /dev/null\n",
        b"+++ %s\n" % new,
        b"@@ -0,0 +1,%d @@\n" % len(lines) if len(lines) != 1 else b"@@ -0,0 +1 @@\n",
    ]
    return b"".join(head) + _ended(b"+" + line for line in lines)


def _ended(lines: Iterable[bytes]) -> bytes:
    return b"".join(
        line if line.endswith(b"\n") else line + b"\n\\ No newline at end of file\n" for line in lines
    )


def _lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    return [line + b"\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


@dataclass
class FixPlan:
    """The analysis and the rewrite of every file it found self-calls in, before anything is written."""

    root: Path
    report: Report
    files: list[FileFix]
    errors: list[str] = field(default_factory=list)  # internal or I/O errors: exit status 2
    interrupted: int | None = None  # the signal that stopped `write` before every file was written
    tests: Impact | None = None  # the search for the tests of the calls meant to be rewritten
    written: set[str] = field(default_factory=set)  # the files `write` wrote

    def position(self, path: str, line: int, column: int = 1) -> Position:
        """Where a line and column of a file as analysed stand in the file as it is now: moved
        by the rewrite of the file if `write` wrote it, a rewritten call where the new one starts."""
        written_as = _written_as(self.root, path)
        if written_as in self.written:
            for file in self.files:
                if file.path == written_as:
                    return moved(file.moves, (line, column))
        return line, column

    @property
    def rewritten(self) -> list[tuple[FileFix, Outcome]]:
        return [(f, o) for f in self.files if f.write_error is None for o in f.rewritten]

    @property
    def not_fixed(self) -> list[tuple[Finding, str]]:
        """Self-calls the codemod leaves in place, each with the reason."""
        result = []
        seen = {
            (o.finding.path, o.finding.line, o.finding.column) for file in self.files for o in file.outcomes
        }
        for file in self.files:
            for outcome in file.outcomes:
                if outcome.reason is not None:
                    result.append((outcome.finding, outcome.reason))
                elif file.write_error is not None:
                    result.append((outcome.finding, file.write_error))
        for finding in self.report.findings:
            if (finding.path, finding.line, finding.column) not in seen:
                result.append((finding, f"{message(finding)}; {finding.code} is not rewritten automatically"))
        return sorted(result, key=lambda item: item[0].sort_key)

    def write(self, progress: Progress | None = None) -> None:
        """Write every changed file (see `write`), telling `progress` of each; a refusal, an I/O
        error or an interrupt that came first is kept as the file's `write_error`."""
        result = write_all(self.root, [file for file in self.files if file.changed], progress)
        self.interrupted = result.interrupted
        self.written = set(result.written)
        for file in self.files:
            if file.path in result.refused:
                file.write_error = result.refused[file.path]
            elif file.path in result.failed:
                file.write_error = result.failed[file.path]
                self.errors.append(f"{file.path}: {file.write_error}")
            elif file.changed and file.path not in result.written:
                file.write_error = "not written: the run was interrupted first"


def tried_by_fix(finding: Finding) -> bool:
    """Is the finding one to try to rewrite: a fixable one, or one that only the tree around the
    call stops (`at_site`), which the rewrite reads again with the helper it was given."""
    call = finding.call
    return finding.fixable or (call is not None and call.blocker is None and call.at_site is not None)


def _blocker(finding: Finding, helper: Helper) -> str:
    why = reason(finding.fix_blocker) if finding.fix_blocker else "it cannot be rewritten safely"
    if finding.call is not None and finding.call.receiver.kind == "helper":  # forwards to the client
        why += f"; rewrite this call by hand to call `{helper.name}(self, url_path=..., ...)` directly"
    return why


def _written_as(root: Path, path: str) -> str:
    """The file a rewrite of `path` goes to: a link to a file of the project is rewritten, and
    shown in `--diff`, where it leads, once however many names reach it (a patch on the link's
    name would not apply)."""
    return resolved_inside(root, path) or path  # outside the project: refused when written


def first_party_of(root: Path) -> Callable[[str], bool]:
    """Is a top-level module the project's own? It decides the section of the imports the helper's
    import joins. (A partial of a module-level function: it is sent to the worker processes.)"""
    return functools.partial(is_first_party, root)


def plan_rewrites(
    root: Path,
    report: Report,
    read: Callable[[str], bytes | None],
    helper: Helper,
    progress: Progress | None = None,
    jobs: int = 0,
    tests: tuple[str, tuple[str, ...]] | None = None,
) -> FixPlan:
    """The new text of every file with fixable self-calls in `report`, from the bytes `read` gives
    (those the analysis read); `progress` is told of each file planned. Files are rewritten in
    `jobs` worker processes (0: one per CPU) when there are two or more: each costs libcst's parse
    and metadata, tens to hundreds of milliseconds. `tests`: the agents' route and the excluded
    patterns, to search for the tests of the calls meant to be rewritten meanwhile (`plan.tests`)."""
    by_path: dict[str, dict[tuple[str, int, int], Finding]] = {}
    for finding in report.findings:
        if finding.code == SELF_CALL:
            by_path.setdefault(_written_as(root, finding.path), {}).setdefault(
                (finding.path, finding.line, finding.column), finding
            )

    plan = FixPlan(root, report, [])
    progress = progress or Progress()
    progress.phase("planning rewrites")
    planned: list[tuple[str, bytes | None, list[Outcome], list[Finding]]] = []
    for path, sites in sorted(by_path.items()):
        source = read(path)
        # what only the tree around a call stops, fix decides again (with the helper it was given)
        fixable: list[Finding] = []
        outcomes = []
        for finding in sites.values():  # one pass: a file may hold hundreds of them
            if source is None:
                outcomes.append(Outcome(finding, "the file could not be read again"))
            elif tried_by_fix(finding):
                fixable.append(finding)
            else:
                outcomes.append(Outcome(finding, _blocker(finding, helper)))
        planned.append((path, source, outcomes, fixable))
    first_party = first_party_of(root)
    jobs_of = {
        path: _Rewrite(source, fixable, helper, first_party)
        for path, source, _, fixable in planned
        if fixable
    }
    largest_first = sorted(jobs_of, key=lambda path: -len(jobs_of[path].source))  # none left to the end
    workers = Workers(jobs, min_batch=2)
    try:
        done = {}
        if jobs_of:  # libcst: loaded here, once there is a call to rewrite, before the workers fork
            if tests is not None:  # in a process of its own meanwhile
                meant = [Rewritten(f.path, f.method) for *_, fixable in planned for f in fixable]
                plan.tests = Impact(root, meant, *tests, workers)
            from .rewrite import rewritten

            jobs_in_order = [jobs_of[p] for p in largest_first]
            done = dict(zip(largest_first, workers.map(rewritten, jobs_in_order, chunksize=1)))
        for count, (path, source, outcomes, fixable) in enumerate(planned, 1):
            progress(path, count, len(planned))
            after, removed_aliases, moves = source or b"", [], ()
            if fixable:
                result = done[path]
                if isinstance(result, CodemodError):
                    plan.errors.append(f"{path}: {result}")
                    outcomes += [Outcome(f, "internal error: the rewrite would not parse") for f in fixable]
                else:
                    after, rewritten, removed_aliases, moves = result
                    outcomes += rewritten
            outcomes.sort(key=lambda o: o.finding.sort_key)
            plan.files.append(FileFix(path, source or b"", after, outcomes, removed_aliases, moves))
    finally:
        workers.close()
    return plan


class _Rewrite(NamedTuple):
    """One file's rewrite, as a worker process is handed it (`rewrite.rewritten`)."""

    source: bytes
    findings: list[Finding]
    helper: Helper
    first_party: Callable[[str], bool]

"""Where a one-file run's time goes, measured side by side in one run.

    python benchmarks/one_file_profile.py --repo PATH [--file REL] [--other REL] [--rounds N]

Copies the checkout at PATH (the original is never edited), scans it once to fill the cache, then
for each case (warm: nothing changed; comment: a trailing comment in the agent file REL; code edit:
a new first statement in it; non-agent: a new first statement in OTHER) times, as subprocesses
in interleaved rounds, the CPU time (user + system) of:

- `python -c pass`: the interpreter's start;
- `python -c 'import <the standard-library modules the run loaded>'`;
- the same plus the third-party modules it loaded;
- the same plus selfcall-audit's own modules: every import the run makes;
- the run itself, `selfcall-audit scan --format json FILE` (`python -m selfcall_audit`).

The differences say what the start, the standard library, the third-party modules, our modules
(their code and the classes they define) and the work (analysis, report, exit) each cost. The
modules are those `-X importtime` lists for the case. One more run of each case in-process (the
modules loaded first, the collector off as on the command line), with a progress object that
stamps the pipeline's phases, splits the analysis by phase: each phase runs from its name to the
next one's (`listing files` includes the reuse of the last result when nothing else follows).
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from scan_vs_peers import Editor

IMPORTED = re.compile(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)")
PHASES = r"""
import gc, json, sys, time
for module in sys.argv[2:]:  # loaded first, as the run loads them: the phases time only the work
    try:
        __import__(module)
    except ImportError:
        pass
gc.disable()  # as the command line runs
from selfcall_audit import api
from selfcall_audit.ftypes import Progress

class Stamps(Progress):
    def __init__(self):
        self.marks = [("start", time.process_time())]
    def phase(self, name):
        self.marks.append((name, time.process_time()))

stamps = Stamps()
api.analyze([sys.argv[1]] if sys.argv[1] else [], progress=stamps)
stamps.marks.append(("end", time.process_time()))
print(json.dumps([[a, round((t2 - t1) * 1000, 1)] for (a, t1), (_, t2) in zip(stamps.marks, stamps.marks[1:])]))
"""


def cpu_ms(command: list[str], cwd: Path) -> float:
    """CPU time of one run of `command`, its children included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def loaded_modules(scan: list[str], cwd: Path) -> tuple[list[str], list[str], list[str]]:
    """The modules a run imports: the standard library's, third-party ones, ours."""
    run = subprocess.run([sys.executable, "-X", "importtime", *scan], cwd=cwd, capture_output=True, text=True)
    names = list(dict.fromkeys(IMPORTED.findall(run.stderr)))
    ours = [n for n in names if n.split(".")[0] == "selfcall_audit"]
    std = [n for n in names if n.split(".")[0] in sys.stdlib_module_names]
    return std, [n for n in names if n not in ours and n not in std], ours


def importing(modules: list[str], then: str = "") -> list[str]:
    """A command that imports `modules`, passing over those this platform lacks (importtime also
    lists the imports a module tries and catches: `nt`, `_winapi`), then runs `then`."""
    preload = f"for m in {modules!r}:\n try: __import__(m)\n except ImportError: pass\n"
    return [sys.executable, "-c", preload + then]


def copied(repo: Path, temp: str) -> Path:
    """A copy of the checkout (the original is never edited), without its cache."""
    root = Path(temp) / "tree"
    shutil.copytree(repo, root, symlinks=True, ignore=shutil.ignore_patterns(".selfcall_audit_cache"))
    return root


class Case:
    """One file changed before each run (as `scan_vs_peers.Editor` changes it), put back after;
    no file: the warm case."""

    def __init__(self, root: Path, rel: str | None, first_line: bool):
        self.rel = rel or ""
        self.editor = Editor(root / rel, first_line) if rel else None

    def change(self) -> None:
        if self.editor is not None:
            self.editor.edit()

    def restore(self) -> None:
        if self.editor is not None:
            self.editor.restore()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--file", default="responses_api_agents/simple_agent/app.py", help="an agent file")
    parser.add_argument(
        "--other", default=None, help="a file that is not an agent (default: a resources server)"
    )
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        root = copied(args.repo, temp)
        other = args.other or next(
            p.relative_to(root).as_posix() for p in sorted(root.glob("resources_servers/*/app.py"))
        )
        scan = ["-m", "selfcall_audit", "scan", "--format", "json"]
        subprocess.run([sys.executable, *scan], cwd=root, stdout=subprocess.DEVNULL, check=False)
        cases = {
            "warm": Case(root, None, False),
            "comment": Case(root, args.file, False),
            "code edit": Case(root, args.file, True),
            "non-agent": Case(root, other, True),
        }
        rows = []
        for label, case in cases.items():
            command = [*scan, case.rel] if case.rel else scan
            case.change()
            std, third, ours = loaded_modules(command, root)
            case.restore()
            steps = {
                "python -c pass": [sys.executable, "-c", "pass"],
                "+ stdlib imports": importing(std),
                "+ third-party": importing(std + third),
                "+ our modules": importing(std + third + ours),
                "the run": [sys.executable, *command],
            }
            times: dict[str, list[float]] = {step: [] for step in steps}
            for _ in range(args.rounds):
                for step, run in steps.items():
                    if step == "the run":
                        case.change()
                    times[step].append(cpu_ms(run, root))
                    case.restore()
            case.change()
            phased = subprocess.run(
                [sys.executable, "-c", PHASES, case.rel],
                cwd=root,
                capture_output=True,
                text=True,
                check=False,
            )
            case.restore()
            medians = {step: statistics.median(found) for step, found in times.items()}
            previous = 0.0
            parts = []
            for step, value in medians.items():
                parts.append(f"{step} {value - previous:+.1f}")
                previous = value
            phases = json.loads(phased.stdout) if phased.returncode == 0 else phased.stderr.strip()[-200:]
            rows.append((label, medians, parts, phases, (len(std), len(third), len(ours))))
        print(
            f"CPU ms, medians of {args.rounds} interleaved rounds; {args.repo}, file {args.file}, other {other}"
        )
        for label, medians, parts, phases, counts in rows:
            print(f"\n{label}: the run {medians['the run']:.1f} ms = " + ", ".join(parts))
            print(
                f"  modules loaded: {counts[0]} standard library, {counts[1]} third-party, {counts[2]} ours"
            )
            print(f"  the work by phase, in-process (ms): {phases}")
        print()
        for label, medians, *_ in rows:
            key = label.replace(" ", "_").replace("-", "_")
            floor = medians["python -c pass"]
            print(f"{key}_ms={medians['the run']:.1f}")
            print(f"{key}_vs_python_pass={medians['the run'] / floor:.2f}")
            print(f"{key}_imports_ms={medians['+ our modules'] - floor:.1f}")
            print(f"{key}_work_ms={medians['the run'] - medians['+ our modules']:.1f}")


if __name__ == "__main__":
    main()

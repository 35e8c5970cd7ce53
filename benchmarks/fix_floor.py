"""What libcst alone costs `fix`, against the cold scan: the floor under `fix`'s target.

    python benchmarks/fix_floor.py PATH/TO/TREE [--rounds N]

In a copy of the tree (the original is never touched), times side by side, as subprocesses in
interleaved rounds (wall clock, medians of `--rounds`, 5; without `PYTHONDONTWRITEBYTECODE`, as
`scan_vs_peers.py` runs them):

- the cold scan, `selfcall-audit scan --format json`, the cache removed first;
- `fix --diff`, the cache removed first (it writes nothing);
- `python -c pass`, and `python -c 'import libcst.codemod'`: the difference is libcst's load, which
  `fix` makes once, before its workers fork.

In each round, one more run of `fix --diff --jobs 1` counts the CPU of libcst's own work in it
(medians of the rounds): its parse (`parse_module`), its positions (the metadata `fix` asks for,
with the visit libcst's metadata wrapper makes besides), its code generation (`Module.code`), for
the rewrites and the tests' update together, and the set-up of each file's codemod command (libcst
gathers the matcher decorators of each of a command's attributes; its own runner makes a command
per file, and deprecates sharing one). That work is shared out between the cores at best, so

    floor = cold scan + libcst's load + libcst's work / cores

is what `fix` would take if everything it does that is not libcst's cost nothing. The last lines
are `key=value` pairs, `floor_vs_cold` and `fix_vs_cold` among them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from one_file_profile import copied
from scan_vs_peers import CACHE_DIR, ENVIRONMENT, find_tool, positive, run

# Run in a process of its own: `fix --diff --jobs 1`, libcst's parse, positions and code generation
# timed where `fix` calls them (it calls them through libcst's modules, where they are replaced).
COUNTED = r"""
import gc, json, sys, time
import libcst
import libcst.metadata.wrapper as wrapper
import libcst.matchers._visitors as matchers
spent = {"parse": 0.0, "positions": 0.0, "codegen": 0.0, "commands": 0.0}

def counted(key, function):
    def run(*args, **kwargs):
        started = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[key] += time.process_time() - started
    return run

libcst.parse_module = counted("parse", libcst.parse_module)
wrapper._resolve_impl = counted("positions", wrapper._resolve_impl)
libcst.Module.code = property(counted("codegen", libcst.Module.code.fget))
for name in ("_gather_constructed_visit_funcs", "_gather_constructed_leave_funcs", "_gather_matchers"):
    setattr(matchers, name, counted("commands", getattr(matchers, name)))
gc.disable()  # as the command line runs
from selfcall_audit.frontends.cli import main
started = time.process_time()
code = main(["fix", "--diff", "--jobs", "1"])
total = time.process_time() - started
print(json.dumps({"exit": code, "total": total * 1000, **{k: v * 1000 for k, v in spent.items()}}), file=sys.stderr)
"""


def wall(command: list[str], cwd: Path, before: bool = False) -> float:
    """Seconds of one run of `command` in `cwd`; `before`: with the cache removed first."""
    if before:
        shutil.rmtree(cwd / CACHE_DIR, ignore_errors=True)
    return run(command, cwd).seconds


def counted(cwd: Path) -> dict[str, float]:
    """The CPU milliseconds of libcst's work in one `fix --diff --jobs 1` (`COUNTED`), the cache
    removed first."""
    shutil.rmtree(cwd / CACHE_DIR, ignore_errors=True)
    done = subprocess.run(
        [sys.executable, "-c", COUNTED], cwd=cwd, env=ENVIRONMENT, capture_output=True, text=True
    )
    if done.returncode != 0 or not done.stderr.strip():
        sys.exit(f"the counted fix failed: {done.stderr.strip()[-500:]}")
    spent = json.loads(done.stderr.strip().splitlines()[-1])
    if spent.pop("exit") not in (0, 1):
        sys.exit("the counted fix --diff found an error")
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path, help="a NeMo Gym tree (copied; the copy is scanned and fixed)")
    parser.add_argument("--rounds", type=positive, default=5, help="measured rounds (default 5)")
    args = parser.parse_args()
    sca = find_tool("selfcall-audit")
    if sca is None:
        sys.exit("selfcall-audit is not installed: pip install -e .")
    with tempfile.TemporaryDirectory() as temp:
        root = copied(args.tree.resolve(), temp)
        rows = {
            "cold": ([sca, "scan", "--format", "json"], True),
            "fix": ([sca, "fix", "--diff"], True),
            "python_pass": ([sys.executable, "-c", "pass"], False),
            "import_libcst": ([sys.executable, "-c", "import libcst.codemod"], False),
        }
        for command, before in rows.values():  # unmeasured: compiled bytecode, a warm disk
            wall(command, root, before)
        times: dict[str, list[float]] = {key: [] for key in rows}
        counts: list[dict[str, float]] = []
        for _ in range(args.rounds):
            for key, (command, before) in rows.items():
                times[key].append(wall(command, root, before))
            counts.append(counted(root))
    spent = {key: statistics.median(count[key] for count in counts) for key in counts[0]}
    median = {key: statistics.median(values) for key, values in times.items()}
    load = max(0.0, median["import_libcst"] - median["python_pass"])
    work = (spent["parse"] + spent["positions"] + spent["codegen"] + spent["commands"]) / 1000
    cores = os.cpu_count() or 1
    floor = median["cold"] + load + work / cores
    print(
        f"cold scan {median['cold']:.3f} s, fix --diff {median['fix']:.3f} s ({args.rounds} rounds, medians)"
    )
    print(f"libcst's load {load * 1000:.0f} ms")
    print(
        f"libcst's work in fix --jobs 1: parse {spent['parse']:.0f} ms, positions {spent['positions']:.0f} ms,"
        f" code generation {spent['codegen']:.0f} ms, command set-up {spent['commands']:.0f} ms,"
        f" of {spent['total']:.0f} ms of CPU in all"
    )
    print(f"floor: {median['cold']:.3f} + {load:.3f} + {work:.3f} / {cores} cores = {floor:.3f} s")
    print(f"cold_s={median['cold']:.3f}")
    print(f"fix_s={median['fix']:.3f}")
    print(f"libcst_load_ms={load * 1000:.0f}")
    print(f"libcst_work_ms={work * 1000:.0f}")
    print(f"floor_s={floor:.3f}")
    print(f"floor_vs_cold={floor / median['cold']:.2f}")
    print(f"fix_vs_cold={median['fix'] / median['cold']:.2f}")


if __name__ == "__main__":
    main()

"""What each import made inside a function saves a warm scan, measured side by side in one run.

    python benchmarks/deferred_imports.py --repo PATH [--rounds N]

Copies the checkout at PATH (the original is never edited), scans it twice so that the second run
is warm, and lists the modules that warm run loaded (`-X importtime`). Then, for every import
statement made inside a function of the installed package (the ones tests/test_architecture.py
lists with why), it times in interleaved rounds the CPU that statement takes in a process that
has imported the warm run's modules first: what keeping the statement out of the module's top
saves a warm scan. Timed within the process, not as the difference of two processes' CPU, whose
spread between runs (several ms on a busy machine) is wider than most of these figures. A
statement whose modules the warm run loads anyway saves nothing; one that cannot run here (an
optional dependency that is not installed, the other Python's module) is said so.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from one_file_profile import copied, cpu_ms, importing, loaded_modules

import selfcall_audit


def timed(modules: list[str], statement: str) -> list[str]:
    """A command that imports `modules`, then runs `statement` and prints the CPU ms it took."""
    clock = "import time as _clock\n_started = _clock.process_time()\n"
    said = "print((_clock.process_time() - _started) * 1000)\n"
    return importing(modules, clock + statement + "\n" + said)


def deferred(package: Path) -> dict[str, set[str]]:
    """Each import statement made inside a function of the package, written absolute, with the
    functions (`module.function`) that make it."""
    found: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        home = module.split(".") if is_package else module.split(".")[:-1]
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                names = ", ".join(alias.name for alias in node.names)
                if isinstance(node, ast.Import):
                    statement = f"import {names}"
                else:
                    base = home[: len(home) - node.level + 1] if node.level else []
                    target = ".".join([*base, node.module] if node.module else base)
                    statement = f"from {target} import {names}"
                found.setdefault(statement, set()).add(f"{module}.{function.name}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        root = copied(args.repo, temp)
        scan = ["-m", "selfcall_audit", "scan", "--format", "json"]
        subprocess.run([sys.executable, *scan], cwd=root, stdout=subprocess.DEVNULL, check=False)
        std, third, ours = loaded_modules(scan, root)
        warm = [*std, *third, *ours]
        statements = deferred(Path(selfcall_audit.__file__).parent)
        runnable = {}
        for statement in statements:
            check = subprocess.run(importing([], statement), cwd=root, capture_output=True, check=False)
            runnable[statement] = check.returncode == 0
        runs = {s: timed(warm, s) for s, ok in runnable.items() if ok}
        times: dict[str, list[float]] = {key: [] for key in runs}
        alone: list[float] = []
        for _ in range(args.rounds):
            alone.append(cpu_ms(importing(warm), root))
            for key, run in runs.items():
                done = subprocess.run(run, cwd=root, capture_output=True, text=True, check=True)
                times[key].append(float(done.stdout.splitlines()[-1]))
    floor = statistics.median(alone)
    saved = {s: statistics.median(found) for s, found in times.items()}
    print(
        f"CPU ms in the importing process, medians of {args.rounds} interleaved rounds; {args.repo}: "
        f"a warm scan's modules ({len(warm)}) imported alone take {floor:.1f} ms"
    )
    for statement in sorted(statements, key=lambda s: -saved.get(s, -1.0)):
        where = ", ".join(sorted(statements[statement]))
        cost = f"{saved[statement]:+6.1f}" if statement in saved else "   n/a"
        print(f"{cost}  {statement}  (in {where})")


if __name__ == "__main__":
    main()

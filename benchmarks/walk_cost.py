"""What a read-only walk of a libcst tree costs: libcst's visit against reading the nodes' fields.

    python benchmarks/walk_cost.py PATH/TO/TREE [--rounds 5]

The files are the tree's agent modules (`responses_api_agents/*/app.py`), parsed once. Each row
walks every node of each of them, best of `--rounds` (5), and prints its time and its ratio to
the walk `fix`'s checks use (`migrate.walk.descendants`). The rows count the nodes they meet,
and the script stops if they disagree.

    libcst visit              a `CSTVisitor` that only counts (libcst builds each node again)
    matchers.findall          `findall(module, Call())`, the search the checks used before
    migrate.walk.descendants  the fields read, no node built
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import libcst
import libcst.matchers as m

from selfcall_audit.migrate.walk import descendants


class _Count(libcst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def on_visit(self, node: libcst.CSTNode) -> bool:
        self.count += 1
        return True


def libcst_visit(module: libcst.Module) -> int:
    counter = _Count()
    module.visit(counter)
    return counter.count


def findall_calls(module: libcst.Module) -> int:
    return len(m.findall(module, m.Call()))


def fields_walk(module: libcst.Module) -> int:
    return sum(1 for _ in descendants(module))


ROWS: dict[str, Callable[[libcst.Module], int]] = {
    "libcst visit": libcst_visit,
    "matchers.findall": findall_calls,
    "migrate.walk.descendants": fields_walk,
}


def best_time(
    walk: Callable[[libcst.Module], int], modules: list[libcst.Module], rounds: int
) -> tuple[float, int]:
    best, met = float("inf"), 0
    for _ in range(rounds):
        start = time.perf_counter()
        met = sum(walk(module) for module in modules)
        best = min(best, time.perf_counter() - start)
    return best, met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path, help="the root of a NeMo Gym checkout")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    files = sorted(args.tree.glob("responses_api_agents/*/app.py"))
    if not files:
        sys.exit(f"no agent modules under {args.tree / 'responses_api_agents'}")
    modules = [libcst.parse_module(path.read_bytes()) for path in files]
    print(f"files={len(files)}")
    times = {name: best_time(walk, modules, args.rounds) for name, walk in ROWS.items()}
    visited, walked = times["libcst visit"][1], times["migrate.walk.descendants"][1]
    if visited != walked:
        sys.exit(f"the walks disagree: libcst met {visited} nodes, the fields' walk {walked}")
    print(f"nodes={walked}")
    base = times["migrate.walk.descendants"][0]
    for name, (seconds, _) in times.items():
        print(f"{name:26s} {seconds * 1000:8.1f} ms  {seconds / base:5.2f}x")


if __name__ == "__main__":
    main()

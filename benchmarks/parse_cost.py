"""What parsing costs with `ast` and with libcst, on exactly the files a scan of a tree parses.

    python benchmarks/parse_cost.py PATH/TO/TREE [--rounds 3]

The file list comes from the scan itself (a cold scan, cache off, records each file it parses).
Each row parses all of them, best of `--rounds` (3) after one unmeasured parse, and prints its time
and its ratio to `ast.parse`:

    ast.parse                 what the scan's fact extraction does
    libcst.parse_module       a concrete syntax tree, as the codemod needs for lossless rewrites
    + PositionProvider        line/column metadata
    + ScopeProvider           scopes and assignments (what resolving names needs)
    + QualifiedNameProvider   qualified names (scopes included)
"""

from __future__ import annotations

import argparse
import ast
import time
from collections.abc import Callable
from pathlib import Path

import libcst
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider, ScopeProvider

from selfcall_audit.config import load_settings
from selfcall_audit.orchestration import store
from selfcall_audit.orchestration.project import Project


def parsed_by_scan(root: Path) -> list[Path]:
    """The files a cold scan of `root` parses, each recorded as its facts are extracted."""
    parsed: list[str] = []
    extract_facts = store.extract_facts

    def recorded(item: tuple[str, bytes, bool], functions: object = None) -> object:
        parsed.append(item[0])
        return extract_facts(item, functions)

    settings = load_settings(root).with_overrides(cache_dir="", jobs=1)
    store.extract_facts = recorded
    try:
        Project(root, settings).analyze([root])
    finally:
        store.extract_facts = extract_facts
    return [root / rel for rel in parsed]


def _with_metadata(*providers: type) -> Callable[[bytes], object]:
    def parse(data: bytes) -> object:
        return MetadataWrapper(libcst.parse_module(data)).resolve_many(providers)

    return parse


ROWS: dict[str, Callable[[bytes], object]] = {
    "ast.parse": ast.parse,
    "libcst.parse_module": libcst.parse_module,
    "+ PositionProvider": _with_metadata(PositionProvider),
    "+ ScopeProvider": _with_metadata(ScopeProvider),
    "+ QualifiedNameProvider": _with_metadata(QualifiedNameProvider),
    "+ all three": _with_metadata(PositionProvider, ScopeProvider, QualifiedNameProvider),
}


def best_time(parse: Callable[[bytes], object], sources: list[bytes], rounds: int) -> float:
    parse(sources[0])  # unmeasured: imports and first-use caches
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for data in sources:
            parse(data)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path, help="the root of the tree to scan (a NeMo Gym checkout)")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per row (best is kept)")
    args = parser.parse_args()

    files = parsed_by_scan(args.tree.resolve())
    sources = [path.read_bytes() for path in files]
    print(f"{len(files)} files parsed by the scan, {sum(map(len, sources)) / 1e6:.2f} MB")
    base = None
    for name, parse in ROWS.items():
        seconds = best_time(parse, sources, args.rounds)
        base = base or seconds
        print(f"{name:26} {seconds * 1000:9.1f} ms   {seconds / base:6.1f}x ast")


if __name__ == "__main__":
    main()

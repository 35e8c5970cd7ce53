"""Expectations written in the fixtures themselves: a trailing `# SCA001` (or several codes,
`# SCA001, SCA002`) on the line where a reported call starts, as in flake8-bugbear's eval files.

A fixture is a small fake repo in NeMo Gym's layout with its own pyproject.toml (so it is its own
project root) and, optionally, an `args.json` of extra command-line arguments. Folders named
`shape-*` hold one shape each of the analysis the README describes; the others are the established
fixtures. A line without an annotation must not be reported.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import tokenize
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NOT_COPIED = shutil.ignore_patterns(".selfcall_audit_cache")  # a cache left in a fixture by a local run
SHAPE_PREFIX = "shape-"
_ANNOTATION = re.compile(r"#\s*(SCA\d{3}(?:\s*,\s*SCA\d{3})*)\s*$")


def fixture_projects(*, shapes: bool) -> list[Path]:
    """The fixture repos: the one-shape fixtures (`shapes=True`) or the established ones."""
    return sorted(
        path for path in FIXTURES.iterdir() if path.is_dir() and path.name.startswith(SHAPE_PREFIX) == shapes
    )


def annotations(source: str) -> list[tuple[int, str]]:
    """`(line, code)` for every annotation comment; `# noqa: SCA001` and prose are not annotations."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and (match := _ANNOTATION.search(token.string)):
            found += [(token.start[0], code.strip()) for code in match.group(1).split(",")]
    return found


def annotated_findings(root: Path) -> list[list]:
    """`[code, path, line]` of every annotation in the Python files of a fixture repo, sorted."""
    return sorted(
        [code, path.relative_to(root).as_posix(), line]
        for path in root.rglob("*.py")
        for line, code in annotations(path.read_text(encoding="utf-8"))
    )


def extra_args(root: Path) -> list[str]:
    args = root / "args.json"
    return json.loads(args.read_text()) if args.is_file() else []

"""The form of the audited repo's own modules, for the helper file `fix` writes into it.

A maintainer reviews the helper as one of the repo's modules: it carries the license header its
neighbours carry, and its imports are laid out as the repo's ruff (`I` rules) lays them out. The
settings are read from the repo's `ruff.toml`/`.ruff.toml`/`pyproject.toml`; the repo's ruff is
never run. The shipped helper is formatted so that `ruff format` leaves it as it is at common line
lengths, so only the import block needs laying out here.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..config import _toml

_FUTURE, _STDLIB, _THIRD_PARTY, _FIRST_PARTY, _LOCAL = range(5)
_SECTIONS = {
    "future": _FUTURE,
    "standard-library": _STDLIB,
    "third-party": _THIRD_PARTY,
    "first-party": _FIRST_PARTY,
    "local-folder": _LOCAL,
}
_HEADER_WORDS = ("copyright", "license", "spdx")


@dataclass(frozen=True)
class ImportStyle:
    """The isort settings of ruff that change how the helper's few imports are laid out."""

    known_first_party: tuple[str, ...] = ()
    known_third_party: tuple[str, ...] = ()
    known_local_folder: tuple[str, ...] = ()
    section_order: tuple[int, ...] = (_FUTURE, _STDLIB, _THIRD_PARTY, _FIRST_PARTY, _LOCAL)
    lines_after_imports: int = -1  # -1: as the shipped helper has them
    lines_between_types: int = 0
    force_single_line: bool = False
    force_sort_within_sections: bool = False


def import_style(root: Path) -> ImportStyle:
    """The repo's isort settings, from the file ruff would read at its root (defaults without one)."""
    table = _ruff_table(root)
    lint = table.get("lint") if isinstance(table.get("lint"), dict) else {}
    isort = lint.get("isort", table.get("isort", {}))
    if not isinstance(isort, dict):
        return ImportStyle()

    def names(key: str) -> tuple[str, ...]:
        value = isort.get(key, ())
        return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()

    order = tuple(_SECTIONS[s] for s in names("section-order") if s in _SECTIONS)
    return ImportStyle(
        known_first_party=names("known-first-party"),
        known_third_party=names("known-third-party"),
        known_local_folder=names("known-local-folder"),
        section_order=order if len(order) == len(_SECTIONS) else ImportStyle.section_order,
        lines_after_imports=_integer(isort.get("lines-after-imports"), -1),
        lines_between_types=_integer(isort.get("lines-between-types"), 0),
        force_single_line=isort.get("force-single-line") is True,
        force_sort_within_sections=isort.get("force-sort-within-sections") is True,
    )


def is_first_party(root: Path, name: str) -> bool:
    """Is `name` a top-level package or module of the repo (at its root or under `src/`)?"""
    return any((base / name).is_dir() or (base / f"{name}.py").is_file() for base in (root, root / "src"))


def line_length(root: Path) -> int:
    """The repo's `line-length` for ruff (ruff's default, 88, without one)."""
    value = _ruff_table(root).get("line-length")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 88


def _integer(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and -1 <= value <= 3 else default


def _ruff_table(root: Path) -> dict:
    """ruff's own precedence: `.ruff.toml`, then `ruff.toml`, then `[tool.ruff]` of pyproject.toml."""
    for name in (".ruff.toml", "ruff.toml", "pyproject.toml"):
        try:
            data = _toml().loads((root / name).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if name != "pyproject.toml":
            return data
        table = data.get("tool", {}).get("ruff") if isinstance(data.get("tool"), dict) else None
        if isinstance(table, dict):
            return table
    return {}


def license_header(folder: Path, exclude: Path | None = None) -> str:
    """The license header most modules of `folder` open with (comment lines naming a copyright or
    license), as written in them; "" when they carry none."""
    headers: Counter[str] = Counter()
    for path in sorted(folder.glob("*.py")):
        if exclude is not None and path.name == exclude.name:
            continue
        try:
            with open(path, encoding="utf-8", newline="") as stream:
                head = stream.read(8192)
        except (OSError, UnicodeDecodeError):
            continue
        block = _leading_comments(head)
        if any(word in block.lower() for word in _HEADER_WORDS):
            headers[block] += 1
    if not headers:
        return ""
    # the most common; between as common, the latest (a later year sorts last)
    return max(headers.items(), key=lambda item: (item[1], item[0]))[0]


def _leading_comments(text: str) -> str:
    lines = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if not line.startswith("#") or line.startswith("#!") or "coding" in line[:30]:
            if lines or not line.startswith("#"):
                break
            continue
        lines.append(line + "\n")
    return "".join(lines)


def sorted_imports(source: str, style: ImportStyle, first_party: Callable[[str], bool]) -> str:
    """`source` with its top-level import block laid out as ruff's isort would with `style`; as it
    is when the block holds comments or the module does not parse."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return source
    start = 1 if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else 0
    block = []
    for statement in body[start:]:
        if not isinstance(statement, (ast.Import, ast.ImportFrom)):
            break
        block.append(statement)
    if not block:
        return source
    lines = source.splitlines(keepends=True)
    first, last = block[0].lineno - 1, block[-1].end_lineno or block[-1].lineno
    following = body[start + len(block)].lineno - 1 if start + len(block) < len(body) else len(lines)
    written = {n for s in block for n in range(s.lineno - 1, s.end_lineno or s.lineno)}
    if any(lines[n].strip() and n not in written for n in range(first, last)):
        return source  # a comment inside the block: it belongs to a line isort would move
    decorated = []
    for statement in block:
        text = "".join(lines[statement.lineno - 1 : statement.end_lineno])
        for piece in _split(statement, text, style):
            decorated.append((_key(statement, style, first_party), piece))
    decorated.sort(key=lambda item: item[0])
    out: list[str] = []
    previous = None
    for key, text in decorated:
        if previous is not None and key[0] != previous[0]:
            out.append("\n")
        elif previous is not None and key[1] != previous[1]:
            out.append("\n" * style.lines_between_types)
        out.append(text)
        previous = key
    blank = sum(1 for n in range(last, following) if not lines[n].strip())
    if style.lines_after_imports >= 0 and following < len(lines):
        blank = style.lines_after_imports
    rest = [line for line in lines[last:following] if line.strip()]  # comments above the next statement
    return "".join([*lines[:first], *out, "\n" * blank, *rest, *lines[following:]])


def _split(statement: ast.Import | ast.ImportFrom, text: str, style: ImportStyle) -> list[str]:
    if not style.force_single_line or not isinstance(statement, ast.ImportFrom) or len(statement.names) == 1:
        return [text]
    module = "." * statement.level + (statement.module or "")
    return [
        f"from {module} import {alias.name}{f' as {alias.asname}' if alias.asname else ''}\n"
        for alias in statement.names
    ]


def _key(
    statement: ast.Import | ast.ImportFrom, style: ImportStyle, first_party: Callable[[str], bool]
) -> tuple[int, int, str]:
    if isinstance(statement, ast.Import):
        name, kind = statement.names[0].name, 0
    else:
        name, kind = statement.module or "", 1
    section = style.section_order.index(_section(name, getattr(statement, "level", 0), style, first_party))
    return section, 0 if style.force_sort_within_sections else kind, name.lower()


def _section(name: str, level: int, style: ImportStyle, first_party: Callable[[str], bool]) -> int:
    top = name.split(".")[0]
    if level:
        return _LOCAL
    if top == "__future__":
        return _FUTURE
    for known, section in (
        (style.known_local_folder, _LOCAL),
        (style.known_first_party, _FIRST_PARTY),
        (style.known_third_party, _THIRD_PARTY),
    ):
        if any(name == k or name.startswith(f"{k}.") for k in known):
            return section
    if top in sys.stdlib_module_names:
        return _STDLIB
    return _FIRST_PARTY if first_party(top) else _THIRD_PARTY

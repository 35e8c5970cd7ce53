"""The vendored copies of the helper in a project, and whether each is still the tool's: what a
scan needs of them (SCA004), apart from writing and placing them (`vendor`).

A line at a copy's top says where it came from: the tool version and a digest of its code, so that a
copy whose code was edited, or that an older tool wrote, is told from a current one, while a copy the
repo's formatter reformatted or that was given a header stays current.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import is_dotted
from ..ftypes import Finding
from ..orchestration.keys import blake2b
from ..rules import STALE_HELPER

if TYPE_CHECKING:
    from ..ftypes import Staleness

FILE_NAME = "inprocess.py"
SHIPPED = Path(__file__).resolve().parents[1] / "inprocess.py"
# Where a copy came from, among its first comment lines: "code" is the digest of its code as
# `code_digest` sees it; "blake2b" (copies of 0.1.0) the digest of the bytes after the header.
# Compiled when first used (`re` keeps it): most runs meet no copy.
_ATTRIBUTION = r"# Vendored from selfcall-audit (\S+) \(selfcall_audit/inprocess\.py, (code|blake2b) ([0-9a-f]{16,32})\)\."
_HEAD = 8192  # the license header and the attribution lie within


def _digest(data: bytes) -> str:
    return blake2b(data, digest_size=16).hexdigest()


def code_digest(data: bytes) -> str | None:
    """A digest of the module's code, blind to what a formatter, an import sorter or a header
    changes: comments, layout, quotes, the order of an import block, docstrings' whitespace.
    None when it does not parse."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        for name, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                setattr(node, name, _normalised(value))
    return blake2b(ast.dump(tree).encode(), digest_size=8).hexdigest()


def _normalised(body: list[ast.stmt]) -> list[ast.stmt]:
    """Docstrings with their whitespace collapsed; each run of imports as one import per name, sorted."""
    first = body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        first.value.value = " ".join(first.value.value.split())
    result: list[ast.stmt] = []
    run: list[ast.stmt] = []
    for statement in [*body, None]:
        if isinstance(statement, ast.Import):
            run += [ast.Import(names=[alias]) for alias in statement.names]
        elif isinstance(statement, ast.ImportFrom):
            run += [ast.ImportFrom(statement.module, [alias], statement.level) for alias in statement.names]
        else:
            result += sorted(run, key=ast.dump)
            run = []
            if statement is not None:
                result.append(statement)
    return result


def shipped_code(digest: Callable[[bytes], str | None] = code_digest) -> str:
    """The digest of the helper this tool ships, as `code_digest` (or the `digest` that stands for
    it) sees it."""
    code = digest(SHIPPED.read_bytes())
    assert code is not None  # the shipped helper parses
    return code


def _record(data: bytes) -> tuple[str, str, str, int] | None:
    """The version, digest kind and digest a copy's attribution records, and where the line ends;
    only its leading comment lines are read."""
    offset = 0
    for line in data[:_HEAD].splitlines(keepends=True):
        if not line.startswith(b"#") and line.strip():
            return None
        match = re.match(_ATTRIBUTION, line.decode("utf-8", "replace"))
        if match is not None:
            return match[1], match[2], match[3], offset + len(line)
        offset += len(line)
    return None


def is_vendored(data: bytes) -> bool:
    return _record(data) is not None


def staleness(
    data: bytes, digest: Callable[[bytes], str | None] = code_digest
) -> tuple[Staleness, str] | None:
    """How a vendored copy is not the tool's helper ("edited" or "outdated") and the version that
    wrote it, or None when its code is the tool's, however it was formatted or headed. `digest`:
    `code_digest`, or what stands for it (the same, remembered between runs)."""
    record = _record(data)
    if record is None:
        return None
    version, kind, recorded, end = record
    code = digest(data)
    if code == shipped_code(digest):
        return None
    if kind == "code":
        edited = code != recorded
    else:  # the two-line header of 0.1.0, then the module as it shipped
        rest = data[end:]
        edited = _digest(rest[rest.find(b"\n") + 1 :]) != recorded
    return ("edited" if edited else "outdated"), version


def module_file(root: Path, module: str) -> str | None:
    """The project file that holds `module` (or would, when its top-level package is in the
    project); None for a module from outside the project."""
    parts = module.split(".")
    for base in ("", "src/"):
        if (root / base / parts[0]).is_dir():
            package = root / base / Path(*parts)
            if (package / "__init__.py").is_file():
                return f"{base}{'/'.join(parts)}/__init__.py"
            return f"{base}{'/'.join(parts)}.py"
    return None


def stale_copies(
    root: Path, sources: tuple[str, ...], helper: str, digest: Callable[[bytes], str | None] = code_digest
) -> list[Finding]:
    """SCA004 for each vendored copy in the project that was edited or is older than the tool's:
    files named like the default copy, and the module the `helper` setting names. `digest` as
    for `staleness`."""
    in_folder = f"/{FILE_NAME}"  # read on every edit of a language server's buffer: no list per path
    candidates = {rel for rel in sources if rel == FILE_NAME or rel.endswith(in_folder)}
    if helper and ":" in helper and is_dotted(module := helper.partition(":")[0]):
        named = module_file(root, module)
        if named is not None:
            candidates.add(named)
    findings = []
    for rel in sorted(candidates):
        try:
            with open(root / rel, "rb") as stream:
                head = stream.read(_HEAD)
                if not is_vendored(head):
                    continue
                data = head + stream.read()
        except OSError:
            continue
        stale = staleness(data, digest)
        if stale is not None:
            findings.append(
                Finding(
                    code=STALE_HELPER,
                    path=rel,
                    line=1,
                    column=1,
                    end_line=1,
                    end_column=1,
                    agent="",
                    method="",
                    stale=stale[0],
                    stale_version=stale[1],
                )
            )
    return findings

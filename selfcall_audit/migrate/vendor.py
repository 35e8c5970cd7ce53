"""The helper as a file of the audited repo, so that the migrated code runs without selfcall-audit.

`fix` writes a copy of `selfcall_audit/inprocess.py` (one self-contained module) into the repo, in
the repo's own form (`house_style`), and imports it from there. A line at its top says where it
came from: the tool version and a digest of its code, so that `scan` can tell a copy whose code was
edited, or that an older tool wrote, from a current one (SCA004), while a copy the repo's formatter
reformatted or that was given a header stays current.
This module is imported by every scan: it uses the standard library only.
"""

from __future__ import annotations

import ast
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from .. import __version__
from ..config import HELPER_NAME, is_dotted
from ..ftypes import Finding
from ..orchestration.cache import blake2b
from ..report.messages import refresh_command
from ..rules import STALE_HELPER
from ..workspace.discovery import find_root
from ..workspace.write import atomic_write, new_file_mode, resolved_inside
from .house_style import import_style, is_first_party, license_header, sorted_imports

if TYPE_CHECKING:
    from ..ftypes import Staleness

FILE_NAME = "inprocess.py"
# The package next to NeMo Gym's server_utils.py: the agents import it wherever they run.
DEFAULT_PACKAGES = ("nemo_gym", "src/nemo_gym")
_SHIPPED = Path(__file__).resolve().parents[1] / "inprocess.py"
# Where a copy came from, among its first comment lines: "code" is the digest of its code as
# `code_digest` sees it; "blake2b" (copies of 0.1.0) the digest of the bytes after the header.
_ATTRIBUTION = re.compile(
    r"# Vendored from selfcall-audit (\S+) \(selfcall_audit/inprocess\.py, (code|blake2b) ([0-9a-f]{16,32})\)\."
)
_HEAD = 8192  # the license header and the attribution lie within


class VendorError(Exception):
    """The helper cannot be vendored where asked (an existing different file, not a .py path, ...)."""


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


def helper_source(rel: str | None = None, root: Path | None = None) -> bytes:
    """The helper module in the form of the repo at `root` it is written to (at `rel`): the license
    header of its neighbouring modules, one line on where it came from, the repo's import layout."""
    body = _SHIPPED.read_text(encoding="utf-8")
    header = ""
    if root is not None and rel is not None:
        target = root / rel
        header = license_header(target.parent, exclude=target)
        body = sorted_imports(body, import_style(root), lambda name: is_first_party(root, name))
    where = rel or "<this file>"
    attribution = (
        f"# Vendored from selfcall-audit {__version__} (selfcall_audit/inprocess.py, code {_shipped_code()}).\n"
        f"# Do not edit: refresh it with `{refresh_command(where)}`.\n"
    )
    return (f"{header}\n" if header else "").encode() + attribution.encode() + body.encode()


def _shipped_code() -> str:
    digest = code_digest(_SHIPPED.read_bytes())
    assert digest is not None  # the shipped helper parses
    return digest


def _record(data: bytes) -> tuple[str, str, str, int] | None:
    """The version, digest kind and digest a copy's attribution records, and where the line ends;
    only its leading comment lines are read."""
    offset = 0
    for line in data[:_HEAD].splitlines(keepends=True):
        if not line.startswith(b"#") and line.strip():
            return None
        match = _ATTRIBUTION.match(line.decode("utf-8", "replace"))
        if match is not None:
            return match[1], match[2], match[3], offset + len(line)
        offset += len(line)
    return None


def is_vendored(data: bytes) -> bool:
    return _record(data) is not None


def staleness(data: bytes) -> tuple[Staleness, str] | None:
    """How a vendored copy is not the tool's helper ("edited" or "outdated") and the version that
    wrote it, or None when its code is the tool's, however it was formatted or headed."""
    record = _record(data)
    if record is None:
        return None
    version, kind, digest, end = record
    code = code_digest(data)
    if code == _shipped_code():
        return None
    if kind == "code":
        edited = code != digest
    else:  # the two-line header of 0.1.0, then the module as it shipped
        rest = data[end:]
        edited = _digest(rest[rest.find(b"\n") + 1 :]) != digest
    return ("edited" if edited else "outdated"), version


def vendor_helper(target: Path, force: bool = False) -> tuple[Path, bool]:
    """Write the helper to `target` (a folder means `target/inprocess.py`); False if already there."""
    path = target / FILE_NAME if target.is_dir() or not target.suffix else target
    if path.suffix != ".py":
        raise VendorError(f"{path} is not a .py file")
    root = find_root(path.parent if path.parent.exists() else Path.cwd())
    resolved = path.resolve()
    rel = resolved.relative_to(root.resolve()).as_posix() if resolved.is_relative_to(root.resolve()) else None
    source = helper_source(rel, root) if rel is not None else helper_source()
    if path.is_file():
        current = path.read_bytes()
        if current == source or (is_vendored(current) and staleness(current) is None and not force):
            return path, False
        if not force:
            raise VendorError(f"{path} exists and differs from the helper; pass --force to overwrite it")
        mode = stat.S_IMODE(path.stat().st_mode)
    elif path.exists():
        raise VendorError(f"{path} exists and is not a file")
    else:
        mode = new_file_mode()
        path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, source, mode)
    return path, True


def helper_spec_for(path: Path, name: str = HELPER_NAME) -> str | None:
    """The `--helper` value that imports the vendored file, from its place in the project."""
    path = path.resolve()
    root = find_root(path.parent)
    parts = list(path.relative_to(root).with_suffix("").parts) if path.is_relative_to(root) else []
    if len(parts) > 1 and parts[0] == "src" and not (root / "src" / "__init__.py").exists():
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    module = ".".join(parts)
    return f"{module}:{name}" if is_dotted(module) else None


# --------------------------------------------------------------------------------------------
# Where `fix` puts the helper
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """The helper `fix` rewrites calls to, and the project file to write it to first (if any)."""

    spec: str  # MODULE:NAME
    write_to: str | None = None  # relative to the root; None: the module is there or installed


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


def place_helper(root: Path, spec: str | None) -> Placement | None:
    """Where the helper is, from `--helper`/the `helper` setting (`spec`), else the default place:
    `nemo_gym/inprocess.py`; None when there is no `nemo_gym` package (see `place_beside`).

    A module of the project that does not exist yet is where the helper gets written; a module
    outside the project (e.g. `selfcall_audit.inprocess`) is imported as installed.
    """
    if not spec:
        package = next((p for p in DEFAULT_PACKAGES if (root / p).is_dir()), None)
        return None if package is None else _placed(root, f"{package}/{FILE_NAME}")
    module, _, name = spec.partition(":")
    if module.split(".")[0] == "selfcall_audit":
        return Placement(spec)
    rel = module_file(root, module)
    if rel is None or (root / rel).exists():
        return Placement(spec)
    if name != HELPER_NAME:
        raise VendorError(
            f"{rel} does not exist; the helper fix writes there is named {HELPER_NAME}, not {name}"
        )
    check_place(root, rel)
    return Placement(spec, rel)


def place_beside(root: Path, rewritten: list[str]) -> Placement:
    """Without a `nemo_gym` package: the helper in the deepest folder holding every rewritten file."""
    folder = PurePosixPath(os.path.commonpath([PurePosixPath(rel).parent.as_posix() for rel in rewritten]))
    if folder.parts and all(is_dotted(part) for part in folder.parts):
        return _placed(root, f"{folder}/{FILE_NAME}")
    raise VendorError(
        "no `nemo_gym` package and no package holding every rewritten file to put the in-process "
        f'helper in: set `helper = "PACKAGE.inprocess:{HELPER_NAME}"` under [tool.selfcall-audit] '
        f"(fix writes the helper there), or pass `--helper selfcall_audit.inprocess:{HELPER_NAME}` to "
        "import it from selfcall-audit at run time"
    )


def _placed(root: Path, rel: str) -> Placement:
    parts = rel.removesuffix(".py").split("/")
    spec = f"{'.'.join(parts[1:] if parts[0] == 'src' else parts)}:{HELPER_NAME}"
    path = root / rel
    if not path.exists():
        check_place(root, rel)
        return Placement(spec, rel)
    if not path.is_file() or not is_vendored(path.read_bytes()):
        raise VendorError(
            f"{rel} exists and is not the vendored helper: set `helper` under [tool.selfcall-audit] "
            "to the module fix should write the helper to"
        )
    return Placement(spec)


def check_place(root: Path, rel: str) -> None:
    """Can the copy go to `rel`? Not through a folder linked out of the project, nor below a
    file: refused when `fix` plans (so that nothing is written), and again just before it writes."""
    if resolved_inside(root, rel) is None:
        raise VendorError(
            f"{rel} resolves outside the project root, through a link; the helper is not written there: "
            "set `helper` under [tool.selfcall-audit] to a module inside the project"
        )
    for folder in PurePosixPath(rel).parents:
        if (root / folder).exists() and not (root / folder).is_dir():
            raise VendorError(f"{rel} cannot be written: {folder} is not a folder")


# --------------------------------------------------------------------------------------------
# SCA004: a vendored copy that is not the tool's helper
# --------------------------------------------------------------------------------------------


def stale_copies(root: Path, sources: tuple[str, ...], helper: str) -> list[Finding]:
    """SCA004 for each vendored copy in the project that was edited or is older than the tool's:
    files named like the default copy, and the module the `helper` setting names."""
    candidates = {rel for rel in sources if rel.rsplit("/", 1)[-1] == FILE_NAME}
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
        stale = staleness(data)
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

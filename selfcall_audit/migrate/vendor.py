"""The helper as a file of the audited repo, so that the migrated code runs without selfcall-audit.

`fix` writes a copy of `selfcall_audit/inprocess.py` (one self-contained module) into the repo, in
the repo's own form (`house_style`), with a line at its top that says where it came from
(`copies`), and imports it from there.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from .. import __version__
from ..config import HELPER_NAME, is_dotted
from ..report.messages import refresh_command
from ..workspace.discovery import find_root
from ..workspace.write import atomic_write, new_file_mode, resolved_inside
from .copies import FILE_NAME, SHIPPED, is_vendored, module_file, shipped_code, staleness
from .house_style import import_style, is_first_party, license_header, sorted_imports

if TYPE_CHECKING:
    from ..config import Settings


# The package next to NeMo Gym's server_utils.py: the agents import it wherever they run.
DEFAULT_PACKAGES = ("nemo_gym", "src/nemo_gym")


class VendorError(Exception):
    """The helper cannot be vendored where asked (an existing different file, not a .py path, ...)."""


def helper_source(rel: str | None = None, root: Path | None = None) -> bytes:
    """The helper module in the form of the repo at `root` it is written to (at `rel`): the license
    header of its neighbouring modules, one line on where it came from, the repo's import layout."""
    body = SHIPPED.read_text(encoding="utf-8")
    header = ""
    if root is not None and rel is not None:
        target = root / rel
        header = license_header(target.parent, exclude=target)
        body = sorted_imports(body, import_style(root), lambda name: is_first_party(root, name))
    where = rel or "<this file>"
    attribution = (
        f"# Vendored from selfcall-audit {__version__} (selfcall_audit/inprocess.py, code {shipped_code()}).\n"
        f"# Do not edit: refresh it with `{refresh_command(where)}`.\n"
    )
    return (f"{header}\n" if header else "").encode() + attribution.encode() + body.encode()


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


def helper_placement(root: Path, settings: Settings, rewritten: list[str]) -> Placement:
    """The helper `fix` makes the rewritten files (root-relative) call, and where its copy goes:
    the `helper` setting, else `nemo_gym/inprocess.py`, else beside the rewritten files.
    ValueError or VendorError when it cannot go there."""
    return place_helper(root, settings.helper) or place_beside(root, rewritten)


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

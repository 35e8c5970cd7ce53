"""Writing `fix`'s results without losing anyone's work.

Each file is rewritten only if it is, at the moment of the swap, exactly what was analysed: the
new text goes to a temporary file beside it (same owner, group and mode), the two are swapped,
and the old file checked after the swap and put back if it is not what was analysed, so an edit
saved at any moment up to the swap is kept and the file reported as not rewritten.
Nothing is written outside the project root, nor through a link that leads out of it. SIGINT
and SIGTERM wait for the file being written, then stop: no temporary file is left, and the
caller learns which files were rewritten.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

from ..ftypes import Progress
from .discovery import UnreadableFile, read_file
from .signals import deferred_signals, signals_held

_MAX_SIZE = 1 << 30  # the analysed file's size bounds what is compared; this only bounds the read


class Change(Protocol):
    """A file to rewrite: its root-relative path, the bytes analysed and the new bytes."""

    path: str
    before: bytes
    after: bytes


class Refused(Exception):
    """The file was left as it is, for the reason given."""


class WriteResult(NamedTuple):
    written: tuple[str, ...]  # in the order they were written
    refused: dict[str, str]  # path → why it was left as it is
    failed: dict[str, str]  # path → the I/O error that stopped its writing (left as it was)
    interrupted: int | None  # the signal that stopped the writing; later files were not touched


def write_all(root: Path, changes: Sequence[Change], progress: Progress | None = None) -> WriteResult:
    """Rewrite each file in turn (`progress`: a `rewriting` phase counting them); a signal stops
    the run between two files."""
    written: list[str] = []
    refused: dict[str, str] = {}
    failed: dict[str, str] = {}
    if progress is not None:
        progress.phase("rewriting")
    with deferred_signals() as received:
        for done, change in enumerate(changes, 1):
            if received:
                break
            if progress is not None:
                progress(change.path, done, len(changes))
            try:
                write_checked(root, change.path, change.before, change.after)
            except Refused as exc:
                refused[change.path] = str(exc)
            except OSError as exc:
                failed[change.path] = f"cannot write the file: {exc.strerror or exc}"
            else:
                written.append(change.path)
    return WriteResult(tuple(written), refused, failed, received[0] if received else None)


def resolved_inside(root: Path, rel: str) -> str | None:
    """Where `rel` leads through every link, relative to the root's real path; None when that is
    outside the root (or the root itself): nothing is written there."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(root / rel)
    if real == real_root or os.path.commonpath([real_root, real]) != real_root:
        return None
    return Path(os.path.relpath(real, real_root)).as_posix()


def write_checked(root: Path, rel: str, before: bytes, after: bytes) -> None:
    """Replace the file at `rel` by `after` if it holds `before`, keeping its owner, group and
    mode; Refused (and the file as it is) otherwise."""
    inside = resolved_inside(root, rel)
    if inside is None:
        raise Refused("the file resolves outside the project root; it was not written")
    target = Path(os.path.realpath(root), inside)
    try:
        status = os.stat(target)
        current = read_file(target, _MAX_SIZE)
    except (FileNotFoundError, UnreadableFile):
        raise Refused("the file was removed or replaced since it was analysed") from None
    if current != before:
        raise Refused("the file changed since it was analysed; run `selfcall-audit fix` again")
    if status.st_nlink > 1:
        raise Refused(
            f"the file has {status.st_nlink - 1} other hard link(s), which a rewrite would split; "
            "rewrite it by hand"
        )
    temporary = _temporary_copy(target, after, status)
    try:
        _swap(target, temporary, before)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


# A new file, never one that exists nor through a link, closed in child processes.
_NEW = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def new_temporary(target: Path) -> tuple[int, str]:
    """A new file beside `target`, open for writing, readable by its owner only, under a name no
    other run can have taken: what `tempfile.mkstemp` makes, without the modules it loads (a
    sixtieth of a warm scan)."""
    while True:
        name = os.path.join(target.parent, f".{target.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(name, _NEW, 0o600), name
        except FileExistsError:
            continue


def _temporary_copy(target: Path, data: bytes, status: os.stat_result) -> str:
    """`data` in a new file beside `target`, with the owner, group and mode of `status`."""
    handle, temporary = new_temporary(target)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            if hasattr(os, "fchown") and (status.st_uid, status.st_gid) != (os.getuid(), os.getgid()):
                try:
                    os.fchown(stream.fileno(), status.st_uid, status.st_gid)
                except PermissionError:
                    raise Refused(
                        "the file belongs to another user or group, which a rewrite by this user "
                        "would change; it was not written"
                    ) from None
            os.fsync(stream.fileno())
        os.chmod(temporary, stat.S_IMODE(status.st_mode))  # after chown, which clears set-id bits
    except BaseException:
        os.unlink(temporary)
        raise
    return temporary


def _swap(target: Path, temporary: str, before: bytes) -> None:
    """Put `temporary` in the place of `target` if `target` still holds `before` at that moment.

    Where the system can swap two names in one step (Linux), it does, then checks the old file
    and swaps back if it is not the one analysed. Elsewhere the file is moved aside and the new
    one linked in its place (which fails if a new file was saved there meanwhile), then the old
    one is checked and put back if it was edited; readers may find no file for the moment
    between the two steps."""
    if _exchange(temporary, target):
        if _read(temporary) != before:  # the file as it was at the swap, now under the temporary name
            _exchange(temporary, target)
            raise Refused(_EDITED)
        return
    aside = f"{temporary[: -len('.tmp')]}.orig"
    os.rename(target, aside)
    try:
        _link_in_place(temporary, target, aside)
        if _read(aside) != before:  # edited before it was moved aside
            os.replace(aside, target)
            raise Refused(_EDITED)
        os.unlink(aside)
    except OSError:  # an I/O error half way: the file goes back where it was
        if not os.path.lexists(target):
            os.rename(aside, target)
        raise


def _link_in_place(temporary: str, target: Path, aside: str) -> None:
    try:
        os.link(temporary, target)
    except FileExistsError:  # saved anew while aside: the new save stays, the old text is not needed
        os.unlink(aside)
        raise Refused(_EDITED) from None
    except OSError:  # a file system without hard links: rename, unless something is there
        if os.path.lexists(target):
            os.unlink(aside)
            raise Refused(_EDITED) from None
        os.rename(temporary, target)


def _exchange(first: str | Path, second: str | Path) -> bool:
    """Swap two names in one step (Linux's renameat2 with RENAME_EXCHANGE); False where the
    system or the file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second), rename_exchange) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(error, os.strerror(error), os.fspath(second))


_EDITED = (
    "the file was edited while it was being rewritten; the edit was kept and the file not rewritten: "
    "run `selfcall-audit fix` again"
)


def _read(path: str) -> bytes | None:
    try:
        return read_file(Path(path), _MAX_SIZE)
    except UnreadableFile:
        return None


def atomic_write(target: Path, data: bytes, mode: int, owner: tuple[int, int] | None = None) -> None:
    """Write a temporary file next to `target`, then rename it over: readers never see half a file.
    SIGINT and SIGTERM act once the file is in place, so that no temporary file is left behind.
    `owner`: the user and group the file keeps."""
    with signals_held():
        handle, temporary = new_temporary(target)
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
                stream.flush()
                if owner is not None and owner != (os.geteuid(), os.getegid()):
                    os.fchown(stream.fileno(), *owner)
                os.fsync(stream.fileno())
            os.chmod(temporary, mode)  # after chown, which clears set-id bits
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise


def new_file_mode() -> int:
    """The mode `open` would give a new file: the umask's (read only by setting it)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def replace_file(path: Path, data: bytes) -> None:
    """`data` in place of the file `path` names (through links), swapped in whole so that a full
    disk or a signal leaves the old file as it was, with its owner, group and mode; a new file
    gets the umask's mode. What is not a regular file (`/dev/stdout`, a pipe), or is another
    user's that only root could give back, is written in place, as its mode lets us."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        atomic_write(path, data, new_file_mode())
        return
    posix = hasattr(os, "fchown")
    if not stat.S_ISREG(status.st_mode) or (posix and os.geteuid() not in (0, status.st_uid)):
        path.write_bytes(data)
        return
    owner = (status.st_uid, status.st_gid) if posix else None
    atomic_write(Path(os.path.realpath(path)), data, stat.S_IMODE(status.st_mode), owner)

"""Cache entries on disk, as only this tool writes them: signed with a key kept outside the
repository and checked before anything is loaded (a cache folder committed with a checkout cannot
hide a self-call), each written atomically so concurrent runs never see half a file, and never
through a symbolic link.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import stat
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from .discovery import UnreadableFile, read_file
from .write import new_temporary

try:  # straight from the module hashlib takes it from: hashlib would also load OpenSSL
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without it
    from hashlib import blake2b

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any


NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_KEY_SIZE = 32
_MAX_ENTRY_SIZE = 1 << 30  # far above any real entry; what stops a link to /dev/zero is `read_file`


def marshalled(value: Any) -> bytes:
    """An entry's plain data as stored: marshal, which holds data only and cannot run code."""
    return marshal.dumps(value, 4)


@lru_cache(maxsize=1)
def signing_key() -> bytes | None:
    """A random key kept in the user's cache folder, outside any repository: entries signed with
    it cannot be forged by a cache folder that arrives with a checkout. None: no caching."""
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "selfcall-audit"
    path = home / "signing-key"
    if not os.path.lexists(path):
        try:
            home.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o600)
            key = os.urandom(_KEY_SIZE)
            with os.fdopen(fd, "wb") as handle:
                handle.write(key)
            return key
        except FileExistsError:  # another run created it first
            pass
        except OSError:
            return None
    try:  # a regular file only, read within bounds: a named pipe or /dev/zero there is no key
        key = read_file(path, _KEY_SIZE)
    except UnreadableFile:
        return None
    return key if len(key) == _KEY_SIZE else None  # cut short by a full disk: not a key either


def _signature(key: bytes, payload: bytes) -> bytes:
    return blake2b(payload, key=key[:64], digest_size=16).hexdigest().encode()


def _same(key: bytes, a: bytes, b: bytes) -> bool:
    """A comparison whose time tells nothing about where the inputs differ (hmac's double-MAC way:
    hmac itself would load OpenSSL)."""
    return blake2b(a, key=key[:64]).digest() == blake2b(b, key=key[:64]).digest()


def load(path: Path, key: bytes) -> Any:
    """An entry's value, or None if it is missing, damaged or not signed with our key. Only bytes
    this tool wrote reach `marshal` (it is not meant for data from elsewhere)."""
    payload = signed_payload(path, key)
    try:
        return None if payload is None else marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None


def signed_payload(path: Path, key: bytes) -> bytes | None:
    """The entry's payload if it is a regular file (not a link) signed with our key."""
    if os.path.islink(path):
        return None
    try:
        signature, _, payload = read_file(path, _MAX_ENTRY_SIZE).partition(b"\n")
    except UnreadableFile:
        return None
    return payload if _same(key, signature, _signature(key, payload)) else None


def ours(path: Path, key: bytes) -> bool:
    """Did this tool write the file? Only then may cleaning delete it."""
    return signed_payload(path, key) is not None


def is_folder(path: Path) -> bool:
    """A directory itself, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def dump(path: Path, key: bytes, data: bytes) -> None:
    """Written under a name of its own, then renamed over the entry: readers see all or nothing."""
    handle, temp = new_temporary(path)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(_signature(key, data) + b"\n" + data)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def real_folders(root: Path, folders: Iterable[str]) -> bool:
    """Is each of these root-relative folders, where it exists, a folder of its own: neither a
    symbolic link nor anything else but a directory, nor below one?"""
    for folder in folders:
        path = root
        for part in Path(folder).parts:
            path = path / part
            try:
                if not stat.S_ISDIR(os.lstat(path).st_mode):
                    return False
            except FileNotFoundError:
                break
            except OSError:
                return False
    return True


def make_folders(root: Path, folder: str) -> None:
    """Create the root-relative `folder` one level at a time, none through a symbolic link."""
    path = root
    for part in Path(folder).parts:
        path = path / part
        try:
            os.mkdir(path)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                raise NotADirectoryError(path) from None

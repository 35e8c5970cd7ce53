"""The cache answers for files' content, never for their size and modification time alone: an edit
that keeps both (`cp -p`, `rsync -t`, a fixed SOURCE_DATE_EPOCH put the time back) is seen by the
next scan, whole or of one file, and a file that could not be read once is read again."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_support import run_main
from safety_support import APP, BEFORE, make_project

from selfcall_audit.frontends.cli import main
from selfcall_audit.orchestration import inputs
from selfcall_audit.orchestration.cache import FactsCache
from selfcall_audit.workspace import discovery

SELF_CALL = b'server_name=self.config.name,\n            url_path="/v1/responses"'
# The same length, naming no server the scan can resolve: no finding.
OTHER_CALL = b'server_name=self.config.nick,\n            url_path="/v1/responses"'
SELF_CALL_LINE = 34


def _put_back_time(path: Path, data: bytes) -> None:
    """Write `data` over the file and give it back its size's twin's modification time, as
    `cp -p` or `rsync -t` do."""
    before = path.stat()
    assert len(data) == before.st_size
    path.write_bytes(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def _lines(done) -> list[int]:
    return [f["line"] for f in json.loads(done.stdout)["findings"] if f["path"] == APP]


@pytest.mark.parametrize(
    ("first", "second"),
    [((), ()), ((), (APP,)), ((APP,), (APP,))],
    ids=["whole then whole", "whole then one file", "one file then one file"],
)
def test_a_same_size_edit_with_its_time_put_back_is_seen(
    tmp_path: Path, first: tuple[str, ...], second: tuple[str, ...]
) -> None:
    root = make_project(tmp_path / "repo")
    assert SELF_CALL in BEFORE
    app = root / APP
    app.write_bytes(BEFORE.replace(SELF_CALL, OTHER_CALL))
    warm = run_main(["scan", "--format", "json", *first], cwd=root)
    assert (warm.exit_code, _lines(warm)) == (0, []), warm.stderr

    _put_back_time(app, BEFORE)
    done = run_main(["scan", "--format", "json", *second], cwd=root)

    assert (done.exit_code, _lines(done)) == (1, [SELF_CALL_LINE]), done.stderr


def test_a_file_unreadable_once_is_read_again_once_it_can_be(cli, tmp_path: Path, monkeypatch) -> None:
    """Opening the file fails as `chmod 000` makes it fail (which root, running CI, ignores)."""
    root = make_project(tmp_path / "repo")
    real_open = os.open

    def os_open(path, flags, *args, **kwargs):
        if str(path).endswith(APP):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(discovery.os, "open", os_open)
        blocked = json.loads(cli("scan", root, "--format", "json").stdout)
    assert [(e["path"], e["message"]) for e in blocked["errors"]] == [(APP, "cannot read: Permission denied")]

    report = json.loads(cli("scan", root, "--format", "json").stdout)  # the permission is back

    assert report["errors"] == []
    assert [(f["path"], f["line"]) for f in report["findings"]] == [(APP, SELF_CALL_LINE)]


def test_a_settled_file_is_not_read_again_until_its_status_changes(tmp_path: Path, monkeypatch) -> None:
    """Content keys are kept with each file's status, change time included: a second scan reads no
    file, and the same-size edit with its modification time put back is read, its self-call seen.
    The listing trusts a status half a second old here (two seconds by default): the waits are
    what the test spends, the rule is the same."""
    monkeypatch.setattr(discovery, "SETTLE_NS", 500_000_000)
    root = make_project(tmp_path / "repo")
    app = root / APP
    app.write_bytes(BEFORE.replace(SELF_CALL, OTHER_CALL))
    time.sleep(discovery.SETTLE_NS / 1e9 + 0.1)  # until the listing trusts the files' statuses
    monkeypatch.chdir(root)
    assert _lines(run_main(["scan", "--format", "json"])) == []
    reads = []
    real_read = inputs.read_file
    monkeypatch.setattr(inputs, "read_file", lambda path, *a: reads.append(path) or real_read(path, *a))

    assert main(["scan", "--format", "json"]) == 0
    assert reads == []

    _put_back_time(app, BEFORE)
    time.sleep(discovery.SETTLE_NS / 1e9 + 0.1)  # settled again: only its change time tells
    assert main(["scan", "--format", "json"]) == 1
    assert APP in [os.path.relpath(path, root) for path in reads]


def test_files_first_scanned_before_they_settled_are_not_read_again_once_they_have(
    tmp_path: Path, monkeypatch
) -> None:
    """A checkout scanned at once (a CI job, `git switch` then the hook) leaves no trusted status;
    the next scan, answered from the stored result, reads the files and records their keys with
    their now settled statuses, so the one after it reads none."""
    root = make_project(tmp_path / "repo")
    monkeypatch.chdir(root)
    monkeypatch.setattr(discovery, "SETTLE_NS", 3600 * 10**9)  # no file has settled
    assert main(["scan", "--format", "json"]) == 1
    monkeypatch.setattr(discovery, "SETTLE_NS", 0)  # every file has
    reads = []
    real_read = inputs.read_file
    monkeypatch.setattr(inputs, "read_file", lambda path, *a: reads.append(path) or real_read(path, *a))
    assert main(["scan", "--format", "json"]) == 1
    assert APP in [os.path.relpath(path, root) for path in reads]
    reads.clear()

    assert main(["scan", "--format", "json"]) == 1
    assert reads == []


def _key_lookups(monkeypatch) -> list[str]:
    """The files whose recorded content key the cache is asked for from now on."""
    looked_up: list[str] = []
    real_known_key, real_known_keys = FactsCache.known_key, FactsCache.known_keys
    monkeypatch.setattr(
        FactsCache,
        "known_key",
        lambda self, rel, status: looked_up.append(rel) or real_known_key(self, rel, status),
    )
    monkeypatch.setattr(
        FactsCache,
        "known_keys",
        lambda self, statuses: looked_up.extend(statuses) or real_known_keys(self, statuses),
    )
    return looked_up


def test_a_warm_scan_of_settled_files_looks_up_no_content_key(tmp_path: Path, monkeypatch) -> None:
    """Every listed file's status as when the last result's fingerprint was worked out: that
    fingerprint is taken whole (one digest of the statuses compared), not rebuilt from a content
    key per file. The same-size edit above, seen through this shortcut too, keeps it honest."""
    monkeypatch.setattr(discovery, "SETTLE_NS", 0)  # every file has settled
    root = make_project(tmp_path / "repo")
    monkeypatch.chdir(root)
    first = run_main(["scan", "--format", "json"])
    looked_up = _key_lookups(monkeypatch)

    again = run_main(["scan", "--format", "json"])

    assert (again.exit_code, _lines(again)) == (first.exit_code, _lines(first)) == (1, [SELF_CALL_LINE])
    assert looked_up == []


def test_a_file_rewritten_with_the_same_bytes_a_moment_ago_is_the_only_file_read(
    tmp_path: Path, monkeypatch
) -> None:
    """A file written a moment ago (a formatter that changed nothing, a checkout that put it back)
    has not settled: its status vouches for nothing, so it is read and hashed again, and while its
    bytes are those of the last scan the listing's fingerprint is taken whole, no other file's key
    looked up. Other bytes, even of the same size with the time put back, are seen as ever."""
    root = make_project(tmp_path / "repo")
    monkeypatch.chdir(root)
    time.sleep(0.3)
    app = root / APP
    app.write_bytes(app.read_bytes())
    # the listing's clock stopped 0.1 s after that write, trusting statuses 0.2 s old: every file
    # but the one just written has settled, however long the scans below take
    now = app.stat().st_ctime_ns + 100_000_000
    monkeypatch.setattr(discovery, "time", SimpleNamespace(time_ns=lambda: now))
    monkeypatch.setattr(discovery, "SETTLE_NS", 200_000_000)
    first = run_main(["scan", "--format", "json"])
    reads = []
    real_read = inputs.read_file
    monkeypatch.setattr(inputs, "read_file", lambda path, *a: reads.append(path) or real_read(path, *a))
    looked_up = _key_lookups(monkeypatch)

    again = run_main(["scan", "--format", "json"])

    assert (again.exit_code, _lines(again)) == (first.exit_code, _lines(first)) == (1, [SELF_CALL_LINE])
    assert [os.path.relpath(path, root) for path in reads] == [APP]
    assert set(looked_up) <= {APP}  # no other file's key looked up

    _put_back_time(app, BEFORE.replace(SELF_CALL, OTHER_CALL))
    done = run_main(["scan", "--format", "json"])

    assert (done.exit_code, _lines(done)) == (0, []), done.stderr

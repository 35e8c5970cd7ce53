"""`fix` never writes outside the project, never loses an edit, keeps ownership, and cleans up
after signals; worker processes never outlive the run. Signals, concurrent runs and the end-to-end
(slow) tests use real commands; the rest call `main(argv)` in-process."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_support import run_main
from safety_support import (
    AFTER,
    APP,
    BEFORE,
    CASES,
    as_in_a_terminal,
    children,
    command_line,
    interrupted,
    make_project,
    run,
)

from selfcall_audit.migrate.vendor import helper_source

pytestmark = pytest.mark.skipif(os.name != "posix", reason="links, ownership and signals as POSIX has them")


@pytest.mark.slow
def test_a_file_reached_through_a_folder_link_leading_outside_is_not_written(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")
    outside = tmp_path / "outside" / "a" / "app.py"
    outside.parent.mkdir(parents=True)
    outside.write_bytes(BEFORE)
    (root / "responses_api_agents" / "a").symlink_to(outside.parent)

    done = run("fix", "--no-cache", "responses_api_agents/a/app.py", cwd=root)

    assert outside.read_bytes() == BEFORE
    assert "rewrote" not in done.stdout.lower()


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file away needs root")
def test_fix_run_by_root_keeps_the_owner_group_and_mode_of_another_users_file(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")
    app = root / APP
    os.chown(app, 12345, 23456)
    app.chmod(0o640)

    done = run("fix", "--no-cache", root)

    status = app.stat()
    assert done.returncode == 0, done.stdout + done.stderr
    assert app.read_bytes() == AFTER
    assert (status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)) == (12345, 23456, 0o640)


@pytest.mark.slow
def test_a_file_with_other_hard_links_is_left_whole_with_the_reason(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")
    twin = tmp_path / "twin.py"
    os.link(root / APP, twin)

    done = run("fix", "--no-cache", root)

    assert done.returncode == 1
    assert "other hard link(s)" in done.stdout
    assert (root / APP).read_bytes() == BEFORE and os.path.samefile(root / APP, twin)


@pytest.mark.slow
def test_a_helper_copy_no_rewritten_file_imports_is_not_left_behind(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")
    (root / "pyproject.toml").write_text('[project]\nname = "toy"\n')  # the helper is vendored
    os.link(root / APP, tmp_path / "twin.py")  # its one rewrite is refused as it is written

    done = run("fix", "--no-cache", root)

    assert done.returncode == 1
    assert "other hard link(s)" in done.stdout
    assert not (root / "nemo_gym" / "inprocess.py").exists()
    assert "in-process helper" not in done.stdout
    assert (root / APP).read_bytes() == BEFORE


# an edit saved at the very moment of the swap ------------------------------------------------

# Runs the command with every call that can swap files wrapped (the file system's rename and link,
# and the one-step swap `fix` uses where the system has one) so that the first one that touches
# the file saves an edit to it just before: the latest moment an editor can save. With
# "no-exchange", the one-step swap is reported unavailable, as on other systems.
_EDIT_AT_THE_SWAP = """
import os, sys
target = os.path.realpath(sys.argv[1])
mode = sys.argv[2]
sys.argv = ["selfcall-audit", *sys.argv[3:]]
swaps = [(os, "rename"), (os, "replace"), (os, "link")]
try:
    from selfcall_audit.workspace import write
except ImportError:  # a version without it
    write = None
if write is not None and hasattr(write, "_exchange"):
    if mode == "no-exchange":
        write._exchange = lambda first, second: False
    swaps.append((write, "_exchange"))
edited = []

def saving_first(real):
    def call(first, second, *args, **kwargs):
        if not edited and target in (os.path.realpath(first), os.path.realpath(second)):
            edited.append(real)
            with open(target, "ab") as handle:
                handle.write(b"# saved at the last moment\\n")
        return real(first, second, *args, **kwargs)
    return call

for owner, name in swaps:
    setattr(owner, name, saving_first(getattr(owner, name)))
from selfcall_audit.__main__ import run as main
main()
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["exchange", "no-exchange"])
def test_an_edit_saved_at_the_moment_of_the_swap_is_kept_and_reported(mode: str, tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")

    done = subprocess.run(
        [sys.executable, "-c", _EDIT_AT_THE_SWAP, root / APP, mode, "fix", "--no-cache", root],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert (root / APP).read_bytes() == BEFORE + b"# saved at the last moment\n"
    assert done.returncode != 0
    assert "the file was edited while it was being rewritten; the edit was kept" in done.stdout
    assert [p.name for p in (root / APP).parent.iterdir()] == ["app.py"]  # nothing left beside it


# signals ----------------------------------------------------------------------------------------

# Runs the command with each fsync slowed down, so that the write phase lasts long enough for a
# signal to arrive in the middle of it.
_SLOW_WRITES = """
import os, sys, time
real_fsync = os.fsync
os.fsync = lambda fd: (time.sleep(0.15), real_fsync(fd))[1]
sys.argv = ["selfcall-audit", *sys.argv[1:]]
from selfcall_audit.__main__ import run as main
main()
"""


def _apps(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("app.py"))}


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_the_writes_stops_cleanly_and_says_what_was_rewritten(
    signum: int, tmp_path: Path
) -> None:
    root = make_project(tmp_path / "repo", agents=8)
    status, stderr = interrupted(
        [sys.executable, "-c", _SLOW_WRITES, "fix", "--no-cache", str(root)],
        signum,
        lambda _: AFTER in _apps(root).values(),
        cwd=root,  # paths are printed relative to the current folder
    )

    apps = _apps(root)
    rewritten = sorted(path for path, data in apps.items() if data == AFTER)
    assert status == 128 + signum, stderr
    assert set(apps.values()) == {BEFORE, AFTER}  # every file whole: as it was or rewritten
    assert 0 < len(rewritten) < len(apps)
    assert f"interrupted; rewrote {len(rewritten)} file" in stderr
    assert sorted(line.strip() for line in stderr.splitlines() if line.startswith("  ")) == rewritten
    assert not [p for p in root.rglob("*") if p.name.endswith((".tmp", ".orig"))]


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_helper_is_vendored_leaves_it_whole_and_rewrites_nothing(
    signum: int, tmp_path: Path
) -> None:
    root = make_project(tmp_path / "repo")
    (root / "pyproject.toml").write_text('[project]\nname = "toy"\n')  # the helper goes into nemo_gym/
    status, stderr = interrupted(
        [sys.executable, "-c", _SLOW_WRITES, "fix", "--no-cache", str(root)],
        signum,
        lambda _: list((root / "nemo_gym").glob(".inprocess.py.*.tmp")),
        cwd=root,
    )

    assert status == 128 + signum, stderr
    assert "interrupted; wrote nemo_gym/inprocess.py, rewrote no file before stopping" in stderr
    assert (root / "nemo_gym" / "inprocess.py").read_bytes() == helper_source("nemo_gym/inprocess.py")
    assert (root / APP).read_bytes() == BEFORE
    assert not [p for p in root.rglob("*") if p.name.endswith((".tmp", ".orig"))]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "SIGKILL"]
)
def test_no_worker_process_outlives_a_scan_stopped_by_a_signal(signum: int, tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", agents=60)
    filler = "".join(
        f"\ndef helper_{i}(x):\n    return [x + {i} for _ in range(3) if x]\n" for i in range(400)
    )
    for app in root.rglob("app.py"):
        app.write_bytes(app.read_bytes() + filler.encode())
    process = subprocess.Popen(
        command_line("scan", "--no-cache", "--jobs", "2", root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=as_in_a_terminal,
    )
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while not workers and process.poll() is None and time.monotonic() < deadline:
            workers = children(process.pid)
            time.sleep(0.01)
        assert workers, "the scan started no worker processes"
        process.send_signal(signum)
        process.wait(timeout=120)
        deadline = time.monotonic() + 30
        while any(map(_alive, workers)) and time.monotonic() < deadline:
            time.sleep(0.05)

        assert [pid for pid in workers if _alive(pid)] == []
        assert process.returncode != 0
    finally:
        for pid in workers:  # a failing run must not leave them behind either
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        process.stderr.close()


def test_a_script_that_puts_the_repo_on_sys_path_still_runs_after_fix(tmp_path: Path) -> None:
    """The helper's import goes below the `sys.path` change the file's own imports need."""
    root = tmp_path / "repo"
    shutil.copytree(CASES.parents[2] / "fixtures" / "demo-gym" / "nemo_gym", root / "nemo_gym")
    (root / "pyproject.toml").write_text('[project]\nname = "toy"\n')  # the helper is vendored into nemo_gym
    app = root / APP
    app.parent.mkdir(parents=True)
    app.write_bytes((CASES / "sys_path_script" / "before.py").read_bytes())
    script = [sys.executable, str(app)]
    assert subprocess.run(script, capture_output=True, text=True, cwd=tmp_path).stdout == "ScriptAgent\n"

    done = run_main(["fix", "--no-cache", str(root)])
    ran = subprocess.run(script, capture_output=True, text=True, cwd=tmp_path)

    assert done.exit_code == 0, done.stdout + done.stderr
    assert "responses_in_process(self" in app.read_text()
    assert (ran.returncode, ran.stdout) == (0, "ScriptAgent\n"), ran.stderr


def test_fix_rewrites_no_call_whose_server_name_changed_since_the_analysis_was_cached(tmp_path: Path) -> None:
    """A same-size edit with the modification time put back (as `cp -p` or `rsync -t` leave it):
    whatever the cache believes, the call is rewritten only if it still names the agent itself."""
    root = make_project(tmp_path / "repo")
    app = root / APP
    assert run_main(["scan", str(root)]).exit_code == 1  # the self-call, now in the cache
    before = app.stat()
    edited = BEFORE.replace(b"server_name=self.config.name,", b"server_name=self.judge1.name,")
    assert len(edited) == len(BEFORE) and edited != BEFORE
    app.write_bytes(edited)
    os.utime(app, ns=(before.st_atime_ns, before.st_mtime_ns))

    done = run_main(["fix", str(root)])

    assert app.read_bytes() == edited, done.stdout
    assert "rewrote" not in done.stdout.lower()


# two runs at once -------------------------------------------------------------------------------

# Runs the command with the helper's vendoring followed by a pause: once the copy is written, the
# run says so (the first file) and waits until told to go on (the second one), a minute at most.
_PAUSE_AFTER_VENDORING = """
import sys, time
from pathlib import Path
ready, go = Path(sys.argv[1]), Path(sys.argv[2])
sys.argv = ["selfcall-audit", *sys.argv[3:]]
from selfcall_audit.migrate import vendor
real = vendor.vendor_helper

def pausing(*args, **kwargs):
    result = real(*args, **kwargs)
    ready.touch()
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return result

vendor.vendor_helper = pausing
from selfcall_audit.__main__ import run as main
main()
"""


def _waits_on_a_lock(pid: int) -> bool:
    """Is the process blocked on a file lock (a `->` line of /proc/locks names the waiters)?"""
    with open("/proc/locks") as locks:
        return any(line.split()[1] == "->" and str(pid) in line.split()[2:7] for line in locks)


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="tells a blocked process from /proc/locks")
def test_two_fix_runs_at_once_leave_the_helper_the_rewritten_file_imports(tmp_path: Path) -> None:
    """The first run pauses once it has written the helper; the second runs meanwhile; then the
    first one's rewrite is refused (the file changed under it): the helper must stay."""
    root = make_project(tmp_path / "repo")
    (root / "pyproject.toml").write_text('[project]\nname = "toy"\n')  # the helper is vendored into nemo_gym
    ready, go = tmp_path / "ready", tmp_path / "go"
    first = subprocess.Popen(
        [sys.executable, "-c", _PAUSE_AFTER_VENDORING, ready, go, "fix", "--no-cache", root],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not ready.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ready.exists(), first.communicate()
    second = subprocess.Popen(command_line("fix", "--no-cache", root), stdout=subprocess.PIPE, text=True)
    while second.poll() is None and not _waits_on_a_lock(second.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    first_out, first_err = first.communicate(timeout=120)
    second_out, _ = second.communicate(timeout=120)

    assert first.returncode in (0, 1) and second.returncode in (0, 1), first_err
    assert b"from nemo_gym.inprocess import responses_in_process" in (root / APP).read_bytes()
    assert (root / "nemo_gym" / "inprocess.py").is_file(), first_out + second_out

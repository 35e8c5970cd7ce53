"""How a run that cannot finish normally ends, for real processes: results that cannot be written to
`-o FILE` (one line, exit 2, the previous report kept) and SIGTERM (one line, exit 143, as Ctrl-C
says it with 130)."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from safety_support import as_in_a_terminal, command_line, interrupted, make_project, run

from selfcall_audit.workspace.signals import signals_held, terminate_as_interrupt

PREVIOUS = '{"findings": ["the previous report"]}\n'


def test_output_to_a_full_device_is_one_line_and_exit_2(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")

    done = run("scan", "--no-cache", "-o", "/dev/full", cwd=root)

    assert done.returncode == 2
    assert done.stderr == "selfcall-audit: cannot write the results to /dev/full: No space left on device\n"


def _file_size_limit(limit: int) -> None:
    """In the child: files can grow to `limit` bytes, past that a write fails (EFBIG) instead of
    the process being killed by SIGXFSZ: a disk that fills up while the report is written."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.skipif(sys.platform == "win32", reason="file size limits are POSIX")
def test_a_report_that_cannot_be_written_whole_leaves_the_previous_one(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")
    report = tmp_path / "report.json"
    report.write_text(PREVIOUS)

    done = subprocess.run(
        command_line("scan", "--no-cache", "--format", "json", "-o", report),
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: _file_size_limit(len(PREVIOUS)),  # the new report is longer
    )

    assert done.returncode == 2, done.stderr
    assert done.stderr == f"selfcall-audit: cannot write the results to {report}: File too large\n"
    assert report.read_text() == PREVIOUS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo", "report.json"]  # no temporary file


def _catches_sigterm(pid: int) -> bool:
    """Has the process set a handler for SIGTERM (Linux's process status lists caught signals)?"""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the process status from /proc")
def test_sigterm_ends_a_scan_with_one_line_and_exit_143(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", agents=80)

    status, stderr = interrupted(
        command_line("scan", "--no-cache", "--jobs", "1", root),
        signal.SIGTERM,
        _catches_sigterm,  # the run is under way: sent at interpreter start-up, it would just end it
        cwd=root,
        timeout=20,
    )

    assert status == 128 + signal.SIGTERM, stderr
    assert stderr == "selfcall-audit: interrupted\n"


# A signal handled while a weak reference's callback runs (as the import system's do): raised
# there, the interrupt could not leave the callback and was printed as ignored, and the run went on.
LOST_IN_A_CALLBACK = """
import os, signal, sys, time, weakref
from selfcall_audit.workspace.signals import terminate_as_interrupt

terminate_as_interrupt()

class Thing:
    pass

def callback(ref):
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    for _ in range(1000):  # the handler runs here, in the callback
        pass

thing = Thing()
ref = weakref.ref(thing, callback)
try:
    del thing
    time.sleep(10)
    print("went on")
except KeyboardInterrupt as exc:
    print(type(exc).__name__)
"""


@pytest.mark.parametrize(("signum", "raised"), [("SIGTERM", "Terminated"), ("SIGINT", "KeyboardInterrupt")])
def test_an_interrupt_in_a_callback_still_ends_the_run(signum: str, raised: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOST_IN_A_CALLBACK, signum],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=as_in_a_terminal,  # a suite run in the background passes SIGINT on ignored
    )

    assert (done.stdout, done.stderr) == (f"{raised}\n", "")


def test_outside_the_main_thread_signal_handling_is_left_as_it_is() -> None:
    """A language server or a test suite may analyse in a thread of its own, where Python lets no
    handler be set: the block that swaps files runs all the same, and SIGTERM keeps its action."""
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    done: list[object] = []

    def in_a_thread() -> None:
        try:
            restore = terminate_as_interrupt()
            with signals_held():
                done.append("block ran")
            restore()
        except Exception as exc:  # the test reports it
            done.append(exc)

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()

    assert done == ["block ran"]
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before

"""The progress of a run, as someone at a terminal sees it: one display on stderr, which names the
phase the run is in (listing, parsing, resolving agents, reporting; planning and writing the
rewrites for `fix`), appears at the first report once the run has lasted a second, never starts
over, leaves nothing on stdout nor on a stderr that is no terminal, and runs no thread of its own,
so that the run's worker processes start while it shows."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agent_sources import SELF_CALLING_AGENT
from cli_support import drained

from selfcall_audit.frontends.display import Display

AGENTS = 24
SCAN_PHASES = ["listing files", "parsing", "resolving agents", "reporting"]
PHASES = re.compile(
    r"listing files|parsing|resolving agents|reporting|planning rewrites|rewriting|updating tests"
)
HIDE_CURSOR = "\x1b[?25l"  # written once each time a display starts on the terminal


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A generated project: AGENTS agents, each posting to its own /v1/responses (SCA001)."""
    root = tmp_path / "gym"
    (root / "responses_api_agents").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "generated-gym"\nversion = "0"\n')
    for number in range(AGENTS):
        package = root / "responses_api_agents" / f"agent_{number}"
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "app.py").write_text(SELF_CALLING_AGENT.replace("EchoAgent", f"EchoAgent{number}"))
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def slow_git(tmp_path: Path) -> Path:
    """A git that takes 1.5 s before it lists: the run lasts long enough for the display."""
    folder = tmp_path / "slow-bin"
    folder.mkdir()
    (folder / "git").write_text(f'#!/bin/sh\nsleep 1.5\nexec {shutil.which("git")} "$@"\n')
    (folder / "git").chmod(0o755)
    return folder


def run(args: list[str], cwd: Path, slow_git: Path, terminal: bool = True) -> tuple[int, str, str]:
    """The command with stdout piped and stderr on a pseudo-terminal (or piped): its exit code,
    its stdout and what reached its stderr."""
    import pty

    env = {**os.environ, "PATH": f"{slow_git}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "120"}
    env.pop("NO_COLOR", None)
    if not terminal:
        done = subprocess.run(
            [sys.executable, "-m", "selfcall_audit", *args],
            cwd=cwd,
            capture_output=True,
            env=env,
            timeout=120,
        )
        return done.returncode, done.stdout.decode(), done.stderr.decode()
    controller, end = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "selfcall_audit", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=end,
        env=env,
    )
    os.close(end)
    shown = drained(controller)
    stdout = process.stdout.read().decode()
    return process.wait(timeout=120), stdout, shown.decode(errors="replace")


def phases(shown: str) -> list[str]:
    """The phases the display named, in the order they first appeared."""
    return list(dict.fromkeys(PHASES.findall(shown)))


def counts(shown: str, phase: str) -> list[tuple[int, int]]:
    return [(int(done), int(total)) for done, total in re.findall(rf"{phase}\b[^\n\r]*?(\d+)/(\d+)", shown)]


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="runs the command on a pseudo-terminal")
def test_a_cold_scan_shows_one_display_naming_each_phase(tree: Path, slow_git: Path) -> None:
    code, stdout, shown = run(["scan", "--no-cache"], tree, slow_git)

    assert code == 1
    # git's second and a half goes to listing, which reports nothing: the display appears with the
    # next phase, the first report after a second
    assert phases(shown) == SCAN_PHASES[1:]
    assert shown.count(HIDE_CURSOR) == 1  # one display, never a second one
    parsed = counts(shown, "parsing")  # drawn ten times a second: a quick phase may show none
    assert parsed == sorted(parsed)  # the count never goes back to the start
    assert stdout.splitlines()[-1].startswith(f"Found {AGENTS} self-calls in ")
    assert "\x1b" not in stdout and not PHASES.search(stdout)  # nothing of it on stdout


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="runs the command on a pseudo-terminal")
def test_fix_shows_its_rewriting_file_by_file(tree: Path, slow_git: Path) -> None:
    code, stdout, shown = run(["fix", "--no-cache"], tree, slow_git)

    assert code == 0, stdout  # every self-call rewritten
    assert phases(shown)[:2] == SCAN_PHASES[1:3]
    fix_phases = ["planning rewrites", "rewriting", "updating tests"]
    assert [phase for phase in phases(shown) if phase in fix_phases] == fix_phases
    assert shown.count(HIDE_CURSOR) == 1
    last = counts(shown, "rewriting")[-1:]
    assert last == [(AGENTS, AGENTS)], repr(shown[-3000:])  # each of the files, counted
    assert f"Rewrote {AGENTS} self-calls in {AGENTS} files" in stdout
    assert "\x1b" not in stdout and not PHASES.search(stdout)


@pytest.mark.slow
def test_no_display_on_a_piped_stderr_or_with_quiet(tree: Path, slow_git: Path) -> None:
    _, piped_out, piped_err = run(["scan", "--no-cache"], tree, slow_git, terminal=False)
    _, _, quiet = run(["scan", "--no-cache", "-q"], tree, slow_git)

    assert piped_err == "" and not PHASES.search(piped_out)
    assert not PHASES.search(quiet) and HIDE_CURSOR not in quiet


def test_the_batches_of_a_phase_add_up_and_a_new_phase_counts_from_0() -> None:
    display = Display(True, since=time.perf_counter() - 10)  # shown at once
    seen = []
    display.phase("parsing")
    for batch in (3, 2, 4):  # the analysis reports batches one after the other, each from 1
        for done in range(1, batch + 1):
            display(f"file{done}.py", done, batch)
            seen.append(display.counted)
    display.phase("resolving agents")
    named, counted = display.name, display.counted
    display.close()

    assert [done for done, _ in seen] == list(range(1, 10))  # never back to the start
    assert seen[-1] == (9, 9)
    assert (named, counted) == ("resolving agents", (0, 0))


WHILE_SHOWN = """\
import os, threading, time
from selfcall_audit.frontends.display import Display
from selfcall_audit.workspace.workers import Workers

def pid(_):
    return os.getpid()

if __name__ == "__main__":
    display = Display(True, since=time.perf_counter() - 10)  # shown at once
    display.phase("parsing")
    display("a.py", 1, 2)
    threads = threading.active_count()
    workers = Workers(2, min_batch=2)
    pids = set(workers.map(pid, range(8), chunksize=1))
    workers.close()
    display.close()
    print(threads, os.getpid() in pids)
"""


def test_worker_processes_start_while_the_display_shows(tmp_path: Path) -> None:
    """A fork copies the calling thread alone, so workers start only where no other thread runs
    (a lock another thread held stays held in the copy): a display drawn from a thread of its own
    (a timer, rich's refresh) would keep every run on a terminal in one process. (In a process of
    its own: threads other tests left behind would keep the workers from starting.)"""
    script = tmp_path / "while_shown.py"
    script.write_text(WHILE_SHOWN)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "False"]  # the display drew, no thread of its own; workers ran

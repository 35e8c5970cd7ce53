"""Helpers of the safety tests: the installed command run as users run it, and small projects."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "tests" / "codemod" / "cases"
APP = "responses_api_agents/x/app.py"
BEFORE = (CASES / "plain" / "before.py").read_bytes()
AFTER = (CASES / "plain" / "after.py").read_bytes()
_SCRIPT = Path(sys.executable).parent / "selfcall-audit"


def command_line(*args: object) -> list[str]:
    """The console script this interpreter installed (the module it runs, where there is none)."""
    prefix = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "selfcall_audit"]
    return [*prefix, *(os.fspath(arg) if isinstance(arg, Path) else str(arg) for arg in args)]


def as_in_a_terminal() -> None:
    """`preexec_fn` of a command a test interrupts: Ctrl-C acts as in a terminal's foreground job.
    A suite run as a background job (`pytest &`, some CI runners) passes SIGINT on ignored, and a
    process that inherits it ignored rightly keeps ignoring it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupted(
    args: list[str],
    signum: int,
    ready: Callable[[int], object],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> tuple[int, str]:
    """Run `args` as a terminal's foreground job, send `signum` once `ready(pid)` holds (or the run
    ended, or `timeout` passed), and return its exit status and standard error."""
    process = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
        preexec_fn=as_in_a_terminal,
    )
    deadline = time.monotonic() + timeout
    while not ready(process.pid) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=timeout)
    return process.returncode, stderr


def children(pid: int) -> set[int]:
    """The processes whose parent is `pid`, from /proc."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == str(pid):
                found.add(int(entry))
    return found


def isolated_env(tmp_path: Path) -> dict[str, str]:
    """The environment with a user cache folder (where the signing key lives) of the test's own."""
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "user-cache")}


def run(
    *args: object, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command_line(*args),
        capture_output=True,
        text=True,
        errors="surrogateescape",
        cwd=cwd,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def make_project(root: Path, agents: int = 1) -> Path:
    """A NeMo Gym-shaped project with `agents` agents that each self-call once, fixably."""
    (root / "nemo_gym").mkdir(parents=True)
    (root / "nemo_gym" / "__init__.py").write_text("")  # first party: the helper's import goes before it
    (root / "pyproject.toml").write_text(  # the installed helper: vendoring is tested in test_vendor.py
        '[project]\nname = "toy"\n\n[tool.selfcall-audit]\nhelper = "selfcall_audit.inprocess:responses_in_process"\n'
    )
    for number in range(agents):
        app = root / (APP if number == 0 else f"responses_api_agents/x{number:03d}/app.py")
        app.parent.mkdir(parents=True)
        app.write_bytes(BEFORE)
    return root


def tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder` (not following links): a file's bytes, a link's target."""
    found: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                found[rel] = f"-> {os.readlink(path)}"
            elif path.is_file():
                found[rel] = path.read_bytes()
            else:
                found[rel] = "<dir>"
    return found

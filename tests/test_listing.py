"""git's listing of a checkout: what it lists, and that every way it can fail means "walk instead"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from selfcall_audit.workspace import listing
from selfcall_audit.workspace.discovery import list_project_files


def _checkout(root: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for rel, text in {
        ".gitignore": "ignored/\n",
        "tracked.py": "",
        "sub/untracked.py": "",
        "ignored/skip.py": "",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    subprocess.run(["git", "-C", str(root), "add", "tracked.py"], check=True)
    return root


def _names(out: bytes | None) -> set[str]:
    assert out is not None
    return {name.decode() for name in out.split(b"\0") if name}


def test_tracked_and_untracked_files_are_listed_ignored_ones_are_not(tmp_path: Path) -> None:
    root = _checkout(tmp_path / "repo")

    assert _names(listing.GitListing(str(root)).result()) == {".gitignore", "tracked.py", "sub/untracked.py"}


def test_where_there_is_no_posix_spawn_git_lists_the_same(tmp_path: Path, monkeypatch) -> None:
    root = _checkout(tmp_path / "repo")
    monkeypatch.delattr(os, "posix_spawnp")

    assert _names(listing.GitListing(str(root)).result()) == {".gitignore", "tracked.py", "sub/untracked.py"}
    assert listing.GitListing(str(tmp_path)).result() is None


def test_a_folder_that_is_no_checkout_has_no_listing(tmp_path: Path) -> None:
    assert listing.GitListing(str(tmp_path)).result() is None


def test_a_failing_git_means_no_listing(tmp_path: Path) -> None:
    (tmp_path / ".git").write_text("not a repository\n")

    assert listing.GitListing(str(tmp_path)).result() is None


@pytest.mark.skipif(listing.F_SETPIPE_SZ is None, reason="the pipe's size is set on Linux only")
def test_git_writes_a_listing_larger_than_a_default_pipe_before_the_run_reads_it(tmp_path: Path) -> None:
    """git lists while the modules load: in a pipe of the default 64 KB it would stop at the first
    64 KB of names and wait for the run to read them."""
    root = _checkout(tmp_path / "repo")
    names = {f"pkg{n // 100}/module_with_a_rather_long_name_{n:05}.py" for n in range(3000)}
    for name in names:
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_bytes(b"")
    assert sum(len(name) + 1 for name in names) > 64 * 1024

    started = listing.GitListing(str(root))
    deadline = time.monotonic() + 60
    # git has exited, and is left to be reaped by `result`
    while os.waitid(os.P_PID, started._pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        assert time.monotonic() < deadline, "git waits for its listing to be read"
        time.sleep(0.01)

    assert _names(started.result()) == {".gitignore", "tracked.py", "sub/untracked.py", *names}


@pytest.fixture
def fake_git(tmp_path: Path, monkeypatch) -> Path:
    """A `git` first on PATH that sleeps instead of listing."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "git"
    script.write_text("#!/bin/sh\nexec sleep 30\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return script


def test_a_git_that_hangs_is_stopped_and_means_no_listing(
    tmp_path: Path, fake_git: Path, monkeypatch
) -> None:
    monkeypatch.setattr(listing, "_TIMEOUT", 0.2)
    (tmp_path / "repo" / ".git").mkdir(parents=True)

    assert listing.GitListing(str(tmp_path / "repo")).result() is None


def test_without_git_the_files_are_walked(tmp_path: Path, monkeypatch) -> None:
    root = _checkout(tmp_path / "repo")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing here"))

    assert listing.GitListing(str(root)).result() is None
    files, errors = list_project_files(root)
    assert sorted(files) == ["ignored/skip.py", "sub/untracked.py", "tracked.py"] and errors == {}


def _logging_git(tmp_path: Path, hangs_in: Path | None = None) -> dict[str, str]:
    """An environment whose `git` notes each run's arguments, then runs the real git (or, asked
    to list `hangs_in`, hangs)."""
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True).stdout.strip()
    hang = f'[ "$2" = "{hangs_in}" ] && {{ sleep 20; exit 1; }}\n' if hangs_in else ""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "git").write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "git.log"}\n{hang}exec {real} "$@"\n')
    (folder / "git").chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def _console(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = "from selfcall_audit.__main__ import run; run()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_console_scripts_module_loads_only_what_starts_git() -> None:
    """git walks the tree while the command line's modules load: `__main__` itself loads none."""
    code = "import sys, selfcall_audit.__main__; print(sorted(m for m in sys.modules if m.startswith('selfcall_audit')))"

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout.split() == [
        "['selfcall_audit',",
        "'selfcall_audit.__main__',",
        "'selfcall_audit.workspace',",
        "'selfcall_audit.workspace.listing',",
        "'selfcall_audit.workspace.signals']",
    ]


@pytest.mark.slow
def test_the_console_script_lists_the_checkout_once_git_started_before_the_modules_load(
    tmp_path: Path,
) -> None:
    root = _checkout(tmp_path / "repo")
    env = _logging_git(tmp_path)

    done = _console(["scan", "--no-cache", "--format", "json"], root, env)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["files_scanned"] == 2  # tracked.py, sub/untracked.py
    runs = (tmp_path / "git.log").read_text().splitlines()
    assert [run for run in runs if "ls-files" in run] == [
        f"-C {root} -c core.fsmonitor=false -c core.hooksPath=/dev/null ls-files -z --cached --others --exclude-standard"
    ]


@pytest.mark.slow
def test_a_run_that_lists_another_project_or_none_ends_the_early_git(tmp_path: Path) -> None:
    here = _checkout(tmp_path / "here")
    other = _checkout(tmp_path / "other")
    (other / "pyproject.toml").write_text("")
    env = _logging_git(tmp_path, hangs_in=here)  # the early listing would never end by itself

    scanned = _console(["scan", "--no-cache", "--format", "json", str(other)], here, env)
    explained = _console(["explain", "SCA001"], here, env)

    assert scanned.returncode == 0 and json.loads(scanned.stdout)["root"] == str(other)
    assert explained.returncode == 0 and "SCA001" in explained.stdout
    runs = [run.split(" -c core.fsmonitor")[0] for run in (tmp_path / "git.log").read_text().splitlines()]
    assert sorted(runs) == sorted([f"-C {here}", f"-C {other}", f"-C {here}"])
    leftover = subprocess.run(["pgrep", "-f", f"git -C {here}"], capture_output=True, text=True).stdout
    assert leftover == ""

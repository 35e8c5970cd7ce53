"""Shared test helpers, as fixtures: run the command line in-process or as a real command."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_support import Ran, run_main
from fixture_annotations import NOT_COPIED

REPO = Path(__file__).resolve().parents[1]


def _invoke(*args: object, cwd: Path | None = None) -> Ran:
    return run_main([str(arg) for arg in args], cwd=cwd)


def _run_command(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "selfcall_audit", *(str(arg) for arg in args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


@pytest.fixture
def no_project(tmp_path: Path) -> Path:
    """A temporary folder with no pyproject.toml or .git in it or above it: no project's."""
    if any(
        (folder / marker).exists() for folder in tmp_path.parents for marker in (".git", "pyproject.toml")
    ):
        pytest.fail(f"{tmp_path} lies inside a project: set TMPDIR to a folder that does not")
    return tmp_path


@pytest.fixture
def cli() -> Callable[..., Ran]:
    """`cli("scan", path, ..., cwd=...)`: the command line in-process, through `main(argv)`, from
    the folder `cwd` if given; stdout and stderr kept apart."""
    return _invoke


@pytest.fixture
def command() -> Callable[..., subprocess.CompletedProcess[str]]:
    """`command("scan", path, ..., cwd=...)`: the CLI as users run it, in a separate process."""
    return _run_command


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """A copy of the demo repository as a git checkout of its own."""
    root = tmp_path / "demo"
    shutil.copytree(REPO / "fixtures" / "demo-gym", root, ignore=NOT_COPIED)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root

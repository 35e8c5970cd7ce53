"""git's listing of a checkout: what it lists, and that every way it can fail means "walk instead"."""

from __future__ import annotations

import os
import subprocess
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

    assert _names(listing.git_listing(str(root))) == {".gitignore", "tracked.py", "sub/untracked.py"}


def test_where_there_is_no_posix_spawn_git_lists_the_same(tmp_path: Path, monkeypatch) -> None:
    root = _checkout(tmp_path / "repo")
    monkeypatch.delattr(os, "posix_spawnp")

    assert _names(listing.git_listing(str(root))) == {".gitignore", "tracked.py", "sub/untracked.py"}
    assert listing.git_listing(str(tmp_path)) is None


def test_a_folder_that_is_no_checkout_has_no_listing(tmp_path: Path) -> None:
    assert listing.git_listing(str(tmp_path)) is None


def test_a_failing_git_means_no_listing(tmp_path: Path) -> None:
    (tmp_path / ".git").write_text("not a repository\n")

    assert listing.git_listing(str(tmp_path)) is None


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

    assert listing.git_listing(str(tmp_path / "repo")) is None


def test_without_git_the_files_are_walked(tmp_path: Path, monkeypatch) -> None:
    root = _checkout(tmp_path / "repo")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing here"))

    assert listing.git_listing(str(root)) is None
    files, errors = list_project_files(root)
    assert sorted(files) == ["ignored/skip.py", "sub/untracked.py", "tracked.py"] and errors == {}

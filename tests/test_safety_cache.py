"""The cache never touches anything outside the project, deletes only what the tool wrote, and
cannot hang or exhaust a run through special files. Each front end runs in-process through its
`main(argv)` from the project root, with a user cache folder of the test's own; a special file is
read by a real command whose memory is bounded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import Ran, run_flake8, run_main
from safety_support import APP, command_line, isolated_env, make_project, run, tree

CACHE = ".selfcall_audit_cache"
pytestmark = pytest.mark.skipif(os.name != "posix", reason="links, named pipes and devices as POSIX has them")


def front_end(name: str, root: Path) -> Ran:
    """One whole-project run of the front end `name`, in-process from the project root, cache on."""
    if name == "flake8":
        return run_flake8(["--select", "SCA", APP], root)
    return run_main(name.split(), cwd=root)


@pytest.fixture
def user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user cache folder (where the signing key lives) of the test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", isolated_env(tmp_path)["XDG_CACHE_HOME"])


FRONT_ENDS = ("scan", "fix --diff", "agents", "flake8")


@pytest.fixture
def checkouts(tmp_path: Path) -> Path:
    """A folder of checkouts side by side, as developers keep them: two of them named `v...`."""
    folder = tmp_path / "checkouts"
    for sibling in ("vllm", "verl"):
        (folder / sibling / "src").mkdir(parents=True)
        (folder / sibling / "src" / "main.py").write_text("print('keep me')\n")
    make_project(folder / "repo")
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("name", FRONT_ENDS)
@pytest.mark.usefixtures("user_cache")
def test_a_committed_cache_link_to_the_parent_leaves_the_parent_alone(name: str, checkouts: Path) -> None:
    repo = checkouts / "repo"
    (repo / CACHE).symlink_to("..")
    siblings = {rel: entry for rel, entry in tree(checkouts).items() if not rel.startswith("repo/")}

    done = front_end(name, repo)

    assert "x/app.py" in done.stdout and "Traceback" not in done.stderr, done.stderr  # it ran
    assert {rel: entry for rel, entry in tree(checkouts).items() if not rel.startswith("repo/")} == siblings
    assert (repo / CACHE).is_symlink()


@pytest.mark.parametrize("cache_dir", [".", "../elsewhere", "<absolute>"])
@pytest.mark.parametrize("name", FRONT_ENDS)
@pytest.mark.usefixtures("user_cache")
def test_a_cache_dir_outside_the_root_is_refused_with_a_clear_message(
    name: str, cache_dir: str, checkouts: Path, tmp_path: Path
) -> None:
    repo = checkouts / "repo"
    (repo / "vendor").mkdir()
    (repo / "vendor" / "lib.py").write_text("VENDORED = 1\n")
    absolute = tmp_path / "absolute-cache"
    cache_dir = cache_dir.replace("<absolute>", str(absolute))
    with (repo / "pyproject.toml").open("a") as pyproject:
        pyproject.write(f'cache-dir = "{cache_dir}"\n')  # into the project's [tool.selfcall-audit]
    before = tree(checkouts)

    done = front_end(name, repo)

    assert "`cache-dir` must be a folder inside the project root" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.exit_code == (1 if name == "flake8" else 2)  # flake8 stops with 1, in its own words
    assert tree(checkouts) == before
    assert not absolute.exists()


@pytest.mark.usefixtures("user_cache")
def test_cleaning_deletes_only_entries_the_tool_wrote(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")
    assert run_main(["scan", str(root)]).exit_code == 1
    (version,) = [entry for entry in (root / CACHE).iterdir() if entry.is_dir()]
    # entries this tool wrote, kept under another version's name; and files it did not write
    version.rename(root / CACHE / "v0.0.1-older")
    foreign = {
        "v0.0.2-foreign/facts/0123.dat": b"not written by selfcall-audit\n",
        "v0.0.2-foreign/snapshot.dat": b"\n",
        "vendor/notes.txt": b"keep\n",
        "v0.0.1-older/facts/mine.dat": b"a file of the user's, in a folder the tool wrote\n",
    }
    for rel, data in foreign.items():
        (root / CACHE / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / CACHE / rel).write_bytes(data)

    assert run_main(["scan", str(root)]).exit_code == 1

    left = {rel: entry for rel, entry in tree(root / CACHE).items() if isinstance(entry, bytes)}
    assert {rel: left.get(rel) for rel in foreign} == foreign
    older = [rel for rel in left if rel.startswith("v0.0.1-older/")]
    assert older == ["v0.0.1-older/facts/mine.dat"]  # the tool's own entries there are gone


@pytest.mark.usefixtures("user_cache")
def test_a_new_cache_folder_ignores_itself_and_an_existing_folder_gets_no_gitignore(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")
    other = make_project(tmp_path / "other")
    (other / "build").mkdir()
    (other / "pyproject.toml").write_text(
        '[project]\nname = "o"\n[tool.selfcall-audit]\ncache-dir = "build"\n'
    )

    run_main(["scan", str(root)])
    run_main(["scan", str(other)])

    assert (root / CACHE / ".gitignore").read_text().endswith("*\n")
    assert not (other / "build" / ".gitignore").exists()


# special files where the cache and its key are read ---------------------------------------------


def _bounded_memory() -> None:
    """In the child: 2 GiB of address space, so a read without bound fails there, not the machine."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def bounded_scan(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command_line("scan", root),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_bounded_memory,
    )


def make_special(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_signing_key_that_is_a_special_file_neither_hangs_nor_exhausts_the_scan(
    kind: str, tmp_path: Path
) -> None:
    root = make_project(tmp_path / "repo")
    env = isolated_env(tmp_path)
    make_special(tmp_path / "user-cache" / "selfcall-audit" / "signing-key", kind)

    done = bounded_scan(root, env)

    assert (done.returncode, done.stderr) == (1, "")
    assert f"{APP}:34:26: SCA001" in done.stdout


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
@pytest.mark.parametrize("entry", ["snapshots", "observed.dat", "facts"])
def test_a_cache_entry_that_is_a_special_file_neither_hangs_nor_exhausts_the_scan(
    kind: str, entry: str, tmp_path: Path
) -> None:
    root = make_project(tmp_path / "repo")
    env = isolated_env(tmp_path)
    assert run("scan", root, env=env).returncode == 1
    (version,) = [e for e in (root / CACHE).iterdir() if e.is_dir()]
    targets = sorted((version / entry).iterdir()) if entry in ("facts", "snapshots") else [version / entry]
    (root / APP).write_bytes((root / APP).read_bytes() + b"\n")  # a change: the cache is read again
    for target in targets:
        make_special(target, kind)

    done = bounded_scan(root, env)

    assert (done.returncode, done.stderr) == (1, "")
    assert f"{APP}:34:26: SCA001" in done.stdout


# Sends the signal to the run itself as it renames its first cache entry into place: the moment a
# signal leaves a temporary file behind if it acts at once.
_SIGNAL_AT_THE_CACHE_SAVE = """
import os, sys
signum, sys.argv = int(sys.argv[1]), ["selfcall-audit", *sys.argv[2:]]
real_replace = os.replace

def replace(source, target, *args, **kwargs):
    if str(source).endswith(".tmp") and ".selfcall_audit_cache" in str(source):
        os.kill(os.getpid(), signum)
    return real_replace(source, target, *args, **kwargs)

os.replace = replace
from selfcall_audit.__main__ import run
run()
"""


def test_sigterm_while_the_cache_is_saved_ends_the_run_once_every_entry_is_in_place(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _SIGNAL_AT_THE_CACHE_SAVE,
            str(int(signal.SIGTERM)),
            "scan",
            "--format",
            "json",
        ],
        cwd=root,
        env=isolated_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 128 + signal.SIGTERM, done.stderr  # the signal still ends the run
    assert done.stderr == "selfcall-audit: interrupted\n"
    assert list((root / CACHE).rglob("*.tmp")) == []
    assert list((root / CACHE).rglob("*.dat")), "the entries were saved before it did"

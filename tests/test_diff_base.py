"""`scan --diff-base REF`: only the findings that are new against a git commit."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_support import finding_lines
from click.testing import Result
from git_support import git

from selfcall_audit import api
from selfcall_audit.frontends import diffbase
from selfcall_audit.ftypes import Report

HEADER = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class EchoAgent(SimpleResponsesAPIAgent):
"""
RUN = """\
    async def run(self, body):
        r = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
        return await r.json()
"""
RETRY = """\
    async def retry(self, body):
        return await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
"""
ECHO = "responses_api_agents/echo/app.py"
OTHER = "responses_api_agents/other/app.py"


def write(repo: Path, rel: str, text: str) -> None:
    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
    (repo / rel).write_text(text)


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout whose first commit has one self-call (EchoAgent.run)."""
    root = tmp_path / "gym"
    root.mkdir()
    git(root, "init", "-q")
    write(root, "pyproject.toml", '[project]\nname = "fake-gym"\nversion = "0"\n')
    write(root, ECHO, HEADER + RUN)
    commit(root, "first")
    return root


Scan = Callable[..., Result]


@pytest.fixture(params=[True, False], ids=["cache", "no cache"])
def cached(request: pytest.FixtureRequest) -> bool:
    """Whether the runs keep a cache, which the ref's analysis reads."""
    return request.param


@pytest.fixture
def scan(cached: bool, cli: Callable[..., Result]) -> Scan:
    """`scan(repo, *args)`: `scan` run from the checkout (concise paths are relative to the current
    folder), with the cache or without."""
    caching = () if cached else ("--no-cache",)

    def run(repo: Path, *args: str) -> Result:
        before = os.getcwd()
        os.chdir(repo)
        try:
            return cli("scan", *caching, *args)
        finally:
            os.chdir(before)

    return run


def reported(result: Result) -> list[tuple[str, int, str]]:
    rows = [line.split(":") for line in finding_lines(result.stdout)]
    return [(path, int(line), rest.split()[0]) for path, line, _, rest in rows]


def test_only_the_self_calls_added_since_the_ref_are_reported(scan: Scan, repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD")
    # lines above the old self-call shift it down by three; a method with a new one is added
    write(repo, ECHO, '"""Echo."""\n\n\n' + HEADER + RUN + "\n" + RETRY)  # SCA001 at line 13
    commit(repo, "second")

    everything = scan(repo, "--format", "concise")
    result = scan(repo, "--format", "concise", "--diff-base", first)

    assert len(reported(everything)) == 2
    assert (result.exit_code, reported(result)) == (1, [(ECHO, 13, "SCA001")])
    assert "1 finding(s) already present at" in result.stderr


def test_the_work_tree_is_compared_uncommitted_edits_included(scan: Scan, repo: Path) -> None:
    write(repo, OTHER, HEADER.replace("EchoAgent", "OtherAgent") + RUN)  # not committed: SCA001 at 6

    result = scan(repo, "--format", "concise", "--diff-base", "HEAD")
    unchanged = scan(repo, "--format", "concise", "--diff-base", "HEAD", ECHO)

    assert reported(result) == [(OTHER, 6, "SCA001")]
    assert (unchanged.exit_code, finding_lines(unchanged.stdout)) == (0, [])


def test_a_reformatted_call_is_not_new(scan: Scan, repo: Path) -> None:
    spread = RUN.replace("server_name=", "\n            server_name=").replace(
        "json=body)", "json=body,\n        )"
    )
    write(repo, ECHO, HEADER + "    # a comment\n" + spread)
    commit(repo, "reformat")

    result = scan(repo, "--format", "concise", "--diff-base", "HEAD~1")

    assert (result.exit_code, finding_lines(result.stdout)) == (0, [])


@pytest.mark.parametrize("output_format", ["json", "sarif", "github", "gitlab", "junit", "text", "concise"])
def test_every_format_shows_only_the_new_findings(scan: Scan, repo: Path, output_format: str) -> None:
    write(repo, ECHO, HEADER + RUN + "\n" + RETRY)
    commit(repo, "retry")

    result = scan(repo, "--format", output_format, "--diff-base", "HEAD~1")

    assert result.exit_code == 1
    assert "retry" in result.stdout
    assert "EchoAgent.run " not in result.stdout
    if output_format == "json":
        assert [f["method"] for f in json.loads(result.stdout)["findings"]] == ["retry"]


def test_a_bad_ref_is_a_usage_error_in_one_line(scan: Scan, repo: Path) -> None:
    result = scan(repo, "--diff-base", "no-such-branch")

    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"selfcall-audit: --diff-base: 'no-such-branch' is not a commit of the repository at {repo.resolve()}"
    ]


def test_outside_a_checkout_it_is_a_usage_error(scan: Scan, no_project: Path) -> None:
    write(no_project, "pyproject.toml", "")

    result = scan(no_project, "--diff-base", "HEAD")

    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "is not in a git checkout" in result.stderr


def test_nothing_is_written_into_the_checkout(scan: Scan, repo: Path) -> None:
    write(repo, ECHO, HEADER + RUN + "\n" + RETRY)
    scan(repo)  # the cache, where there is one, as the work tree's analysis leaves it
    before = git(repo, "status", "--porcelain", "--ignored")
    held = {
        p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts
    }

    scan(repo, "--diff-base", "HEAD")

    assert git(repo, "status", "--porcelain", "--ignored") == before
    assert {
        p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts
    } == held


def test_the_ref_parses_only_the_files_the_cache_lacks(
    scan: Scan, cached: bool, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(repo, OTHER, HEADER.replace("EchoAgent", "OtherAgent") + RUN)
    commit(repo, "other")
    write(repo, ECHO, HEADER + RUN + "\n" + RETRY)  # not committed: the ref's ECHO is another file
    reports: list[Report] = []

    def analyze_projects(*args: object, **kwargs: object) -> Report:
        reports.append(analyzed(*args, **kwargs))
        return reports[-1]

    analyzed = api.analyze_projects
    monkeypatch.setattr(api, "analyze_projects", analyze_projects)
    result = scan(repo, "--format", "concise", "--diff-base", "HEAD")

    assert reported(result) == [(ECHO, 10, "SCA001")]
    work, ref = reports
    assert work.root == repo.resolve() and ref.root != work.root
    # the ref's OTHER is the work tree's, its facts in the cache: only the ref's ECHO is parsed
    assert ref.files_parsed == (1 if cached else 2)


def _extracting_into(monkeypatch: pytest.MonkeyPatch, full: Path | None = None) -> list[Path]:
    """The folders the ref's files are written into, run after run; writing below `full` fails as
    on a full disk."""
    folders: list[Path] = []
    extract = diffbase._extract

    def recorded(top: Path, commit: str, wanted: list, into: Path) -> None:
        folders.append(into)
        if full is not None and into.is_relative_to(full):
            raise OSError(errno.ENOSPC, "No space left on device")
        extract(top, commit, wanted, into)

    monkeypatch.setattr(diffbase, "_extract", recorded)
    return folders


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder standing for the system's folder in memory, TMPDIR unset."""
    folder = tmp_path / "memory"
    folder.mkdir()
    monkeypatch.setattr(diffbase, "_MEMORY", os.fspath(folder))
    monkeypatch.delenv("TMPDIR", raising=False)
    return folder.resolve()


def test_the_refs_files_are_written_in_memory_where_there_is_room(
    scan: Scan, repo: Path, memory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(repo, ECHO, HEADER + RUN + "\n" + RETRY)
    folders = _extracting_into(monkeypatch)

    result = scan(repo, "--format", "concise", "--diff-base", "HEAD")

    assert reported(result) == [(ECHO, 10, "SCA001")]
    assert len(folders) == 1 and folders[0].parent == memory
    assert list(memory.iterdir()) == []  # deleted after


def test_the_refs_files_go_where_tmpdir_says_or_to_disk_when_memory_lacks_room(
    scan: Scan, repo: Path, memory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(repo, ECHO, HEADER + RUN + "\n" + RETRY)
    folders = _extracting_into(monkeypatch)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("TMPDIR", os.fspath(elsewhere))
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again

    assert reported(scan(repo, "--format", "concise", "--diff-base", "HEAD")) == [(ECHO, 10, "SCA001")]
    monkeypatch.delenv("TMPDIR")
    no_room = SimpleNamespace(f_bavail=0, f_frsize=4096, f_favail=1 << 20)  # no block free
    monkeypatch.setattr(os, "statvfs", lambda path: no_room)
    assert reported(scan(repo, "--format", "concise", "--diff-base", "HEAD")) == [(ECHO, 10, "SCA001")]

    assert folders[0].parent == elsewhere.resolve()
    assert not folders[1].is_relative_to(memory)


def test_a_memory_folder_that_fills_up_gives_way_to_the_system_folder(
    scan: Scan, repo: Path, memory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(repo, ECHO, HEADER + RUN + "\n" + RETRY)
    folders = _extracting_into(monkeypatch, full=memory)

    result = scan(repo, "--format", "concise", "--diff-base", "HEAD")

    assert reported(result) == [(ECHO, 10, "SCA001")]
    assert [folder.is_relative_to(memory) for folder in folders] == [True, False]
    assert list(memory.iterdir()) == []


def test_it_cannot_be_combined_with_write_baseline(scan: Scan, repo: Path) -> None:
    result = scan(repo, "--diff-base", "HEAD", "--write-baseline", "b.json")

    assert result.exit_code == 2
    assert not (repo / "b.json").exists()


def test_a_project_below_the_top_of_the_checkout(scan: Scan, tmp_path: Path) -> None:
    top = tmp_path / "mono"
    project = top / "services" / "gym"
    project.mkdir(parents=True)
    git(top, "init", "-q")
    write(project, "pyproject.toml", '[project]\nname = "fake-gym"\nversion = "0"\n[tool.selfcall-audit]\n')
    write(project, ECHO, HEADER + RUN)
    write(top, "other/app.py", HEADER + RUN)  # another project's self-call, not this one's
    commit(top, "first")
    write(project, ECHO, HEADER + RUN + "\n" + RETRY)

    result = scan(project, "--format", "concise", "--diff-base", "HEAD")

    assert (result.exit_code, reported(result)) == (1, [(ECHO, 10, "SCA001")])


def test_a_file_the_clone_lacks_is_an_error_in_one_line(scan: Scan, repo: Path) -> None:
    blob = git(repo, "rev-parse", f"HEAD:{ECHO}")
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # as a partial clone lacks it

    result = scan(repo, "--diff-base", "HEAD")

    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"selfcall-audit: --diff-base: {ECHO} of {git(repo, 'rev-parse', 'HEAD')[:12]} is not in the clone (git fetch it)"
    ]


def test_git_failing_while_it_hands_over_the_files_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_project: Path
) -> None:
    monkeypatch.setattr(diffbase, "_wanted", lambda commit, top, under: [("0" * 40, ECHO, 0)])

    with pytest.raises(
        diffbase.DiffBaseError, match=r"^--diff-base: cannot read 000000000000: fatal: not a git"
    ):
        diffbase._extract(no_project, "0" * 40, "", tmp_path / "into")

"""Baselines: `--write-baseline` records today's findings, `--baseline` reports only new ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_sources import SELF_CALLING_AGENT
from cli_support import Ran, finding_lines, run_main

HEADER = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class EchoAgent(SimpleResponsesAPIAgent):
"""
RETRY = """\
    async def retry(self, body):
        a = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
        b = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
        return a, b
"""
RUN_ONE_LINE = """\
    async def run(self, body):
        r = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
        return await r.json()
"""
RETRY_THRICE = """\
    async def retry(self, body):
        a = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
        b = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
        c = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
        return a, b, c
"""
OTHER = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class OtherAgent(SimpleResponsesAPIAgent):
    async def run(self, b):
        return await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=b)
"""
ECHO = "responses_api_agents/echo/app.py"
OTHER_PATH = "responses_api_agents/other/app.py"


def write(repo: Path, rel: str, text: str) -> None:
    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
    (repo / rel).write_text(text)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write(tmp_path, "pyproject.toml", '[project]\nname = "fake-gym"\nversion = "0"\n')
    write(tmp_path, ECHO, SELF_CALLING_AGENT + "\n" + RETRY)
    write(tmp_path, OTHER_PATH, OTHER)
    return tmp_path


def scan(repo: Path, *args: str, paths: tuple[str, ...] = ("",)) -> Ran:
    """The CLI in-process, run from the repo (concise paths are relative to the current folder);
    `paths` relative to the repo (default: all of it)."""
    where = [str(repo / p) for p in paths]
    before = os.getcwd()
    os.chdir(repo)
    try:
        return run_main(["scan", "--no-cache", "--format", "concise", *args, *where])
    finally:
        os.chdir(before)


def reported(result: Ran) -> list[tuple[str, int]]:
    return [(line.split(":")[0], int(line.split(":")[1])) for line in finding_lines(result.stdout)]


def test_write_baseline_records_findings_sorted_and_exits_0(repo: Path) -> None:
    result = scan(repo, "--write-baseline", str(repo / "baseline.json"))
    document = json.loads((repo / "baseline.json").read_text())

    assert result.exit_code == 0
    assert result.stdout == ""
    assert "recorded 4 finding(s)" in result.stderr
    assert document["version"] == 1
    keys = [(e["path"], e["agent"], e["method"], e["code"]) for e in document["findings"]]
    assert keys == [
        (ECHO, "EchoAgent", "retry", "SCA001"),
        (ECHO, "EchoAgent", "retry", "SCA001"),
        (ECHO, "EchoAgent", "run", "SCA001"),
        (OTHER_PATH, "OtherAgent", "run", "SCA001"),
    ]
    fingerprints = [e["fingerprint"] for e in document["findings"]]
    assert len(set(fingerprints)) == 4  # the two identical calls in retry() are told apart


def test_the_baseline_file_does_not_change_with_unrelated_edits(repo: Path) -> None:
    scan(repo, "--write-baseline", str(repo / "first.json"))
    # Lines shift, a method appears, and the self-call is reformatted onto one line.
    helper = "    def helper(self):\n        return 1\n\n"
    write(repo, ECHO, '"""Echo agent."""\n' + HEADER + helper + RUN_ONE_LINE + "\n" + RETRY)
    scan(repo, "--write-baseline", str(repo / "second.json"))

    assert (repo / "second.json").read_bytes() == (repo / "first.json").read_bytes()
    result = scan(repo, "--baseline", str(repo / "first.json"))
    assert (result.exit_code, finding_lines(result.stdout)) == (0, [])


def test_only_new_findings_are_reported(repo: Path) -> None:
    scan(repo, "--write-baseline", str(repo / "baseline.json"))
    write(repo, ECHO, SELF_CALLING_AGENT + "\n" + RETRY_THRICE)

    clean = scan(repo, "--baseline", str(repo / "baseline.json"), paths=(OTHER_PATH,))
    result = scan(repo, "--baseline", str(repo / "baseline.json"))

    assert clean.exit_code == 0
    assert result.exit_code == 1
    assert reported(result) == [(ECHO, 16)]  # the third of three identical calls is new
    assert "4 known finding(s) recorded in" in result.stderr


def test_a_changed_call_is_new_and_its_old_entry_stale(repo: Path) -> None:
    scan(repo, "--write-baseline", str(repo / "baseline.json"))
    write(repo, OTHER_PATH, OTHER.replace("json=b)", "json=b, cookies=jar)"))

    result = scan(repo, "--baseline", str(repo / "baseline.json"))

    assert reported(result) == [(OTHER_PATH, 6)]
    assert "1 baseline entry no longer found" in result.stderr
    assert f"  {OTHER_PATH}: SCA001 OtherAgent.run" in result.stderr


def test_stale_entries_go_to_stderr_and_the_json_contract_is_unchanged(repo: Path) -> None:
    scan(repo, "--write-baseline", str(repo / "baseline.json"))
    write(repo, OTHER_PATH, OTHER.replace("self.config.name", "self.config.model_server.name"))

    result = scan(repo, "--baseline", str(repo / "baseline.json"), "--format", "json")
    document = json.loads(result.stdout)

    assert result.exit_code == 0
    assert set(document) == {"version", "root", "findings", "errors", "summary"}
    assert document["findings"] == []
    assert f"  {OTHER_PATH}: SCA001 OtherAgent.run" in result.stderr


def test_a_scan_of_some_paths_or_rules_does_not_call_the_rest_stale(repo: Path) -> None:
    scan(repo, "--write-baseline", str(repo / "baseline.json"))
    baseline = str(repo / "baseline.json")

    some_paths = scan(repo, "--baseline", baseline, paths=(OTHER_PATH,))
    some_rules = scan(repo, "--baseline", baseline, "--select", "SCA002")

    assert (some_paths.exit_code, finding_lines(some_paths.stdout)) == (0, [])
    assert "no longer found" not in some_paths.stderr
    assert "no longer found" not in some_rules.stderr


def test_quiet_prints_no_notes(repo: Path) -> None:
    scan(repo, "--write-baseline", str(repo / "baseline.json"))
    write(repo, OTHER_PATH, OTHER.replace("json=b)", "json=b, cookies=jar)"))

    result = scan(repo, "-q", "--baseline", str(repo / "baseline.json"))

    assert result.stderr == ""
    (line,) = result.stdout.splitlines()  # the finding, no closing count
    assert line.startswith(f"{OTHER_PATH}:6:")


def test_the_baseline_setting_applies_and_write_baseline_ignores_it(repo: Path) -> None:
    scan(repo, "--write-baseline", str(repo / "selfcall-baseline.json"))
    with (repo / "pyproject.toml").open("a") as pyproject:
        pyproject.write('\n[tool.selfcall-audit]\nbaseline = "selfcall-baseline.json"\n')

    assert scan(repo).exit_code == 0
    rewrite = scan(repo, "--write-baseline", str(repo / "again.json"))
    assert "recorded 4 finding(s)" in rewrite.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "baseline file not found"),
        ("{not json", "is not valid JSON"),
        ('{"findings": {}}', "is not a selfcall-audit baseline"),
        ('{"version": 99, "findings": []}', "unsupported baseline version 99"),
        ('{"version": 1, "findings": [{"code": "SCA001"}]}', "entry 0 needs the string fields"),
    ],
)
def test_a_missing_or_corrupt_baseline_is_a_usage_error(
    repo: Path, content: str | None, message: str
) -> None:
    path = repo / "baseline.json"
    if content is not None:
        path.write_text(content)

    result = scan(repo, "--baseline", str(path))

    assert result.exit_code == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_a_baseline_setting_naming_a_missing_file_is_a_usage_error(repo: Path) -> None:
    (repo / "pyproject.toml").write_text('[tool.selfcall-audit]\nbaseline = "nope.json"\n')

    result = scan(repo)

    assert result.exit_code == 2
    assert "baseline file not found" in result.stderr


def test_baseline_and_write_baseline_together_is_a_usage_error(repo: Path) -> None:
    result = scan(repo, "--baseline", "a.json", "--write-baseline", "b.json")

    assert result.exit_code == 2
    assert "cannot be used together" in result.stderr


@pytest.mark.slow
def test_the_real_command(repo: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [
            sys.executable,
            "-m",
            "selfcall_audit",
            "scan",
            "--format",
            "concise",
            *args,
        ]
        return subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=120)

    written = run("--write-baseline", "baseline.json")
    clean = run("--baseline", "baseline.json")
    write(repo, "responses_api_agents/new/app.py", OTHER.replace("OtherAgent", "NewAgent"))
    dirty = run("--baseline", "baseline.json")

    assert (written.returncode, clean.returncode, dirty.returncode) == (0, 0, 1)
    assert dirty.stdout.startswith("responses_api_agents/new/app.py:6:")
    assert len(finding_lines(dirty.stdout)) == 1


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="a file size limit stands in for a full disk")
def test_a_baseline_that_cannot_be_written_leaves_the_old_one_whole(repo: Path) -> None:
    import resource

    def full_disk() -> None:  # writing past 100 bytes fails, as on a full disk (EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))

    run = [sys.executable, "-m", "selfcall_audit", "scan", "--no-cache", "--write-baseline", "baseline.json"]
    assert subprocess.run(run, cwd=repo, capture_output=True, timeout=120).returncode == 0
    recorded = (repo / "baseline.json").read_bytes()
    write(repo, "responses_api_agents/new/app.py", OTHER.replace("OtherAgent", "NewAgent"))

    failed = subprocess.run(run, cwd=repo, capture_output=True, text=True, timeout=120, preexec_fn=full_disk)

    assert failed.returncode == 2
    assert "cannot write the baseline to baseline.json: File too large" in failed.stderr
    assert (repo / "baseline.json").read_bytes() == recorded
    assert sorted(p.name for p in repo.iterdir() if p.is_file()) == ["baseline.json", "pyproject.toml"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file away needs root")
def test_a_baseline_rewritten_by_root_keeps_its_owner_group_and_mode(repo: Path) -> None:
    path = repo / "baseline.json"
    scan(repo, "--write-baseline", str(path))
    os.chown(path, 12345, 23456)
    path.chmod(0o640)

    result = scan(repo, "--write-baseline", str(path))

    status = path.stat()
    assert result.exit_code == 0
    assert (status.st_uid, status.st_gid, status.st_mode & 0o7777) == (12345, 23456, 0o640)

"""`selfcall_audit.testing.assert_no_self_calls`, in-process and inside a real pytest run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from selfcall_audit.testing import assert_no_self_calls

SELF_CALLING = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, b):
        return await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=b)

    async def stop(self, body):
        return await self.server_client.post(server_name=self.config.name, url_path="/run", json=body)
"""
UNSURE = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class PickAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        return await self.server_client.post(server_name=pick(), url_path="/v1/responses", json=body)
"""
BROKEN = "from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent\n\nclass Broken(:\n"
ECHO = "responses_api_agents/echo/app.py"
PICK = "responses_api_agents/pick/app.py"


def make_repo(root: Path, files: dict[str, str]) -> Path:
    (root / "pyproject.toml").write_text('[project]\nname = "fake-gym"\nversion = "0"\n')
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def failure(root: Path, **kwargs: object) -> str:
    with pytest.raises(AssertionError) as caught:
        assert_no_self_calls(root, **kwargs)
    return str(caught.value)


def test_a_clean_project_passes_and_returns_the_report(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {PICK: UNSURE, "tests/test_echo.py": SELF_CALLING})

    report = assert_no_self_calls(repo)

    assert report.findings == [] and report.errors == []


def test_the_failure_lists_every_self_call_with_its_allow_entry(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {ECHO: SELF_CALLING})

    message = failure(repo)

    lines = message.splitlines()
    assert lines[0] == "2 agent self-calls found by selfcall-audit:"
    assert lines[1].startswith(
        f"  {ECHO}:6:22: SCA001 EchoAgent.run posts to its own /v1/responses over HTTP"
    )
    assert lines[2] == f"      allow with: '{ECHO}::EchoAgent.run'"
    assert lines[3].startswith(f"  {ECHO}:9:22: SCA002 EchoAgent.stop calls its own /run route")
    assert lines[4] == f"      allow with: '{ECHO}::EchoAgent.stop'"
    assert "selfcall-audit fix" in lines[5]


def test_allow_by_method_or_by_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {ECHO: SELF_CALLING})

    one_allowed = failure(repo, allow=[f"{ECHO}::EchoAgent.run"])
    assert_no_self_calls(repo, allow=[f"{ECHO}::EchoAgent.run", f"{ECHO}::EchoAgent.stop"])
    assert_no_self_calls(repo, allow=[ECHO])

    assert one_allowed.splitlines()[0] == "1 agent self-call found by selfcall-audit:"
    assert "EchoAgent.stop" in one_allowed and "EchoAgent.run posts" not in one_allowed


def test_unreadable_files_fail_unless_allowed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {"responses_api_agents/broken/app.py": BROKEN})

    message = failure(repo)
    assert_no_self_calls(repo, allow=["responses_api_agents/broken/app.py"])

    assert "1 file could not be analysed, so self-calls in them would go unseen:" in message
    assert "  responses_api_agents/broken/app.py: SCA900 syntax error at line 3" in message


def test_select_and_paths(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {ECHO: SELF_CALLING, PICK: UNSURE})

    possible = failure(repo, select="SCA003")
    assert_no_self_calls(repo, paths=["responses_api_agents/pick"])  # SCA003 is off by default
    only_other_routes = failure(repo, select=["SCA002"])

    assert possible.splitlines()[0] == "1 agent self-call found by selfcall-audit:"
    assert f"{PICK}:6:22: SCA003 PickAgent.run may post to itself" in possible
    assert "SCA002" in only_other_routes and "SCA001" not in only_other_routes


def test_a_root_or_path_that_does_not_exist_is_an_error_not_another_audit(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {ECHO: SELF_CALLING})

    with pytest.raises(FileNotFoundError, match=r"'.*no_such_folder' does not exist"):
        assert_no_self_calls(repo / "no_such_folder")  # not the project above it
    with pytest.raises(FileNotFoundError, match="'responses_api_agents/echoo' does not exist"):
        assert_no_self_calls(repo, paths=["responses_api_agents/echoo"])  # a typo would pass


def test_no_cache_is_written_in_a_folder_that_is_no_project(no_project: Path) -> None:
    (no_project / ECHO).parent.mkdir(parents=True)
    (no_project / ECHO).write_text(SELF_CALLING)

    failure(no_project)

    assert not (no_project / ".selfcall_audit_cache").exists(), "no cache where there is no project"


@pytest.mark.slow
def test_in_a_real_pytest_run_of_the_audited_repo(tmp_path: Path) -> None:
    audit = (
        "from pathlib import Path\n"
        "from selfcall_audit.testing import assert_no_self_calls\n\n\n"
        "def test_agents_do_not_call_themselves():\n"
        "    assert_no_self_calls(Path(__file__).parent.parent, allow=ALLOW)\n"
    )
    repo = make_repo(tmp_path, {ECHO: SELF_CALLING, "tests/test_audit.py": "ALLOW = []\n" + audit})

    def pytest_run() -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
        return subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=120)

    failing = pytest_run()
    allowed = f"ALLOW = ['{ECHO}::EchoAgent.run', '{ECHO}::EchoAgent.stop']\n"
    (repo / "tests/test_audit.py").write_text(allowed + audit)
    passing = pytest_run()

    assert failing.returncode == 1
    assert "AssertionError: 2 agent self-calls found by selfcall-audit:" in failing.stdout
    assert f"{ECHO}:6:22: SCA001 EchoAgent.run" in failing.stdout
    assert passing.returncode == 0, passing.stdout
    assert "1 passed" in passing.stdout

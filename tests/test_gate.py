"""The gate, as ruff keeps it: a Python file that does not parse fails it (SCA900 at its line, exit
1), any other SCA900 entry (a `config_paths` entry naming a missing file) is a warning unless
strict, and one situation gives one exit status whatever the options."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from agent_sources import SELF_CALLING_AGENT
from cli_support import finding_lines

from selfcall_audit.ftypes import InputError
from selfcall_audit.orchestration.codec import decode, encode
from selfcall_audit.testing import assert_no_self_calls
from selfcall_audit.workspace import discovery

AGENT = "responses_api_agents/echo/app.py"
CONFIG = "responses_api_agents/echo/configs/echo.yaml"
CONFIG_TEXT = """\
config_paths:  # SCA900 (line 1): the second entry names no file
  - responses_api_agents/echo/configs/base.yaml
  - responses_api_agents/echo/configs/gone.yaml
echo_agent:
  responses_api_agents:
    echo:
      entrypoint: app.py
"""
CLEAN_AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        return body
"""


def make_project(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "gate"\n')
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


POSTING_AGENT = CLEAN_AGENT.replace(
    "        return body",
    "        return await self.server_client.post(\n"
    '            server_name=self.config.model_server.name, url_path="/v1/responses", json=body\n'
    "        )",
)


@pytest.fixture
def missing_target(tmp_path: Path) -> Path:
    """A clean project whose config names, in `config_paths`, a file it lacks (NeMo Gym main has
    one); its agent posts to a model server, so the configs are read to tell where."""
    return make_project(
        tmp_path / "repo",
        {AGENT: POSTING_AGENT, CONFIG: CONFIG_TEXT, "responses_api_agents/echo/configs/base.yaml": "{}\n"},
    )


def test_a_missing_config_paths_target_is_a_warning_at_its_line(cli, missing_target: Path) -> None:
    result = cli("scan", "--format", "json", missing_target)
    strict = cli("scan", "--format", "json", "--strict", missing_target)

    assert result.exit_code == 0, result.stderr
    (error,) = json.loads(result.stdout)["errors"]
    assert (error["path"], error["line"], error["severity"]) == (CONFIG, 1, "warning")
    assert "'responses_api_agents/echo/configs/gone.yaml' was not found" in error["message"]
    assert strict.exit_code == 1
    assert json.loads(strict.stdout)["errors"][0]["severity"] == "error"


def test_a_missing_config_paths_target_does_not_fail_the_pytest_helper(missing_target: Path) -> None:
    report = assert_no_self_calls(missing_target)  # raises if it counts as a file not analysed

    assert [(e.path, e.fails) for e in report.errors] == [(CONFIG, False)]
    (missing_target / "pyproject.toml").write_text(
        '[project]\nname = "gate"\n[tool.selfcall-audit]\nstrict = true\n'
    )
    with pytest.raises(AssertionError, match="could not be analysed"):
        assert_no_self_calls(missing_target)


def test_a_broken_file_fails_the_gate_and_fix_too(cli, tmp_path: Path) -> None:
    broken = CLEAN_AGENT.replace(
        "class EchoAgent(SimpleResponsesAPIAgent):", "class Broken(SimpleResponsesAPIAgent:"
    )
    root = make_project(tmp_path / "repo", {AGENT: CLEAN_AGENT, "pkg/broken.py": broken})

    scan = cli("scan", "--format", "concise", root / "pkg/broken.py")
    fix = cli("fix", "--no-cache", root)

    assert scan.exit_code == 1
    assert finding_lines(scan.stdout)[-1].endswith(
        "broken.py:4:37: SCA900 syntax error at line 4, column 37: invalid syntax"
    )
    assert fix.exit_code == 1  # a self-call in it would go unseen: "none left" cannot be said
    assert "broken.py:4:37: SCA900 syntax error" in fix.stdout


def test_entries_keep_their_kind_and_place_through_the_cache(cli, tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", {AGENT: SELF_CALLING_AGENT, CONFIG: "responses_api_agents: [1\n"})

    cold, warm = (json.loads(cli("scan", "--format", "json", root).stdout) for _ in range(2))

    assert cold["errors"] == warm["errors"]
    (error,) = warm["errors"]
    assert (error["path"], error["line"], error["column"], error["severity"]) == (CONFIG, 2, 1, "warning")
    entry = InputError("a.py", "syntax error at line 3, column 4: x", "syntax", 3, 4, fails=True)
    assert decode(encode(entry), "InputError") == entry


@pytest.fixture
def unreadable(tmp_path: Path, monkeypatch) -> Path:
    """A project whose agent file cannot be read. Stands in for `chmod 000`, which root ignores:
    `os.access` says no, as it would, and opening it fails."""
    root = make_project(tmp_path / "repo", {AGENT: SELF_CALLING_AGENT})
    real_open, real_access = os.open, os.access

    def os_open(path, flags, *args, **kwargs):
        if str(path).endswith(AGENT):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args, **kwargs)

    def access(path, mode, *args, **kwargs):
        return False if str(path).endswith(AGENT) else real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(discovery.os, "open", os_open)
    monkeypatch.setattr(os, "access", access)
    monkeypatch.chdir(root)
    return root


@pytest.mark.parametrize(
    "options",
    [(), ("-q",), ("--no-cache",), ("--statistics",), ("-o", "out/report.txt"), ("--format", "json")],
)
def test_an_unreadable_file_named_on_the_command_line_is_one_situation(
    cli, unreadable: Path, options
) -> None:
    result = cli("scan", AGENT, *options)

    assert result.exit_code == 0, result.stderr  # a warning: an unreadable file is not a parse failure
    shown = result.stdout or (unreadable / "out" / "report.txt").read_text()
    assert "SCA900" in shown


def test_an_unreadable_file_named_on_the_command_line_fails_only_strict_runs(cli, unreadable: Path) -> None:
    assert cli("scan", AGENT, "--strict").exit_code == 1
    assert cli("scan", AGENT, "--strict", "--exit-zero").exit_code == 0
    assert cli("agents", AGENT).exit_code == 0
    fix = cli("fix", AGENT)
    assert fix.exit_code == 0, fix.stderr
    assert f"{AGENT}:1:1: SCA900 cannot read: Permission denied" in fix.stdout

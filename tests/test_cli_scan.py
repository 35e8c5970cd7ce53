"""`selfcall-audit scan`, `agents`, `explain`, `--version` and `--help`, as users run them.

Most tests go through click's runner; the exit-code contract is also checked on a real process.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import finding_lines
from fixture_annotations import annotated_findings

from selfcall_audit import __version__
from selfcall_audit.rules import RULES

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
DEMO = FIXTURES / "demo-gym"

DEMO_FINDINGS = [
    ["SCA001", "responses_api_agents/judge_agent/app.py", 27],
    ["SCA001", "responses_api_agents/langchain_agent/app.py", 34],
    ["SCA001", "responses_api_agents/proof_refinement_agent/app.py", 36],
    ["SCA001", "responses_api_agents/remote_agent/app.py", 35],
    ["SCA002", "responses_api_agents/remote_agent/app.py", 48],
    ["SCA001", "responses_api_agents/simple_agent/app.py", 62],
]
DEMO_AGENTS = {
    "SimpleAgent",
    "MathTutorAgent",
    "ProofRefinementAgent",
    "GraphAgentAdapter",
    "ChainAgent",
    "ReActAgent",
    "PlanExecuteAgent",
    "RemoteAgent",
    "SWEAgent",
    "JudgeAgent",
    "MultiTurnAgent",
}


def triples(report: dict) -> list[list]:
    return sorted([f["code"], f["path"], f["line"]] for f in report["findings"])


def scan_json(cli, *args: object) -> tuple[int, dict]:
    result = cli("scan", "--format", "json", "--no-cache", *args)
    return result.exit_code, json.loads(result.stdout)


def copy_fixture(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target)
    return target


def set_settings(project: Path, table: str) -> None:
    """Replace the project's pyproject.toml by one holding these `[tool.selfcall-audit]` lines."""
    header = f'[project]\nname = "{project.name}"\n\n[tool.selfcall-audit]\n'
    (project / "pyproject.toml").write_text(header + table)


# output formats ----------------------------------------------------------------------------


def test_json_report_follows_the_documented_schema(cli) -> None:
    code, report = scan_json(cli, DEMO)

    assert code == 1
    assert set(report) == {"version", "root", "findings", "errors", "summary"}
    assert report["version"] == 1
    assert report["root"] == str(DEMO)
    assert triples(report) == sorted(DEMO_FINDINGS)
    for finding in report["findings"]:
        assert set(finding) == {
            "code",
            "path",
            "line",
            "column",
            "end_line",
            "end_column",
            "message",
            "agent",
            "method",
            "fixable",
            "evidence",
        }
        assert finding["code"] in ("SCA001", "SCA002")
        assert not finding["path"].startswith("/") and "\\" not in finding["path"]
        assert all(type(finding[key]) is int for key in ("line", "column", "end_line", "end_column"))
        assert finding["line"] >= 1 and finding["column"] >= 1
        assert finding["end_line"] > finding["line"]
        assert type(finding["fixable"]) is bool
        assert finding["message"].startswith(f"{finding['agent']}.{finding['method']} ")
        assert finding["evidence"], "every finding says why"
        for evidence in finding["evidence"]:
            assert set(evidence) == {"path", "line", "note"}
            assert type(evidence["path"]) is str and type(evidence["line"]) is int and evidence["note"]
    assert report["errors"] == []
    summary = report["summary"]
    assert set(summary) == {"files_scanned", "files_parsed", "agents", "findings", "seconds"}
    assert all(type(summary[key]) is int for key in ("files_scanned", "files_parsed", "agents", "findings"))
    assert type(summary["seconds"]) is float and summary["seconds"] >= 0
    assert summary["findings"] == len(DEMO_FINDINGS)
    assert summary["agents"] == len(DEMO_AGENTS)
    assert 0 < summary["files_parsed"] <= summary["files_scanned"]


def test_json_describes_one_finding_completely(cli) -> None:
    _, report = scan_json(cli, DEMO)
    (finding,) = [f for f in report["findings"] if f["path"] == "responses_api_agents/simple_agent/app.py"]

    assert finding == {
        "code": "SCA001",
        "path": "responses_api_agents/simple_agent/app.py",
        "line": 62,
        "column": 26,
        "end_line": 67,
        "end_column": 10,
        "message": "SimpleAgent.run posts to its own /v1/responses over HTTP; call the handler in-process",
        "agent": "SimpleAgent",
        "method": "run",
        "fixable": True,
        "evidence": [
            {
                "path": "responses_api_agents/simple_agent/configs/simple_agent.yaml",
                "line": 1,
                "note": "instance `simple_agent` runs this agent",
            }
        ],
    }


SUBCLASS_AGENT = """\
from responses_api_agents.simple_agent.app import SimpleAgent


class CheckpointAgent(SimpleAgent):
    pass
"""


@pytest.mark.parametrize("scanned", ["", "responses_api_agents/simple_agent/app.py"])
def test_an_inherited_self_call_shows_the_instances_of_its_own_class_first(
    cli, tmp_path: Path, scanned: str
) -> None:
    """Instances of a subclass sort before the class's own by path; the evidence keeps three
    instances, and the class's own, configured in its folder, are the ones a reviewer of its method
    looks for (a whole run and a one-file run alike)."""
    project = copy_fixture("demo-gym", tmp_path)
    folder = project / "responses_api_agents" / "checkpoint_agent"
    (folder / "configs").mkdir(parents=True)
    (folder / "app.py").write_text(SUBCLASS_AGENT)
    for name in "abc":
        (folder / "configs" / f"{name}.yaml").write_text(
            f"checkpoint_{name}:\n  responses_api_agents:\n    checkpoint_agent:\n      entrypoint: app.py\n"
        )
    # another agent's folder configuring the base too: sorts first, shown after the base's own config
    (folder / "configs" / "base.yaml").write_text(
        "borrowed_simple_agent:\n  responses_api_agents:\n    simple_agent:\n      entrypoint: app.py\n"
    )

    _, report = scan_json(cli, project / scanned)
    (finding,) = [f for f in report["findings"] if f["agent"] in ("SimpleAgent", "CheckpointAgent")]

    assert (finding["agent"], finding["method"]) == ("SimpleAgent", "run")
    assert [e["note"] for e in finding["evidence"]] == [
        "instance `simple_agent` runs this agent",
        "instance `borrowed_simple_agent` runs this agent",
        "instance `checkpoint_a` runs this agent",
    ]


BROKEN_AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent

class BrokenAgent(SimpleResponsesAPIAgent:
"""


def test_unreadable_files_are_error_entries_not_findings(cli, tmp_path: Path) -> None:
    project = copy_fixture("base-module-paths", tmp_path)
    (project / "responses_api_agents" / "broken.py").write_text(BROKEN_AGENT)

    code, report = scan_json(cli, project)

    assert code == 1
    assert len(report["findings"]) == 2
    (error,) = report["errors"]
    assert set(error) == {"code", "path", "message", "line", "column", "severity"}
    assert (error["code"], error["path"], error["line"]) == ("SCA900", "responses_api_agents/broken.py", 3)
    assert (error["severity"], error["column"]) == ("error", 42)  # the colon where `)` belongs
    assert "syntax error at line 3" in error["message"]


def test_a_python_file_that_does_not_parse_fails_the_gate_as_ruff(cli, tmp_path: Path) -> None:
    project = copy_fixture("trap-text", tmp_path)  # no self-call: the broken file alone fails
    (project / "responses_api_agents" / "broken.py").write_text(BROKEN_AGENT)

    for options in ((), ("--strict",), ("-q",), ("--statistics",)):
        result = cli("scan", "--format", "concise", "--no-cache", *options, project)
        assert result.exit_code == 1, options
    plain = cli("scan", "--format", "concise", project)  # from the cache now: the same
    assert plain.exit_code == 1
    assert re.search(
        r"responses_api_agents/broken\.py:3:(\d+): SCA900 syntax error at line 3, column \1", plain.stdout
    )
    assert cli("scan", "--exit-zero", project).exit_code == 0


UNPARSABLE_AGENT = (
    "from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent\n\n\n"
    "class LoudAgent(SimpleResponsesAPIAgent):\n"
    "    async def run(self, body: dict) -> None:\n"
    "        await self.server_client.post(server_name=self.config.name, url_path='/v1/responses', json=body)\n"
    "        print(f'{body[\"rid\"]!r:{{}}'  # ( unclosed: no Python parses this\n"
)


def _unparsable_project(tmp_path: Path, requires: str) -> Path:
    """The text-trap fixture with an agent file no Python parses, requiring Python `requires`."""
    project = copy_fixture("trap-text", tmp_path)
    (project / "responses_api_agents" / "loud.py").write_text(UNPARSABLE_AGENT)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + f'requires-python = ">={requires}"\n')
    return project


def test_a_file_an_older_python_cannot_parse_fails_the_run_naming_the_python_needed(
    cli, tmp_path: Path
) -> None:
    newer = f"{sys.version_info[0]}.{sys.version_info[1] + 1}"
    result = cli("scan", "--format", "concise", "--no-cache", _unparsable_project(tmp_path, newer))

    assert result.exit_code == 2
    assert f"Run selfcall-audit with Python {newer} or newer" in result.stderr


def test_the_same_file_under_the_python_the_project_requires_is_a_file_that_does_not_parse(
    cli, tmp_path: Path
) -> None:
    running = f"{sys.version_info[0]}.{sys.version_info[1]}"
    result = cli("scan", "--format", "concise", "--no-cache", _unparsable_project(tmp_path, running))

    assert result.exit_code == 1  # SCA900, failing the gate as ruff would, not exit 2
    # where on the line the parser gives up differs between versions (3.11: column 14, 3.13: 36)
    assert re.search(r"loud\.py:7:\d+: SCA900 syntax error", result.stdout), result.stdout


def test_concise_prints_one_line_per_finding(cli, monkeypatch) -> None:
    monkeypatch.chdir(DEMO)  # paths are printed relative to the current folder
    result = cli("scan", "--format", "concise", "--no-cache", DEMO)

    assert result.exit_code == 1
    lines = finding_lines(result.stdout)
    pattern = re.compile(r"^(?P<path>[\w/.-]+\.py):(?P<line>\d+):(?P<col>\d+): (?P<code>SCA\d{3}) .+$")
    matches = [pattern.match(line) for line in lines]
    assert all(matches), lines
    assert sorted([m["code"], m["path"], int(m["line"])] for m in matches) == sorted(DEMO_FINDINGS)
    assert lines[-1].startswith(
        "responses_api_agents/simple_agent/app.py:62:26: SCA001 SimpleAgent.run posts"
    )


def test_concise_is_the_default_when_output_is_not_a_terminal(cli) -> None:
    default = cli("scan", "--no-cache", DEMO)

    assert default.stdout == cli("scan", "--format", "concise", "--no-cache", DEMO).stdout


def test_text_report_shows_code_frame_evidence_and_table(cli, monkeypatch) -> None:
    monkeypatch.chdir(DEMO)  # paths are printed relative to the current folder
    result = cli("scan", "--format", "text", "--no-cache", DEMO)

    assert result.exit_code == 1
    out = result.stdout
    assert "responses_api_agents/simple_agent/app.py:62:26: SCA001 SimpleAgent.run posts to its own" in out
    # the code frame: the call's lines, numbered, with a line of context on each side
    assert re.search(r"61\s*\n", out)
    assert re.search(r"62\s+response = await self\.server_client\.post\(", out)
    assert re.search(r"63\s+server_name=self\.config\.name,", out)
    assert re.search(r"68\s+await raise_for_status\(response\)", out)
    # the evidence chain
    assert "= responses_api_agents/proof_refinement_agent/app.py:31: `config` is bound here" in out
    assert "= nemo_gym/base_responses_api_agent.py:41: route `/aggregate_metrics` is registered here" in out
    assert (
        "= not fixable: the call goes through `_post_json()`, which does more than pass its arguments on"
        in out
    )
    # the per-agent table and the summary
    assert "Self-calls per agent" in out
    assert re.search(r"RemoteAgent\s+│\s+responses_api_agents/remote_agent/app\.py\s+│\s+2", out)
    assert re.search(r"Found 6 self-calls in \d+ files", out)
    assert "\x1b[" not in out, "no colour codes when the output is not a terminal"


def test_text_report_for_a_clean_project(cli) -> None:
    result = cli("scan", "--format", "text", "--no-cache", FIXTURES / "trap-other-servers")

    assert result.exit_code == 0
    assert result.stdout.startswith("No self-calls in ")
    assert "Self-calls per agent" not in result.stdout


# exit codes and usage errors -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--format", "xml"], "Invalid value for '--format'"),
        (["--select", "SCA999"], "unknown rule code or prefix 'SCA999'"),
        (["--ignore", "E501"], "unknown rule code or prefix 'E501'"),
        ([str(FIXTURES / "no-such-folder")], "does not exist"),
        (["--no-such-option"], "No such option"),
        (["--config", str(FIXTURES / "missing.toml")], "config file not found"),
    ],
)
def test_usage_errors_exit_2_with_a_message(cli, args: list[str], expected: str) -> None:
    result = cli("scan", "--no-cache", DEMO, *args)

    assert result.exit_code == 2
    assert expected in result.stderr
    assert "internal error" not in result.stderr  # a usage error, said as one


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ('agent_base = ["x.Y"]\n', "unknown setting `agent_base` in [tool.selfcall-audit]"),
        ('include-tests = "yes"\n', "`include-tests` must be true or false"),
    ],
    ids=["unknown", "wrong-type"],
)
def test_a_bad_setting_in_pyproject_exits_2(cli, tmp_path: Path, setting: str, expected: str) -> None:
    project = copy_fixture("trap-text", tmp_path)
    set_settings(project, setting)

    result = cli("scan", "--no-cache", project)

    assert result.exit_code == 2
    assert expected in result.stderr
    assert "internal error" not in result.stderr  # a usage error, said as one


def test_settings_that_are_not_a_table_exit_2_naming_the_file(cli, tmp_path: Path) -> None:
    project = copy_fixture("loops-try", tmp_path)
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool]\nselfcall-audit = 3\n')

    done = cli("scan", "--no-cache", cwd=project)

    assert done.exit_code == 2
    assert "pyproject.toml: [tool.selfcall-audit] must be a table, not 3" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_pyproject_whose_tool_is_not_a_table_holds_no_settings(cli, tmp_path: Path) -> None:
    project = copy_fixture("loops-try", tmp_path)
    (project / "pyproject.toml").write_text('tool = "selfcall-audit"\n')

    done = cli("scan", "--no-cache", cwd=project)

    assert done.exit_code == 1, done.stderr  # the scan ran, with the defaults: no internal error
    assert done.stdout.count(": SCA001 ") == 2


def test_exit_codes_of_the_real_command(command) -> None:
    clean = command("scan", "--no-cache", FIXTURES / "trap-in-process")
    findings = command("scan", "--no-cache", FIXTURES / "loops-try")
    usage = command("scan", "--no-cache", "--select", "NOPE", FIXTURES / "loops-try")

    assert (clean.returncode, finding_lines(clean.stdout)) == (0, [])
    assert findings.returncode == 1
    assert findings.stdout.count(": SCA001 ") == 2
    assert usage.returncode == 2
    assert "unknown rule code or prefix 'NOPE'" in usage.stderr
    assert "Traceback" not in usage.stderr


LAUNCH = [sys.executable, "-m", "selfcall_audit"]


@pytest.mark.parametrize("where", ["in the project", "elsewhere"])
def test_the_console_script_reports_the_same_wherever_it_is_started(tmp_path: Path, where: str) -> None:
    """It lists the files of the project around the current folder early; from elsewhere that
    guess is wrong and must cost nothing but time."""
    project = copy_fixture("demo-gym", tmp_path)
    subprocess.run(["git", "init", "-q", project], check=True)
    cwd = project if where == "in the project" else tmp_path / "other"
    subprocess.run(["git", "init", "-q", cwd], check=True)  # a checkout whose listing is not the one wanted
    run = subprocess.run(
        [*LAUNCH, "scan", "--no-cache", "--format", "json", project], cwd=cwd, capture_output=True, text=True
    )

    assert run.returncode == 1, run.stderr
    found = sorted([f["code"], f["path"], f["line"]] for f in json.loads(run.stdout)["findings"])
    assert found == annotated_findings(project)


def test_a_reader_that_goes_away_ends_the_run_quietly() -> None:
    """`scan | true`: the pipe is closed before the report is written."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "selfcall_audit",
            "scan",
            "--no-cache",
            FIXTURES / "loops-try",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    process.stdout.close()
    stderr = process.stderr.read().decode()
    process.wait(timeout=60)

    assert (process.returncode, stderr) == (1, "")


# selecting rules -------------------------------------------------------------------------------

POSSIBLE = FIXTURES / "possible-self-call"
SELF_CALL = ["SCA001", "responses_api_agents/dynamic_agent/app.py", 18]
UNKNOWN_NAME = ["SCA003", "responses_api_agents/dynamic_agent/app.py", 16]
UNKNOWN_PATH = ["SCA003", "responses_api_agents/dynamic_agent/app.py", 17]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], [SELF_CALL]),
        (["--select", "SCA003"], [UNKNOWN_NAME, UNKNOWN_PATH]),
        (["--select", "sca003"], [UNKNOWN_NAME, UNKNOWN_PATH]),
        (["--strict"], [SELF_CALL, UNKNOWN_NAME, UNKNOWN_PATH]),
        (["--select", "SCA"], [SELF_CALL, UNKNOWN_NAME, UNKNOWN_PATH]),
        (["--select", "SCA001,SCA003"], [SELF_CALL, UNKNOWN_NAME, UNKNOWN_PATH]),
        (["--select", "SCA", "--ignore", "SCA003"], [SELF_CALL]),
        (["--select", "SCA003", "--ignore", "SCA"], [UNKNOWN_NAME, UNKNOWN_PATH]),  # the more specific wins
        (["--strict", "--ignore", "SCA003"], [SELF_CALL]),
        (["--ignore", "SCA001"], []),
    ],
)
def test_select_and_ignore(cli, args: list[str], expected: list[list]) -> None:
    code, report = scan_json(cli, POSSIBLE, *args)

    assert triples(report) == sorted(expected)
    assert code == (1 if expected else 0)


def test_ignore_one_code_keeps_the_others(cli) -> None:
    _, report = scan_json(cli, FIXTURES / "route-wrappers", "--ignore", "SCA001")

    assert triples(report) == [["SCA002", "responses_api_agents/wrapper_agent/app.py", 32]]


# which files -----------------------------------------------------------------------------------


def test_exclude_leaves_out_files_and_folders_and_repeats(cli) -> None:
    _, one = scan_json(cli, DEMO, "--exclude", "responses_api_agents/remote_agent/")
    _, two = scan_json(cli, DEMO, "--exclude", "remote_agent", "--exclude", "*/judge_agent/app.py")

    remote, judge = "responses_api_agents/remote_agent/app.py", "responses_api_agents/judge_agent/app.py"
    assert triples(one) == sorted(f for f in DEMO_FINDINGS if f[1] != remote)
    assert triples(two) == sorted(f for f in DEMO_FINDINGS if f[1] not in (remote, judge))


def test_test_code_is_excluded_unless_asked_for(cli) -> None:
    fixture = FIXTURES / "test-code"
    code, default = scan_json(cli, fixture)
    included_code, included = scan_json(cli, fixture, "--include-tests")

    assert (code, triples(default)) == (0, [])
    # the stub agent in a test file really self-calls; the mocked calls in tests and conftest do not
    assert (included_code, triples(included)) == (1, [["SCA001", "tests/test_stub_agent.py", 8]])


def test_settings_from_pyproject_apply_and_flags_override_them(cli, tmp_path: Path) -> None:
    project = copy_fixture("possible-self-call", tmp_path)
    set_settings(project, 'select = ["SCA003"]\n')

    _, from_settings = scan_json(cli, project)
    _, overridden = scan_json(cli, project, "--select", "SCA001")

    assert [f[0] for f in triples(from_settings)] == ["SCA003", "SCA003"]
    assert triples(overridden) == [SELF_CALL]


def test_include_tests_and_exclude_settings(cli, tmp_path: Path) -> None:
    project = copy_fixture("test-code", tmp_path)
    set_settings(project, "include-tests = true\n")
    _, included = scan_json(cli, project)
    set_settings(copy_fixture("demo-gym", tmp_path / "x"), 'exclude = ["langchain_agent/"]\n')
    _, excluded = scan_json(cli, tmp_path / "x" / "demo-gym", "--extend-exclude", "remote_agent/")
    _, replaced = scan_json(cli, tmp_path / "x" / "demo-gym", "--exclude", "remote_agent/")  # as ruff's

    assert triples(included) == [["SCA001", "tests/test_stub_agent.py", 8]]
    assert triples(excluded) == sorted(
        f for f in DEMO_FINDINGS if "langchain_agent" not in f[1] and "remote_agent" not in f[1]
    )
    assert triples(replaced) == sorted(f for f in DEMO_FINDINGS if "remote_agent" not in f[1])


def test_agent_bases_setting_names_other_base_classes(cli, tmp_path: Path) -> None:
    project = copy_fixture("base-module-paths", tmp_path)
    set_settings(project, 'agent-bases = ["toolkit.servers.SimpleResponsesAPIAgent"]\n')

    _, report = scan_json(cli, project)

    # the setting adds names; the in-repo base still serves `/v1/responses`, so its subclass stays an agent
    assert triples(report) == [
        ["SCA001", "responses_api_agents/echo_agent/app.py", 10],
        ["SCA001", "responses_api_agents/lookalike_agent/app.py", 10],
    ]


def test_config_option_reads_another_settings_file(cli, tmp_path: Path) -> None:
    settings = tmp_path / "audit.toml"
    settings.write_text('ignore = ["SCA002"]\n')

    _, report = scan_json(cli, FIXTURES / "other-own-routes", "--config", settings)

    assert report["findings"] == []


def test_a_sub_path_reports_only_its_findings_but_the_whole_root_is_indexed(cli) -> None:
    graph = FIXTURES / "inherited-sibling" / "responses_api_agents" / "graph_agent"
    code, critic = scan_json(cli, graph / "critic_agent.py")
    clean_code, planner = scan_json(cli, graph / "planner_agent.py")

    # critic_agent.py is an agent only through `from app import ...`, a file outside the scanned path
    assert code == 1
    assert triples(critic) == [["SCA001", "responses_api_agents/graph_agent/critic_agent.py", 13]]
    assert critic["root"] == str(FIXTURES / "inherited-sibling")
    assert (clean_code, triples(planner)) == (0, [])


def test_a_sub_path_still_sees_instance_names_bound_in_yaml_elsewhere(cli) -> None:
    tutor = FIXTURES / "yaml-features"
    _, report = scan_json(cli, tutor / "responses_api_agents" / "tutor" / "app.py")

    # line 13 posts to "algebra_tutor", an instance defined in resources_servers/...
    assert triples(report) == [
        ["SCA001", "responses_api_agents/tutor/app.py", 11],
        ["SCA001", "responses_api_agents/tutor/app.py", 13],
    ]


def test_a_changed_yaml_file_reports_the_self_calls_it_creates(cli) -> None:
    tutor = FIXTURES / "yaml-features"
    _, report = scan_json(cli, tutor / "resources_servers" / "algebra" / "configs" / "algebra.yaml")

    assert triples(report) == [["SCA001", "responses_api_agents/tutor/app.py", 13]]


def test_paths_in_a_nested_sub_project_are_scanned_from_the_outer_root(cli, tmp_path: Path) -> None:
    gym = tmp_path / "gym"
    shutil.copytree(FIXTURES / "noqa", gym)
    nested = gym / "resources_servers" / "scorer"
    nested.mkdir(parents=True)
    (nested / "pyproject.toml").write_text("[project]\nname = 'scorer'\n")
    (nested / "app.py").write_text("def score():\n    return 1\n")
    agent_files = sorted((gym / "responses_api_agents").rglob("app.py"))

    _, report = scan_json(cli, nested / "app.py", *agent_files)

    assert report["root"] == str(gym.resolve())
    assert triples(report) == annotated_findings(gym)


def test_paths_of_sibling_projects_are_each_analysed_in_their_own_project(cli, tmp_path: Path) -> None:
    """As pre-commit passes them: one report, its root the folder holding both projects."""
    noqa, loops = copy_fixture("noqa", tmp_path), copy_fixture("loops-try", tmp_path)

    code, report = scan_json(cli, noqa, loops)

    assert code == 1
    assert report["root"] == str(tmp_path.resolve())
    expected = [[c, f"noqa/{p}", n] for c, p, n in annotated_findings(noqa)]
    expected += [[c, f"loops-try/{p}", n] for c, p, n in annotated_findings(loops)]
    assert triples(report) == sorted(expected)


# agents, explain, version, help ---------------------------------------------------------------


def test_agents_json_lists_every_agent_class_with_instances_and_self_calls(cli) -> None:
    result = cli("agents", "--format", "json", "--no-cache", DEMO)

    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert set(data) == {"version", "root", "agents"}
    rows = {row["agent"]: row for row in data["agents"]}
    assert set(rows) == DEMO_AGENTS
    assert rows["SimpleAgent"] == {
        "agent": "SimpleAgent",
        "path": "responses_api_agents/simple_agent/app.py",
        "line": 17,
        "bases": ["nemo_gym.base_responses_api_agent.SimpleResponsesAPIAgent"],
        "instances": ["simple_agent"],
        "recognised": "subclass of nemo_gym.base_responses_api_agent.SimpleResponsesAPIAgent",
        "self_calls": 1,
    }
    assert rows["JudgeAgent"]["instances"] == ["judge_agent", "judge_agent_self_critique"]
    assert rows["ReActAgent"]["bases"] == ["responses_api_agents.langchain_agent.app.GraphAgentAdapter"]
    assert rows["ReActAgent"]["instances"] == ["react_agent"]
    assert (
        rows["ReActAgent"]["recognised"]
        == "subclass of nemo_gym.base_responses_api_agent.SimpleResponsesAPIAgent"
    )
    assert (rows["RemoteAgent"]["self_calls"], rows["SWEAgent"]["self_calls"]) == (2, 0)


def test_agents_json_says_an_agent_known_by_its_route_serves_it(cli) -> None:
    result = cli("agents", "--format", "json", "--no-cache", FIXTURES / "shape-agents-by-routes")

    rows = {row["agent"]: row for row in json.loads(result.stdout)["agents"]}
    assert rows["EchoHarness"]["recognised"] == "serves its route (registered at harness/serving.py:9)"
    assert rows["AliasAgent"]["bases"] == ["nemo_gym.base_responses_api_agent.SimpleResponsesAPIAgent"]
    assert "EchoModel" not in rows and "RolloutProcessor" not in rows


def test_a_path_is_shown_as_it_is_built_each_unknown_part_named(cli) -> None:
    _, report = scan_json(cli, FIXTURES / "shape-helper-posts-own-route")

    messages = {f["line"]: f["message"] for f in report["findings"]}
    assert "/v1/sessions/{session_id}/close (a path that cannot be resolved statically)" in messages[35]


def test_agents_text_is_a_table(cli, monkeypatch) -> None:
    monkeypatch.chdir(DEMO)
    result = cli("agents", "--no-cache", "--format", "text", DEMO)

    assert result.exit_code == 0
    assert f"{len(DEMO_AGENTS)} agent classes" in result.stdout
    assert re.search(r"SimpleAgent\(SimpleResponsesAPIAgent\)\s+simple_agent\s+1\s", result.stdout)
    assert re.search(r"JudgeAgent\(SimpleResponsesAPIAgent\)\s+judge_agent,", result.stdout)
    assert "judge_agent_self_critique" in result.stdout
    # at 80 columns (not a terminal) a long path loses its start, marked, never its file name
    assert re.search(r"\s…\S*_agent/plan_execute_agent\.py:11\s", result.stdout)
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


@pytest.mark.parametrize("code", sorted(RULES))
def test_explain_each_rule(cli, code: str) -> None:
    result = cli("explain", code.lower())

    assert result.exit_code == 0
    rule = RULES[code]
    assert result.stdout.startswith(f"{code} ({rule.name})\n")
    assert rule.summary in result.stdout
    assert "Example:" in result.stdout and "Instead:" in result.stdout


def test_explain_says_which_rules_are_off_by_default(cli) -> None:
    assert "Default: on." in cli("explain", "SCA001").stdout
    assert "Default: off (`--select SCA003` or `--strict`)." in cli("explain", "SCA003").stdout
    assert "Default: always (an error entry, not a finding)." in cli("explain", "SCA900").stdout
    assert "Fixable: yes" in cli("explain", "SCA001").stdout


def test_explain_an_unknown_code_exits_2(cli) -> None:
    result = cli("explain", "SCA404")

    assert result.exit_code == 2
    assert "unknown rule 'SCA404'" in result.stderr
    assert "SCA001" in result.stderr


def test_version(cli, command) -> None:
    assert cli("--version").stdout == f"selfcall-audit, version {__version__}\n"
    done = command("--version")
    assert (done.returncode, done.stdout) == (0, f"selfcall-audit, version {__version__}\n")


def test_help_lists_commands_and_examples(cli) -> None:
    top = cli("--help")
    scan = cli("scan", "--help")

    assert top.exit_code == 0 and scan.exit_code == 0
    for command in ("scan", "agents", "explain"):
        assert re.search(rf"^\s+{command}\s", top.stdout, re.MULTILINE)
    assert "Examples:" in top.stdout
    assert "selfcall-audit scan --format json" in top.stdout
    assert "Examples:" not in scan.stdout, "a command's help does not repeat the top-level examples"
    assert "Exit status: 0 no findings, 1 findings" in " ".join(scan.stdout.split())
    for option in ("--format", "--select", "--ignore", "--exclude", "--include-tests", "--strict"):
        assert option in scan.stdout


def test_a_helper_setting_that_is_not_module_colon_name_is_a_usage_error_for_scan_too(
    cli, tmp_path: Path
) -> None:
    # scan reads the setting to find the vendored copy (SCA004): a typo must not quietly stop that
    project = copy_fixture("loops-try", tmp_path)
    (project / "pyproject.toml").write_text('[tool.selfcall-audit]\nhelper = "nemo_gym.inprocess"\n')

    done = cli("scan", "--no-cache", "--format", "json", cwd=project)

    assert done.exit_code == 2
    assert "pyproject.toml: `helper`: the helper must be given as MODULE:NAME" in done.stderr
    assert "'nemo_gym.inprocess'" in done.stderr
    assert "Traceback" not in done.stderr

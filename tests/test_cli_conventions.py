"""The command line as a ruff user expects it: each convention run in-process through
`main(argv)`, from the folder a user would run it in; what only a process shows (the module run as
`python -m`, a full disk as stdout, a signal, a deleted current folder) runs as a real command."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import jsonschema
import pytest
from cli_support import Ran, finding_lines, run_main
from fixture_annotations import NOT_COPIED
from safety_support import children, interrupted

from selfcall_audit.migrate.vendor import helper_source
from selfcall_audit.rules import RULES

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
DEMO_FINDINGS = 6  # the annotated lines of fixtures/demo-gym
# worth parsing (it names an agent base class), and it cannot be: a syntax error at its line 3
BROKEN = "from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent\n\nclass B(SimpleResponsesAPIAgent:\n"
ANSI = "\x1b["


def run(*args: object, cwd: Path | None = None, env: dict[str, str] | None = None) -> Ran:
    """The command line in-process from `cwd`, NO_COLOR and FORCE_COLOR unset unless `env` sets them."""
    return run_main(
        [str(a) for a in args], env={"NO_COLOR": None, "FORCE_COLOR": None, **(env or {})}, cwd=cwd
    )


# exit codes and where the output goes --------------------------------------------------------


def test_exit_zero_exits_0_with_findings_and_still_prints_them(demo: Path) -> None:
    done = run("scan", "--exit-zero", cwd=demo)

    assert done.exit_code == 0, done.stderr
    assert len(finding_lines(done.stdout)) == DEMO_FINDINGS


def test_exit_zero_keeps_usage_errors_at_2(demo: Path) -> None:
    assert run("scan", "--exit-zero", "--select", "SCA01", cwd=demo).exit_code == 2


def test_output_file_takes_the_results_and_stdout_stays_empty(demo: Path) -> None:
    done = run("scan", "--format", "json", "-o", "audit.json", cwd=demo)

    assert (done.exit_code, done.stdout) == (1, "")
    assert len(json.loads((demo / "audit.json").read_text())["findings"]) == DEMO_FINDINGS
    long_form = run("scan", "--output-file", "audit.txt", cwd=demo)
    assert long_form.exit_code == 1
    assert (demo / "audit.txt").read_text() == run("scan", cwd=demo).stdout


def test_output_file_that_cannot_be_written_is_one_line_and_exit_2(demo: Path) -> None:
    (demo / "taken").write_text("a file where -o needs a folder\n")
    done = run("scan", "-o", "taken/out.txt", cwd=demo)

    assert done.exit_code == 2
    assert done.stderr.startswith("selfcall-audit: cannot write the results to taken/out.txt: ")
    assert done.stderr.count("\n") == 1


def test_output_file_in_a_missing_folder_creates_it_as_ruff(demo: Path) -> None:
    done = run("scan", "--format", "json", "-o", "reports/audit/out.json", cwd=demo)

    assert done.exit_code == 1, done.stderr
    assert len(json.loads((demo / "reports/audit/out.json").read_text())["findings"]) == 6


@pytest.mark.slow
@pytest.mark.parametrize("output_format", ["text", "json", "junit"])
def test_stdout_gets_the_bytes_output_file_gets_whatever_the_locale(demo: Path, output_format: str) -> None:
    """UTF-8, as ruff writes and as JSON and JUnit's XML declare: a stdout in another encoding (a
    Windows code page when redirected, PYTHONIOENCODING) neither ends the run nor changes a byte."""
    command = [sys.executable, "-m", "selfcall_audit", "scan", "--format", output_format, "-q"]
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    (demo / "responses_api_agents" / "caf\u00e9.py").write_text(
        "from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent\nclass (:\n"
    )

    piped = subprocess.run(command, capture_output=True, cwd=demo, env=env, timeout=120)
    written = subprocess.run([*command, "-o", "out"], capture_output=True, cwd=demo, env=env, timeout=120)

    assert (piped.returncode, piped.stderr) == (1, b"")
    assert written.returncode == 1
    text = piped.stdout.decode("utf-8")
    if output_format == "json":  # ASCII, its escapes in JSON's own syntax
        assert [e["path"] for e in json.loads(text)["errors"]] == ["responses_api_agents/caf\u00e9.py"]
    else:
        assert "caf\u00e9.py" in text
    if output_format == "text":
        assert "\u2771" in text  # the arrow at each line of a call
    if output_format != "json":  # the JSON report holds its run time
        assert piped.stdout == (demo / "out").read_bytes()


@pytest.mark.slow
def test_quiet_text_keeps_every_finding_and_unreadable_file_and_drops_the_summary(demo: Path) -> None:
    broken = demo / "responses_api_agents" / "broken.py"
    broken.write_text("from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent\nclass (:\n")

    full = run("scan", "--format", "text", cwd=demo)
    quiet = run("scan", "--format", "text", "-q", cwd=demo)

    assert quiet.exit_code == full.exit_code == 1
    headers = [line for line in quiet.stdout.splitlines() if re.match(r"\S+:\d+(:\d+)?: SCA", line)]
    assert headers == [line for line in full.stdout.splitlines() if re.match(r"\S+:\d+(:\d+)?: SCA", line)]
    assert len(headers) == DEMO_FINDINGS + 1
    assert (
        headers[-1]
        == "responses_api_agents/broken.py:2:7: SCA900 syntax error at line 2, column 7: invalid syntax"
    )
    assert "Found 6 self-calls" in full.stdout and "Found" not in quiet.stdout
    assert "Self-calls per agent" in full.stdout and "Self-calls per agent" not in quiet.stdout


def test_a_full_disk_is_said_in_one_line_not_as_an_internal_error(demo: Path) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "selfcall_audit", "scan", "--format", "json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=demo,
            timeout=120,
        )

    assert done.returncode == 2
    assert done.stderr == "selfcall-audit: cannot write the results: No space left on device\n"


# colour -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "env", "coloured"),
    [
        ((), {}, False),  # a pipe
        ((), {"FORCE_COLOR": "1"}, True),
        ((), {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
        (("--color", "always"), {"NO_COLOR": "1"}, True),
        (("--color", "never"), {"FORCE_COLOR": "1"}, False),
        ((), {"NO_COLOR": ""}, False),  # set but empty: as if unset
    ],
)
def test_color_follows_the_option_then_no_color_then_force_color(
    demo: Path, args: tuple[str, ...], env: dict[str, str], coloured: bool
) -> None:
    done = run("scan", "--format", "text", *args, cwd=demo, env=env)

    assert done.exit_code == 1
    assert (ANSI in done.stdout) == coloured


def test_concise_output_is_coloured_as_ruff_colours_it_and_the_same_text_without(demo: Path) -> None:
    coloured = run("scan", "--format", "concise", "--color", "always", cwd=demo)
    plain = run("scan", "--format", "concise", "--color", "never", cwd=demo)

    assert coloured.exit_code == plain.exit_code == 1
    first = coloured.stdout.splitlines()[0]
    assert first.startswith("\x1b[1mresponses_api_agents/")  # the path bold
    assert "\x1b[36m:\x1b[0m" in first  # the colons cyan
    assert "\x1b[1;31mSCA001\x1b[0m " in first  # the code bold red
    assert ANSI not in plain.stdout
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured.stdout) == plain.stdout


# rule selection ------------------------------------------------------------------------------


def test_extend_select_adds_to_the_defaults(tmp_path: Path) -> None:
    root = tmp_path / "possible"
    shutil.copytree(FIXTURES / "possible-self-call", root)

    default = run("scan", "--format", "json", cwd=root)
    extended = run("scan", "--format", "json", "--extend-select", "SCA003", cwd=root)

    codes = {f["code"] for f in json.loads(default.stdout)["findings"]}
    codes_extended = {f["code"] for f in json.loads(extended.stdout)["findings"]}
    assert "SCA003" not in codes
    assert codes_extended == codes | {"SCA003"}


def test_extend_select_in_the_settings_too(tmp_path: Path) -> None:
    root = tmp_path / "possible"
    shutil.copytree(FIXTURES / "possible-self-call", root)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + '\n[tool.selfcall-audit]\nextend-select = ["SCA003"]\n')

    done = run("scan", "--format", "json", cwd=root)

    assert "SCA003" in {f["code"] for f in json.loads(done.stdout)["findings"]}


@pytest.mark.parametrize("where", ["command line", "settings"])
def test_extend_select_does_not_make_the_defaults_outrank_an_ignore(tmp_path: Path, where: str) -> None:
    """As ruff's `--extend-select B --ignore F` leaves F off: the rules on by default are the least
    specific selection, whatever is added to them."""
    root = tmp_path / "possible"
    shutil.copytree(FIXTURES / "possible-self-call", root)
    options = ["--extend-select", "SCA003", "--ignore", "SCA00"]
    if where == "settings":
        pyproject = root / "pyproject.toml"
        pyproject.write_text(
            pyproject.read_text()
            + '\n[tool.selfcall-audit]\nextend-select = ["SCA003"]\nignore = ["SCA00"]\n'
        )
        options = []

    done = run("scan", "--format", "json", *options, cwd=root)
    ignoring_one = run(
        "scan", "--format", "json", "--extend-select", "SCA003", "--ignore", "SCA001", cwd=root
    )

    assert done.exit_code == 1, done.stderr
    assert sorted(f["code"] for f in json.loads(done.stdout)["findings"]) == ["SCA003", "SCA003"]
    assert sorted(f["code"] for f in json.loads(ignoring_one.stdout)["findings"]) == ["SCA003", "SCA003"]


@pytest.mark.parametrize("key", ["select", "ignore", "extend-select"])
def test_an_unknown_code_in_the_settings_is_a_usage_error_naming_the_known_ones(demo: Path, key: str) -> None:
    pyproject = demo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + f'{key} = ["SCA01"]\n')

    done = run("scan", cwd=demo)

    assert done.exit_code == 2
    assert "unknown rule code or prefix 'SCA01'" in done.stderr
    assert "SCA001, SCA002, SCA003, SCA004, SCA900" in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("option", ["--select", "--ignore", "--extend-select"])
def test_an_unknown_code_on_the_command_line_is_a_usage_error(demo: Path, option: str) -> None:
    done = run("scan", option, "SCA999", cwd=demo)

    assert done.exit_code == 2
    assert f"{option}: unknown rule code or prefix 'SCA999'" in done.stderr


def test_the_pytest_helper_refuses_an_unknown_code(demo: Path) -> None:
    code = "from selfcall_audit.testing import assert_no_self_calls\nassert_no_self_calls('.', select='SCA999')\n"

    done = subprocess.run([sys.executable, "-c", code], cwd=demo, capture_output=True, text=True, timeout=120)

    assert done.returncode == 1
    assert "UnknownCode: unknown rule code or prefix 'SCA999'" in done.stderr  # a ValueError


# statistics ----------------------------------------------------------------------------------


def test_statistics_count_findings_per_code_most_frequent_first(demo: Path) -> None:
    done = run("scan", "--statistics", cwd=demo)

    assert done.exit_code == 1
    assert done.stdout == "5\tSCA001\t[*] agent-self-call\n1\tSCA002\t[ ] agent-self-call-other-route\n"


def test_statistics_as_json(demo: Path) -> None:
    done = run("scan", "--statistics", "--format", "json", cwd=demo)

    assert json.loads(done.stdout) == [
        {"code": "SCA001", "name": "agent-self-call", "count": 5, "fixable": True},
        {"code": "SCA002", "name": "agent-self-call-other-route", "count": 1, "fixable": False},
    ]


# formats for CI ------------------------------------------------------------------------------

# GitLab's code quality report, as its documentation describes the fields it reads.
GITLAB_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["description", "check_name", "fingerprint", "severity", "location"],
        "properties": {
            "description": {"type": "string", "minLength": 1},
            "check_name": {"type": "string", "minLength": 1},
            "fingerprint": {"type": "string", "minLength": 1},
            "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
            "location": {
                "type": "object",
                "required": ["path", "lines"],
                "properties": {
                    "path": {"type": "string"},
                    "lines": {
                        "type": "object",
                        "required": ["begin"],
                        "properties": {"begin": {"type": "integer", "minimum": 1}},
                    },
                },
            },
        },
    },
}


def test_gitlab_code_quality_report(demo: Path) -> None:
    (demo / "responses_api_agents" / "broken.py").write_text(BROKEN)
    subprocess.run(["git", "-C", str(demo), "init", "-q"], check=True)
    agent = demo / "responses_api_agents" / "simple_agent"

    done = run("scan", "--format", "gitlab", ".", cwd=agent)  # from a sub-folder: paths still from the top
    issues = json.loads(done.stdout)

    jsonschema.validate(issues, GITLAB_SCHEMA)
    assert done.exit_code == 1
    assert [(i["check_name"], i["location"]["path"], i["location"]["lines"]["begin"]) for i in issues] == [
        ("SCA001", "responses_api_agents/simple_agent/app.py", 62)
    ]
    everything = json.loads(run("scan", "--format", "gitlab", cwd=demo).stdout)
    jsonschema.validate(everything, GITLAB_SCHEMA)
    assert len({i["fingerprint"] for i in everything}) == len(everything) == DEMO_FINDINGS + 1
    broken = [i for i in everything if i["check_name"] == "SCA900"]
    assert broken[0]["location"] == {"path": "responses_api_agents/broken.py", "lines": {"begin": 3}}


def test_junit_report(demo: Path) -> None:
    (demo / "responses_api_agents" / "broken.py").write_text("x = 1\n" + BROKEN)

    done = run("scan", "--format", "junit", cwd=demo)
    top = ElementTree.fromstring(done.stdout.encode())

    assert done.exit_code == 1
    assert done.stdout.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    assert top.tag == "testsuites"
    suites = top.findall("testsuite")
    cases = [case for suite in suites for case in suite.findall("testcase")]
    assert all(s.get("tests") == str(len(s.findall("testcase"))) for s in suites)
    assert int(top.get("tests")) == len(cases) == DEMO_FINDINGS + 1
    assert int(top.get("failures")) == DEMO_FINDINGS and top.get("errors") == "1"
    simple = [c for c in cases if c.get("classname") == "responses_api_agents/simple_agent/app.py"]
    assert [(c.get("name"), c.get("line")) for c in simple] == [("selfcall-audit.SCA001", "62")]
    assert simple[0].find("failure").get("message").startswith("SimpleAgent.run posts to its own")
    broken = [c for c in cases if c.find("error") is not None]
    assert [(c.get("classname"), c.get("line")) for c in broken] == [("responses_api_agents/broken.py", "4")]


def test_junit_escapes_what_xml_cannot_carry(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo-gym", root, ignore=NOT_COPIED)
    (root / "responses_api_agents" / "a<b>&\x1b.py").write_text(BROKEN)

    done = run("scan", "--format", "junit", cwd=root)
    top = ElementTree.fromstring(done.stdout.encode())  # parses: no raw control character

    names = [case.get("classname") for case in top.iter("testcase")]
    assert "responses_api_agents/a<b>&\\x1b.py" in names


# paths ---------------------------------------------------------------------------------------


def test_paths_are_relative_to_the_current_folder_as_ruff_prints_them(demo: Path) -> None:
    agent = demo / "responses_api_agents" / "simple_agent"

    inside = run("scan", ".", cwd=agent)
    above = run("scan", "demo", cwd=demo.parent)

    assert inside.stdout.startswith("app.py:62:26: SCA001 SimpleAgent.run")
    assert "demo/responses_api_agents/simple_agent/app.py:62:26: SCA001" in above.stdout


def test_the_config_a_message_names_is_named_from_where_the_file_is(tmp_path: Path) -> None:
    monorepo = tmp_path / "mono"
    shutil.copytree(FIXTURES / "demo-gym", monorepo / "gym", ignore=NOT_COPIED)
    subprocess.run(["git", "init", "-q", str(monorepo)], check=True)
    judge = "responses_api_agents/judge_agent"
    routes = "routes `critic` back to itself in {}configs/self_critique.yaml)"

    inside = run("scan", "--format", "concise", ".", cwd=monorepo / "gym" / judge)
    github = run("scan", "--format", "github", cwd=monorepo / "gym")
    document = json.loads(run("scan", "--format", "json", cwd=monorepo / "gym" / judge).stdout)

    assert inside.stdout.startswith("app.py:27:26: SCA001 JudgeAgent.run")
    assert routes.format("") in inside.stdout.splitlines()[0]
    assert f"::error file=gym/{judge}/app.py,line=27," in github.stdout
    assert routes.format(f"gym/{judge}/") in github.stdout
    judged = [f for f in document["findings"] if f["agent"] == "JudgeAgent"]
    assert judged[0]["message"].endswith(routes.format(f"{judge}/"))  # JSON: from `root`, as its paths


@pytest.mark.slow
def test_in_a_monorepo_ci_formats_name_files_from_the_repository_top(tmp_path: Path) -> None:
    monorepo = tmp_path / "mono"
    shutil.copytree(FIXTURES / "demo-gym", monorepo / "gym", ignore=NOT_COPIED)
    subprocess.run(["git", "init", "-q", str(monorepo)], check=True)

    github = run("scan", "--format", "github", "gym", cwd=monorepo)
    sarif = json.loads(run("scan", "--format", "sarif", cwd=monorepo / "gym").stdout)
    document = json.loads(run("scan", "--format", "json", "gym", cwd=monorepo).stdout)

    assert "::error file=gym/responses_api_agents/simple_agent/app.py,line=62," in github.stdout
    run_ = sarif["runs"][0]
    assert run_["originalUriBaseIds"]["%SRCROOT%"]["uri"] == monorepo.as_uri() + "/"
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run_["results"]}
    assert "gym/responses_api_agents/simple_agent/app.py" in uris
    # JSON keeps its contract: paths relative to `root`, the project's root (gym/, its pyproject.toml)
    assert document["root"] == str(monorepo / "gym")
    assert "responses_api_agents/simple_agent/app.py" in {f["path"] for f in document["findings"]}


def test_a_nested_project_s_settings_apply_to_its_files(tmp_path: Path) -> None:
    monorepo = tmp_path / "mono"
    shutil.copytree(FIXTURES / "demo-gym", monorepo / "gym", ignore=NOT_COPIED)
    subprocess.run(["git", "init", "-q", str(monorepo)], check=True)
    pyproject = monorepo / "gym" / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + 'ignore = ["SCA002"]\n')

    done = run("scan", "--statistics", "gym/responses_api_agents", cwd=monorepo)

    assert done.stdout == "5\tSCA001\t[*] agent-self-call\n"


# files named on the command line ---------------------------------------------------------------


def test_a_broken_link_or_link_loop_named_on_the_command_line_is_an_sca900_entry(demo: Path) -> None:
    folder = demo / "responses_api_agents"
    (folder / "gone.py").symlink_to("nowhere.py")
    (folder / "loop.py").symlink_to("loop.py")

    done = run("scan", "responses_api_agents/gone.py", "responses_api_agents/loop.py", cwd=demo)

    assert done.exit_code == 0, done.stderr
    assert finding_lines(done.stdout) == [
        "responses_api_agents/gone.py:1:1: SCA900 broken symbolic link: its target does not exist",
        "responses_api_agents/loop.py:1:1: SCA900 cannot read: Too many levels of symbolic links",
    ]
    assert run("scan", "--strict", "responses_api_agents/gone.py", cwd=demo).exit_code == 1


def test_a_path_that_does_not_exist_is_a_usage_error(demo: Path) -> None:
    done = run("scan", "no_such.py", cwd=demo)

    assert done.exit_code == 2
    assert "path 'no_such.py' does not exist" in done.stderr


# no project root ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_without_a_project_root_the_run_warns_and_stops_listing_early(no_project: Path) -> None:
    for number in range(5_100):
        (no_project / "data" / f"d{number}").mkdir(parents=True)

    done = run("scan", "--format", "json", cwd=no_project)

    assert done.exit_code == 0
    assert "warning: no pyproject.toml or .git in" in done.stderr
    assert not (no_project / ".selfcall_audit_cache").exists(), "no cache where there is no project"
    errors = json.loads(done.stdout)["errors"]
    assert errors[0]["path"] == "." and "stopped listing after 5,000 folders" in errors[0]["message"]


# interrupts and internal errors -------------------------------------------------------------------

_FAILING = """
import sys
from selfcall_audit.orchestration import project
from selfcall_audit.frontends.cli import main

def analyze(self, *args, **kwargs):
    {body}

project.Project.analyze = analyze
sys.exit(main(sys.argv[1:]))
"""


def _failing(body: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    code = _FAILING.format(body=body)
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_an_interrupt_anywhere_in_the_exception_chain_is_one_line_and_exit_130(demo: Path) -> None:
    body = "try:\n        raise KeyboardInterrupt\n    except KeyboardInterrupt as exc:\n        raise KeyError('IndentedBlock(' + 'x' * 10**6) from exc"

    done = _failing(body, "scan", cwd=demo)

    assert (done.returncode, done.stderr) == (130, "selfcall-audit: interrupted\n")


@pytest.mark.slow
def test_an_internal_error_is_short_and_its_traceback_comes_with_v(demo: Path) -> None:
    body = "raise ValueError('x' * 100_000)"

    quiet = _failing(body, "scan", cwd=demo)
    verbose = _failing(body, "scan", "-v", cwd=demo)

    assert quiet.returncode == 2
    first, second = quiet.stderr.splitlines()
    assert first.startswith("selfcall-audit: internal error: ValueError: xxx") and len(first) < 400
    assert "more characters" in first and "Traceback" not in quiet.stderr
    assert second == "Please report it with the command you ran (add -v for the traceback)."
    assert verbose.returncode == 2 and "Traceback (most recent call last)" in verbose.stderr


_INTERRUPT_IN_A_STRING = """\
import sys


class _Interrupt:
    # Ctrl-C landing while a module defines a dataclass: inside code run from a string
    def find_spec(self, name, path=None, target=None):
        if name == "selfcall_audit.frontends.quick":
            sys.meta_path.remove(self)
            exec("raise KeyboardInterrupt")


sys.meta_path.insert(0, _Interrupt())
"""


def test_ctrl_c_while_a_module_defines_its_classes_exits_130(demo: Path, tmp_path: Path) -> None:
    """CPython kills a process with SIGINT at exit when a KeyboardInterrupt came from code run
    from a string, even once caught: the run still ends as any interrupted one."""
    (tmp_path / "sitecustomize.py").write_text(_INTERRUPT_IN_A_STRING)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}

    done = subprocess.run(
        [sys.executable, "-m", "selfcall_audit", "scan"], cwd=demo, env=env, capture_output=True, text=True
    )

    assert (done.returncode, done.stderr) == (130, "selfcall-audit: interrupted\n")


def test_ctrl_c_during_a_scan_exits_130_with_one_line(demo: Path, tmp_path: Path) -> None:
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    (bin_folder / "git").write_text("#!/bin/sh\nexec sleep 30\n")  # the scan waits for its listing
    (bin_folder / "git").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"}
    scan = [sys.executable, "-m", "selfcall_audit", "scan", "--no-cache"]
    status, err = interrupted(scan, signal.SIGINT, children, cwd=demo, env=env, timeout=60)  # once git runs

    assert (status, err) == (130, "selfcall-audit: interrupted\n")


# commands ------------------------------------------------------------------------------------


def test_python_dash_m_runs_the_command_line(demo: Path, command) -> None:
    done = command("--version", cwd=demo)

    assert done.returncode == 0 and done.stdout.startswith("selfcall-audit, version ")


def test_explain_all_explains_every_rule(demo: Path) -> None:
    done = run("explain", "--all", cwd=demo)

    assert done.exit_code == 0
    assert re.findall(r"^(SCA\d{3}) \(", done.stdout, re.M) == [
        "SCA001",
        "SCA002",
        "SCA003",
        "SCA004",
        "SCA900",
    ]
    assert run("explain", cwd=demo).exit_code == 2
    assert run("explain", "SCA001", "--all", cwd=demo).exit_code == 2


def test_agents_of_a_path_lists_its_agents_with_their_whole_project_counts(demo: Path) -> None:
    everything = json.loads(run("agents", "--format", "json", cwd=demo).stdout)["agents"]
    remote = json.loads(
        run("agents", "--format", "json", "responses_api_agents/remote_agent", cwd=demo).stdout
    )

    assert [row["agent"] for row in remote["agents"]] == ["RemoteAgent"]
    assert remote["agents"][0]["self_calls"] == 2
    assert [row for row in everything if row["agent"] == "RemoteAgent"] == remote["agents"]


def test_agents_concise_prints_one_whole_line_per_agent(demo: Path) -> None:
    done = run("agents", "--format", "concise", cwd=demo / "responses_api_agents")

    assert done.exit_code == 0
    lines = done.stdout.splitlines()
    assert len(lines) == 11
    assert "langchain_agent/plan_execute_agent.py:11: PlanExecuteAgent (GraphAgentAdapter)" in done.stdout
    assert (
        "remote_agent/app.py:21: RemoteAgent (SimpleResponsesAPIAgent) instances: remote_agent; self-calls: 2"
        in lines
    )


def test_help_of_a_command_fits_the_command(demo: Path) -> None:
    agents = run("agents", "--help", cwd=demo).stdout
    top = run("--help", cwd=demo).stdout

    assert "Examples:" in top and "Examples:" not in agents
    assert "findings only" not in " ".join(agents.split()).lower()
    assert "--exit-zero" in run("scan", "--help", cwd=demo).stdout


@pytest.mark.parametrize("args", [["scan"], ["scan", "--exit-zero"], ["agents"], ["fix", "--diff"]])
def test_a_run_from_a_deleted_folder_is_a_usage_error(tmp_path: Path, args: list[str]) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f'cd "{gone}" && rmdir "{gone}" && exec "$0" -m selfcall_audit "$@"'

    done = subprocess.run(
        ["sh", "-c", script, sys.executable, *args], capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 2, done.stderr
    assert done.stderr.endswith("Error: the current folder no longer exists; run from the project's folder\n")
    assert "internal error" not in done.stderr


def test_the_command_list_gives_each_command_a_whole_sentence(demo: Path) -> None:
    top = run("--help", cwd=demo).stdout
    listed = top.split("Commands:\n", 1)[1].split("\n\n", 1)[0].splitlines()

    assert [line.split()[0] for line in listed] == ["agents", "explain", "fix", "helper", "scan", "server"]
    for line in listed:  # click cuts a long first sentence, or one with "e.g.", to "..."
        assert line.endswith(".") and not line.endswith("..."), line


@pytest.mark.slow
def test_a_warm_run_gives_its_time_in_milliseconds(demo: Path) -> None:
    run("scan", cwd=demo)

    done = run("scan", "--format", "text", cwd=demo)

    summary = done.stdout.splitlines()[-1]
    assert re.search(r"\((\d+ ms|\d+\.\d\ds)\)\.$", summary), summary
    assert "(0.00s)" not in summary


def test_gitlab_ranks_every_code_by_the_registrys_severity(demo: Path) -> None:
    (demo / "nemo_gym" / "inprocess.py").write_bytes(helper_source("nemo_gym/inprocess.py") + b"EDITED = 1\n")

    done = run("scan", "--format", "gitlab", "--strict", cwd=demo)
    issues = json.loads(done.stdout)

    jsonschema.validate(issues, GITLAB_SCHEMA)
    severities = {i["check_name"]: i["severity"] for i in issues}
    assert severities["SCA004"] == "major"  # the registry's "error"
    assert {code: RULES[code].severity for code in severities} == {
        code: {"major": "error", "minor": "warning"}[severity] for code, severity in severities.items()
    }


@pytest.mark.slow
def test_a_stale_helper_finding_goes_through_every_format_and_the_baseline(demo: Path) -> None:
    (demo / "nemo_gym" / "inprocess.py").write_bytes(helper_source("nemo_gym/inprocess.py") + b"EDITED = 1\n")

    for output_format in ("text", "concise", "json", "sarif", "github", "gitlab", "junit"):
        done = run("scan", "--format", output_format, cwd=demo)
        assert done.exit_code == 1 and "SCA004" in done.stdout, (output_format, done.stderr)
    assert run("scan", "--write-baseline", "baseline.json", cwd=demo).exit_code == 0
    assert run("scan", "--baseline", "baseline.json", cwd=demo).exit_code == 0


def test_the_refresh_command_of_a_stale_helper_works_from_where_the_scan_ran(demo: Path) -> None:
    (demo / "nemo_gym" / "inprocess.py").write_bytes(helper_source("nemo_gym/inprocess.py") + b"EDITED = 1\n")
    agents = demo / "responses_api_agents"

    stale = run("scan", "--format", "concise", cwd=agents)
    (line,) = [line for line in stale.stdout.splitlines() if ": SCA004 " in line]

    assert line.startswith("../nemo_gym/inprocess.py:1:1: SCA004 ")
    assert line.endswith("`selfcall-audit helper --write ../nemo_gym/inprocess.py --force`")
    refreshed = run("helper", "--write", "../nemo_gym/inprocess.py", "--force", cwd=agents)
    assert refreshed.exit_code == 0, refreshed.stderr
    assert "SCA004" not in run("scan", "--format", "concise", cwd=agents).stdout

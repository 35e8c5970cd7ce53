"""The plain scans of pre-commit and CI run without click, and exactly as click would run them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from selfcall_audit.frontends import cli, commands, quick


def findings_and_errors(output: str) -> dict:
    """A JSON report without what differs from run to run (its time, how much the cache held)."""
    report = json.loads(output)
    del report["summary"]["seconds"], report["summary"]["files_parsed"]
    return report


def imported(stderr: str) -> set[str]:
    """The modules a run with `PYTHONPROFILEIMPORTTIME` set imported, from its report on stderr."""
    return {line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def loaded_click(stderr: str) -> bool:
    return "click" in imported(stderr)


@pytest.mark.parametrize(
    ("argv", "read"),
    [
        (["scan"], ((), None)),
        (["scan", "--format", "json"], ((), "json")),
        (["scan", "--format=github", "a.py", "b/c.py"], ((Path("a.py"), Path("b/c.py")), "github")),
        (["scan", "a.py", "--format", "sarif", "--format", "concise"], ((Path("a.py"),), "concise")),
    ],
)
def test_scan_arguments_reads_the_command_lines_of_the_hook_and_ci(argv: list[str], read: tuple) -> None:
    assert quick.scan_arguments(argv) == read


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["fix"],
        ["agents", "a.py"],
        ["scan", "--help"],
        ["scan", "-q"],
        ["scan", "--exit-zero"],
        ["scan", "--format"],
        ["scan", "--format", "xml"],
        ["scan", "--format=JSON"],
        ["scan", "-"],
        ["scan", "--", "a.py"],
        ["scan", "a.py", "--select", "SCA001"],
    ],
)
def test_any_other_command_line_is_left_to_click(argv: list[str]) -> None:
    assert quick.scan_arguments(argv) is None
    assert quick.quick_scan(argv, early=None) is None


@pytest.mark.parametrize(
    "argv",
    [["scan"], ["scan", "--format", "json"], ["scan", "responses_api_agents", "--format=concise"]],
)
def test_the_quick_path_runs_the_scan_click_would_run(demo: Path, monkeypatch, argv: list[str]) -> None:
    calls = []
    monkeypatch.chdir(demo)
    monkeypatch.setattr(commands, "scan", lambda common, options: calls.append((common, options)) or 0)

    assert quick.quick_scan(argv, early=None) == 0
    assert cli.main(argv) == 0

    assert len(calls) == 2
    (quick_common, quick_options), (click_common, click_options) = calls
    assert quick_common._replace(started=0) == click_common._replace(started=0)  # each run's own start
    assert quick_options == click_options


def test_a_plain_scan_does_not_load_click_and_reports_as_the_full_command_line(
    demo: Path, command, monkeypatch
) -> None:
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # each import on stderr, as `-X importtime`
    quick_run = command("scan", "--format", "json", cwd=demo)
    full_run = command("scan", "--format", "json", "--exit-zero", cwd=demo)

    assert quick_run.returncode == 1 and full_run.returncode == 0
    assert findings_and_errors(quick_run.stdout) == findings_and_errors(full_run.stdout)
    assert len(json.loads(quick_run.stdout)["findings"]) == 6
    assert not loaded_click(quick_run.stderr)
    assert loaded_click(full_run.stderr)


@pytest.mark.skipif(os.name == "nt", reason="a Windows console needs click's colour translation")
def test_coloured_results_are_written_without_click(demo: Path, command, monkeypatch) -> None:
    """Outside Windows no terminal needs its colours translated: the results are written as
    rendered, and a coloured scan (a terminal, FORCE_COLOR) loads click no more than a plain one."""
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # each import on stderr, as `-X importtime`
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    coloured = command("scan", cwd=demo)

    assert coloured.returncode == 1, coloured.stderr
    assert "\x1b[" in coloured.stdout and "SCA001" in coloured.stdout
    assert not loaded_click(coloured.stderr)


def test_no_scan_loads_dataclasses_nor_inspect(demo: Path, command, monkeypatch) -> None:
    """`dataclasses` loads `inspect` (and `dis`, `tokenize`, `linecache`), and a frozen dataclass
    takes ten times as long to define as a named tuple: no scan pays for them, whether it parses
    every agent (cold), nothing (warm, a file whose facts are reused) or an edited agent file."""
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # each import on stderr, as `-X importtime`
    cold = command("scan", "--format", "json", cwd=demo)  # the cache is written
    warm = command("scan", "--format", "json", "responses_api_agents/simple_agent/app.py", cwd=demo)
    other = demo / "nemo_gym" / "config_types.py"
    other.write_text(other.read_text() + "# a comment\n")
    reused = command("scan", "--format", "json", other, cwd=demo)  # its facts reused
    agent = demo / "responses_api_agents" / "simple_agent" / "app.py"
    agent.write_text("EDITED = True\n" + agent.read_text())
    edited = command("scan", "--format", "json", agent, cwd=demo)

    runs = (cold, warm, reused, edited)
    assert [run.returncode for run in runs] == [1, 1, 0, 1], [run.stderr for run in runs]
    parsed = [json.loads(run.stdout)["summary"]["files_parsed"] for run in runs]
    assert parsed[0] > 1 and parsed[1:3] == [0, 0] and parsed[3] >= 1
    for run in runs:
        assert "selfcall_audit.config" in imported(run.stderr)
        assert not {"dataclasses", "inspect"} & imported(run.stderr)


def test_a_scan_answered_from_the_cache_does_not_load_signal(demo: Path, command, monkeypatch) -> None:
    """`signal` makes enums of its constants as it loads, which cost every run half a millisecond:
    SIGTERM's handler is set through `_signal`, the module it wraps. (The worker processes of a
    cold scan load it with `multiprocessing`.)"""
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # each import on stderr, as `-X importtime`
    command("scan", "--format", "json", cwd=demo)  # the cache is written
    warm = command("scan", "--format", "json", cwd=demo)
    one_file = command("scan", "--format", "json", "responses_api_agents/simple_agent/app.py", cwd=demo)

    for run in (warm, one_file):
        assert run.returncode == 1, run.stderr
        assert json.loads(run.stdout)["summary"]["files_parsed"] == 0
        assert "signal" not in imported(run.stderr)


def test_a_usage_error_on_the_quick_path_is_said_as_click_says_it(demo: Path, command) -> None:
    quick_run = command("scan", "missing.py", cwd=demo)
    full_run = command("scan", "-q", "missing.py", cwd=demo)

    assert quick_run.returncode == full_run.returncode == 2
    assert quick_run.stderr == full_run.stderr
    assert quick_run.stderr.startswith("Usage: selfcall-audit scan [OPTIONS] [PATHS]...\n")
    assert quick_run.stderr.endswith("Error: path 'missing.py' does not exist\n")

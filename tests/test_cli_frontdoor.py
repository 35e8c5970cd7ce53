"""The command line where a ruff user expects it: option spellings, exclusion semantics, messages
of one line, and what a run says about paths it will not analyse."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_support import finding_lines
from fixture_annotations import NOT_COPIED

from selfcall_audit.frontends import commands

REPO = Path(__file__).resolve().parents[1]
SIMPLE = "responses_api_agents/simple_agent/app.py"
REMOTE = "responses_api_agents/remote_agent/app.py"


@pytest.fixture
def demo(tmp_path: Path, monkeypatch) -> Path:
    """A copy of the demo repository, as the current folder; its settings `extend-exclude` scripts/."""
    root = tmp_path / "demo"
    shutil.copytree(REPO / "fixtures" / "demo-gym", root, ignore=NOT_COPIED)
    (root / "scripts").mkdir()
    shutil.copy(root / SIMPLE, root / "scripts" / "copy_of_simple.py")  # a self-call, excluded
    monkeypatch.chdir(root)
    return root


def paths_of(stdout: str) -> set[str]:
    return {line.split(":", 1)[0] for line in stdout.splitlines()}


def test_exclude_replaces_the_settings_list_and_extend_exclude_adds(cli, demo: Path) -> None:
    (demo / "pyproject.toml").write_text(
        (demo / "pyproject.toml").read_text() + 'exclude = ["responses_api_agents/remote_agent/"]\n'
    )

    settings_only = paths_of(cli("scan", "--format", "concise", "--no-cache").stdout)
    replaced = paths_of(cli("scan", "--format", "concise", "--no-cache", "--exclude", "judge_agent/").stdout)
    extended = paths_of(
        cli("scan", "--format", "concise", "--no-cache", "--extend-exclude", "judge_agent/").stdout
    )

    judge = "responses_api_agents/judge_agent/app.py"
    assert REMOTE not in settings_only and judge in settings_only
    assert REMOTE in replaced and judge not in replaced  # the settings' `exclude` replaced...
    assert "scripts/copy_of_simple.py" not in replaced  # ...their `extend-exclude` kept, as ruff
    assert REMOTE not in extended and judge not in extended


def test_output_format_is_another_spelling_of_format(cli, demo: Path) -> None:
    spelled = cli("scan", "--output-format", "json", "--no-cache")
    short = cli("scan", "--format", "json", "--no-cache")

    assert spelled.exit_code == short.exit_code == 1
    assert json.loads(spelled.stdout)["findings"] == json.loads(short.stdout)["findings"] != []
    assert cli("agents", "--output-format", "json").exit_code == 0


def test_fix_as_a_scan_option_points_to_the_fix_command(cli, demo: Path) -> None:
    result = cli("scan", "--fix")

    assert result.exit_code == 2
    assert "no such option: --fix; to rewrite self-calls, run `selfcall-audit fix`" in result.stderr
    assert "--config" not in result.stderr


def test_a_settings_error_is_one_line_without_the_usage_banner(cli, command, demo: Path) -> None:
    (demo / "pyproject.toml").write_text("[tool.selfcall-audit]\nstrictt = true\n")

    for run in (lambda: cli("scan", "-q"), lambda: cli("fix", "--diff")):
        result = run()
        assert result.exit_code == 2
        (line,) = result.stderr.splitlines()
        assert line.startswith("selfcall-audit: error: ") and "unknown setting `strictt`" in line
    plain = command("scan", cwd=demo)  # the command line read without click (pre-commit's)
    assert plain.returncode == 2
    assert plain.stderr.startswith("selfcall-audit: error: ") and "Usage:" not in plain.stderr


def test_a_path_named_but_excluded_is_said_not_passed_in_silence(cli, demo: Path) -> None:
    test_file = "responses_api_agents/simple_agent/tests/test_app.py"

    excluded = cli("scan", "--format", "concise", "scripts/copy_of_simple.py", test_file)
    quiet = cli("scan", "--format", "concise", "-q", test_file)
    included = cli("scan", "--format", "concise", "--include-tests", test_file)

    assert excluded.exit_code == 0 and finding_lines(excluded.stdout) == []
    notes = excluded.stderr.splitlines()
    assert [n.split(" is excluded")[0] for n in notes] == [
        "selfcall-audit: note: scripts/copy_of_simple.py",
        f"selfcall-audit: note: {test_file}",
    ]
    assert quiet.stderr == ""
    assert "is excluded" not in included.stderr


def test_fix_takes_select_and_ignore(cli, demo: Path) -> None:
    ignored = cli("fix", "--diff", "--ignore", "SCA001")
    selected = cli("fix", "--diff", "--select", "SCA001")

    assert ignored.stdout == "" and "Nothing to rewrite" in ignored.stderr
    assert "SCA001 not rewritten" not in ignored.stderr
    assert f"+++ b/{SIMPLE}" in selected.stdout
    assert "SCA002" not in selected.stderr  # not selected: not listed as left to fix by hand
    assert cli("fix", "--select", "SCA01").exit_code == 2  # a typo would fix nothing, silently


def test_a_piped_run_ends_with_found_as_ruff_and_machine_formats_stay_clean(cli, demo: Path) -> None:
    piped = cli("scan", "--no-cache")  # stdout and stderr both captured: no terminal, as pipes
    quiet = cli("scan", "--no-cache", "-q")
    machine = cli("scan", "--no-cache", "--format", "json")

    *findings, count = piped.stdout.splitlines()
    assert piped.exit_code == 1 and len(findings) == 6
    assert count == "Found 6 self-calls in 32 files, 11 agents; 3 fixable with `selfcall-audit fix`."
    assert "Found" not in piped.stderr  # said once, on the output
    assert quiet.stdout.splitlines() == findings  # -q: the results alone
    assert json.loads(machine.stdout)["summary"]["findings"] == 6  # the whole of stdout is the JSON
    assert machine.stderr == ""


def test_results_not_shown_on_the_terminal_have_their_count_said_to_someone_watching(
    cli, demo: Path, monkeypatch
) -> None:
    monkeypatch.setattr(commands, "stderr_is_terminal", lambda: True)

    machine = cli("scan", "--format", "json")  # piped: stdout is no terminal
    to_file = cli("scan", "--format", "concise", "-o", "out/audit.txt")
    concise = cli("scan", "--format", "concise")
    quiet = cli("scan", "--format", "json", "-q")

    assert machine.stderr.startswith("Found 6 self-calls in ") and machine.stderr.endswith(").\n")
    assert to_file.stderr.startswith("Found 6 self-calls in ")
    assert (demo / "out/audit.txt").read_text().endswith("3 fixable with `selfcall-audit fix`.\n")
    assert concise.stderr == "" and concise.stdout.endswith("fix`.\n")  # on the output already
    assert quiet.stderr == ""


def test_explain_shows_the_import_fix_writes(cli) -> None:
    result = cli("explain", "SCA001")

    assert "    from nemo_gym.inprocess import responses_in_process" in result.stdout
    assert "selfcall_audit.inprocess" not in result.stdout

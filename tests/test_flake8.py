"""The flake8 plugin on small fake repos: flake8 run in-process through its `main(argv)` from the
repo, as the command line is; the real `flake8` command where only a process shows it (the plugin's
registration, flake8's worker processes, a buffer on stdin)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_sources import DUEL_AGENT, SELF_CALLING_AGENT, SOLO_CONFIG
from cli_support import Ran, finding_lines, run_flake8
from flake8.main.cli import main as flake8_main

from selfcall_audit.orchestration.project import Project

AGENT = (
    SELF_CALLING_AGENT
    + """\

    async def aggregate(self, body):
        return await self.server_client.post(server_name=self.config.name, url_path="/run", json=body)

    async def maybe(self, body):
        return await self.server_client.post(server_name=pick(), url_path="/v1/responses", json=body)
"""
)


ECHO = "responses_api_agents/echo/app.py"
DUEL = "responses_api_agents/duel_agent/app.py"


def make_repo(root: Path, files: dict[str, str]) -> Path:
    (root / "pyproject.toml").write_text('[project]\nname = "fake-gym"\nversion = "0"\n')
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def flake8(repo: Path, *args: str) -> Ran:
    """flake8 in-process from `repo`."""
    return run_flake8(list(args), repo)


def flake8_command(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real `flake8` command, from `repo`, with --isolated as above."""
    return subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", *args],
        cwd=repo,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def sca_lines(output: str) -> list[str]:
    return [line.removeprefix("./") for line in output.splitlines() if ": SCA" in line]


def codes_at(output: str) -> list[tuple[str, int, str]]:
    found = []
    for line in sca_lines(output):
        path, row, _col, rest = line.split(":", 3)
        found.append((path, int(row), rest.split()[0]))
    return found


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path,
        {
            ECHO: AGENT,
            DUEL: DUEL_AGENT,
            "responses_api_agents/duel_agent/configs/solo.yaml": SOLO_CONFIG,
            "tests/test_echo.py": AGENT,  # test code: excluded, as by `selfcall-audit scan`
        },
    )


def test_plugin_is_registered_with_flake8(repo: Path) -> None:
    result = flake8_command(repo, "--version")
    assert "selfcall-audit" in result.stdout


@pytest.mark.slow
def test_flake8_reports_what_scan_reports_at_the_same_positions(repo: Path) -> None:
    scan = subprocess.run(
        [
            sys.executable,
            "-m",
            "selfcall_audit",
            "scan",
            "--format",
            "concise",
            "--no-cache",
            ".",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
    )
    expected = sorted(finding_lines(scan.stdout))
    assert len(expected) == 3  # SCA001 + SCA002 in echo, SCA001 in duel (bound by the YAML)

    serial = flake8(repo, "--select", "SCA001,SCA002", ".")
    parallel = flake8_command(repo, "--select", "SCA001,SCA002", "--jobs", "2", ".")

    assert serial.exit_code == 1
    assert sorted(sca_lines(serial.stdout)) == expected
    assert sorted(sca_lines(parallel.stdout)) == expected


def test_one_file_is_checked_against_the_whole_project(repo: Path) -> None:
    result = flake8(repo, "--select", "SCA", DUEL)

    assert codes_at(result.stdout) == [(DUEL, 6, "SCA001")]
    assert "routes `peer` back to itself" in result.stdout


def test_test_code_is_excluded_as_in_scan(repo: Path) -> None:
    result = flake8(repo, "--select", "SCA", "tests/test_echo.py")

    assert result.exit_code == 0, result.stdout


@pytest.mark.slow
def test_possible_self_calls_are_off_unless_selected(repo: Path) -> None:
    default = codes_at(flake8(repo, ECHO).stdout)
    # Setting `ignore` drops flake8's default-ignore list: SCA003 must still stay off.
    with_ignore = codes_at(flake8(repo, "--ignore", "E501,W", ECHO).stdout)
    selected = codes_at(flake8(repo, "--extend-select", "SCA003", ECHO).stdout)

    assert [code for _, _, code in default] == ["SCA001", "SCA002"]
    assert [code for _, _, code in with_ignore] == ["SCA001", "SCA002"]
    assert [code for _, _, code in selected] == ["SCA001", "SCA002", "SCA003"]
    assert (ECHO, 17, "SCA003") in selected


@pytest.mark.slow
def test_select_and_ignore_apply_to_sca_codes(repo: Path) -> None:
    only_other_routes = codes_at(flake8(repo, "--select", "SCA002", ECHO).stdout)
    ignored = codes_at(flake8(repo, "--extend-ignore", "SCA001", ECHO).stdout)

    assert only_other_routes == [(ECHO, 14, "SCA002")]
    assert ignored == [(ECHO, 14, "SCA002")]


@pytest.mark.slow
def test_extend_ignore_s_meant_for_bandit_also_silences_sca(repo: Path) -> None:
    # Documented pitfall: flake8 matches codes by prefix, and `S` covers `SCA`.
    assert sca_lines(flake8(repo, "--extend-ignore", "S", ECHO).stdout) == []
    numbered = codes_at(flake8(repo, "--extend-ignore", "S1,S2,S3,S4,S5,S6,S7", ECHO).stdout)
    assert [code for _, _, code in numbered] == ["SCA001", "SCA002"]


def test_per_file_ignores(repo: Path) -> None:
    result = flake8(repo, "--select", "SCA001,SCA002", f"--per-file-ignores={ECHO}:SCA001", ".")

    assert codes_at(result.stdout) == [(DUEL, 6, "SCA001"), (ECHO, 14, "SCA002")]


@pytest.mark.parametrize(
    ("comment_line", "comment", "reported"),
    [
        (6, "  # noqa", False),  # flake8's own noqa, on the reported line
        (6, "  # noqa: SCA001", False),
        (10, "  # noqa: SCA001", False),  # the closing line of the call: the analysis' noqa
        (8, "  # noqa:SCA001", False),  # a middle line, no space after the colon
        (6, "  # noqa: E501", True),  # another code does not hide it
        (6, "  # noqa: SCA002", True),
    ],
)
def test_noqa_on_any_line_of_the_call(
    tmp_path: Path, comment_line: int, comment: str, reported: bool
) -> None:
    lines = AGENT.splitlines()
    lines[comment_line - 1] += comment
    repo = make_repo(tmp_path, {ECHO: "\n".join(lines) + "\n"})

    result = flake8(repo, "--select", "SCA001", ECHO)

    assert ((ECHO, 6, "SCA001") in codes_at(result.stdout)) is reported


def test_a_file_the_analysis_skips_is_reported_as_sca900(repo: Path) -> None:
    with (repo / "pyproject.toml").open("a") as pyproject:
        pyproject.write("\n[tool.selfcall-audit]\nmax-file-size = 100\n")

    result = flake8(repo, ECHO)

    assert sca_lines(result.stdout) == [
        f"{ECHO}:1:1: SCA900 skipped: {len(AGENT):,} bytes is over the max-file-size limit of 100"
    ]


def test_no_cache_is_written_beside_a_file_that_is_in_no_project(no_project: Path) -> None:
    (no_project / ECHO).parent.mkdir(parents=True)
    (no_project / ECHO).write_text(AGENT)

    result = flake8(no_project, "--select", "SCA001", ECHO)

    assert codes_at(result.stdout) == [(ECHO, 6, "SCA001")]
    assert list(no_project.rglob(".selfcall_audit_cache")) == [], "no cache where there is no project"


@pytest.mark.slow
def test_an_editor_buffer_on_stdin_is_analysed_instead_of_the_file(repo: Path) -> None:
    buffer = "# two lines added\n# and not saved yet\n" + AGENT

    result = flake8_command(repo, "--select", "SCA", "--stdin-display-name", ECHO, "-", stdin=buffer)
    unchanged = flake8_command(repo, "--select", "SCA", "--stdin-display-name", ECHO, "-", stdin=AGENT)
    on_disk = flake8_command(repo, "--select", "SCA", ECHO)  # the buffer left nothing behind in the cache

    assert codes_at(result.stdout) == [(ECHO, 8, "SCA001"), (ECHO, 16, "SCA002"), (ECHO, 19, "SCA003")]
    assert codes_at(unchanged.stdout) == [(ECHO, 6, "SCA001"), (ECHO, 14, "SCA002"), (ECHO, 17, "SCA003")]
    assert codes_at(on_disk.stdout) == codes_at(unchanged.stdout)


def test_the_project_is_analysed_once_per_flake8_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """flake8 in-process with two forked workers: every analysis, in whichever process, is logged."""
    agents = {
        f"responses_api_agents/echo_{n}/app.py": AGENT.replace("EchoAgent", f"Echo{n}Agent") for n in range(6)
    }
    plain = {f"pkg/module_{n}.py": f"VALUE = {n}\n" for n in range(30)}  # nothing to say: a look-up
    (tmp_path / "repo").mkdir()
    repo = make_repo(tmp_path / "repo", {**agents, **plain})
    log = tmp_path / "analyses.log"
    analyze = Project.analyze

    def logged(self: Project, *args, **kwargs):
        with log.open("a") as out:
            out.write(f"{os.getpid()}\n")
        return analyze(self, *args, **kwargs)

    monkeypatch.setattr(Project, "analyze", logged)
    monkeypatch.chdir(repo)

    code = flake8_main(["--isolated", "--select", "SCA001", "--jobs", "2", "."])

    assert code == 1
    assert log.read_text() == f"{os.getpid()}\n"  # once, in flake8's own process, before the fork


@pytest.mark.slow
def test_many_files_in_flake8s_parallel_workers(tmp_path: Path) -> None:
    """flake8 checks files in daemonic worker processes, which may not start processes of their
    own: a project with enough agents to parse in parallel must still be analysed there."""
    agents = {
        f"responses_api_agents/echo_{n}/app.py": AGENT.replace("EchoAgent", f"Echo{n}Agent")
        for n in range(40)
    }
    repo = make_repo(tmp_path, agents)

    result = flake8_command(repo, "--select", "SCA001", "--jobs", "2", ".")

    assert "Traceback" not in result.stderr, result.stderr
    assert sorted(codes_at(result.stdout)) == sorted((path, 6, "SCA001") for path in agents)


@pytest.mark.parametrize("option", ["--select", "--extend-select", "--extend-ignore"])
def test_an_unknown_code_of_ours_stops_flake8_naming_the_known_ones(tmp_path: Path, option: str) -> None:
    repo = make_repo(tmp_path, {"app.py": "x = 1\n"})

    done = flake8(repo, f"{option}=SCA01", ".")

    assert done.exit_code == 1
    assert f"unknown rule code or prefix 'SCA01' in {option}" in done.stdout + done.stderr
    assert "SCA001, SCA002, SCA003, SCA004, SCA900" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_mistake_in_the_settings_stops_flake8_with_its_message(repo: Path, jobs: str) -> None:
    with (repo / "pyproject.toml").open("a") as pyproject:
        pyproject.write('\n[tool.selfcall-audit]\nmax-file-size = "big"\n')

    done = flake8_command(repo, f"--jobs={jobs}", "--select", "SCA", ECHO, DUEL)  # workers: a process

    assert done.returncode == 1
    assert "pyproject.toml: `max-file-size` must be a non-negative integer, not 'big'" in done.stdout
    assert "Traceback" not in done.stderr


def test_possible_self_calls_selected_in_flake8_do_not_outrank_the_settings_ignore(repo: Path) -> None:
    with (repo / "pyproject.toml").open("a") as pyproject:
        pyproject.write('\n[tool.selfcall-audit]\nignore = ["SCA00"]\n')

    done = flake8(repo, "--select", "SCA", ECHO)

    # the settings turn off the rules on by default; flake8's selection adds SCA003 on top
    assert codes_at(done.stdout) == [(ECHO, 17, "SCA003")]

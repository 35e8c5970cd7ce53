"""A monorepo as users run the tool in it: a git repository with its own pyproject.toml and a NeMo
Gym-style project in `gym/` with its own pyproject.toml and settings. Every file is governed by its
nearest config file, as ruff's are: each project analysed with its own root and settings, the
findings of all in one report."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import finding_lines
from fixture_annotations import NOT_COPIED

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"

OUTER_AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class OuterAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)

    async def again(self, body):
        await self.server_client.post(server_name=self.config.name, url_path="/run", json=body)
"""
OUTER_SETTINGS = '[project]\nname = "mono"\n\n[tool.selfcall-audit]\nignore = ["SCA002"]\n'
# gym/ leaves out one agent folder; judge_agent's self-call shows only when its YAML's
# `config_paths` is resolved from gym/, the Gym root.
GYM_SETTINGS = 'extend-exclude = ["scripts/", "responses_api_agents/langchain_agent/"]'

OUTER = "services/outer/app.py"
GYM_FINDINGS = [  # gym/'s own settings: SCA002 reported, langchain_agent left out
    ("SCA001", "gym/responses_api_agents/judge_agent/app.py", 27),
    ("SCA001", "gym/responses_api_agents/proof_refinement_agent/app.py", 36),
    ("SCA001", "gym/responses_api_agents/remote_agent/app.py", 35),
    ("SCA002", "gym/responses_api_agents/remote_agent/app.py", 48),
    ("SCA001", "gym/responses_api_agents/simple_agent/app.py", 62),
]
OUTER_FINDINGS = [("SCA001", OUTER, 6)]  # the outer settings ignore its SCA002 at line 9


def run(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return subprocess.run(
        [sys.executable, "-m", *(str(a) for a in args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        timeout=120,
    )


def scan(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    return run("selfcall_audit", "scan", *args, cwd=cwd)


def found(concise: str, counted: bool = True) -> list[tuple[str, str, int]]:
    """(code, path, line) of each `path:line:col: CODE message` line (before the closing count
    of our own report; flake8's has none)."""
    rows = []
    for line in finding_lines(concise) if counted else concise.splitlines():
        where, _, message = line.partition(": ")
        path, row, _ = where.rsplit(":", 2)
        rows.append((message.split()[0], path.removeprefix("./"), int(row)))
    return sorted(rows)


def make_monorepo(root: Path, gym_table: bool = True) -> Path:
    shutil.copytree(FIXTURES / "demo-gym", root / "gym", ignore=NOT_COPIED)
    gym_pyproject = root / "gym" / "pyproject.toml"
    text = gym_pyproject.read_text()
    if gym_table:
        gym_pyproject.write_text(text.replace('extend-exclude = ["scripts/"]', GYM_SETTINGS))
    else:  # NeMo Gym's own pyproject.toml: no table of ours
        gym_pyproject.write_text(text[: text.index("[tool.selfcall-audit]")])
    (root / "pyproject.toml").write_text(OUTER_SETTINGS)
    (root / OUTER).parent.mkdir(parents=True)
    (root / OUTER).write_text(OUTER_AGENT)
    fixture = root / "tests" / "fixtures" / "project"  # a test fixture shaped like a project
    (fixture / "agents").mkdir(parents=True)
    (fixture / "pyproject.toml").write_text("[tool.selfcall-audit]\n")
    (fixture / "agents" / "app.py").write_text(OUTER_AGENT)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def monorepo(tmp_path: Path) -> Path:
    return make_monorepo(tmp_path / "mono")


@pytest.mark.slow
def test_a_scan_from_the_git_top_applies_each_project_s_settings_to_its_own_files(monorepo: Path) -> None:
    done = scan(cwd=monorepo)

    assert done.returncode == 1, done.stderr
    assert found(done.stdout) == sorted(GYM_FINDINGS + OUTER_FINDINGS)
    assert "SCA900" not in done.stdout  # judge_agent's config_paths found from gym/
    assert "tests/" not in done.stdout  # test code, even with a pyproject.toml of its own


@pytest.mark.slow
def test_ci_formats_name_every_project_s_files_from_the_repository_top(monorepo: Path) -> None:
    sarif = json.loads(scan("--format", "sarif", cwd=monorepo / "services").stdout)
    github = scan("--format", "github", cwd=monorepo / "gym").stdout
    document = json.loads(scan("--format", "json", monorepo, cwd=monorepo.parent).stdout)

    results = sarif["runs"][0]["results"]
    located = sorted(
        (
            r["ruleId"],
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
        )
        for r in results
    )
    assert sarif["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == monorepo.resolve().as_uri() + "/"
    assert located == sorted(GYM_FINDINGS + OUTER_FINDINGS)
    # inside gym/ only gym/ is scanned, still named from the repository top
    assert sorted(
        (
            line.split("title=")[1][:6],
            line.split("file=")[1].split(",")[0],
            int(line.split("line=")[1].split(",")[0]),
        )
        for line in github.splitlines()
    ) == sorted(GYM_FINDINGS)
    # JSON: paths relative to its `root`, the project the scan started in
    assert document["root"] == str(monorepo.resolve())
    assert sorted((f["code"], f["path"], f["line"]) for f in document["findings"]) == sorted(
        GYM_FINDINGS + OUTER_FINDINGS
    )
    assert document["summary"]["findings"] == len(GYM_FINDINGS + OUTER_FINDINGS)


@pytest.mark.slow
def test_files_of_both_projects_as_pre_commit_passes_them(monorepo: Path) -> None:
    changed = [
        OUTER,
        "gym/responses_api_agents/remote_agent/app.py",
        "gym/responses_api_agents/langchain_agent/app.py",  # excluded by gym/'s settings
    ]

    done = scan(*changed, cwd=monorepo)

    assert done.returncode == 1, done.stderr
    assert found(done.stdout) == sorted(
        [*OUTER_FINDINGS, *(f for f in GYM_FINDINGS if "remote_agent" in f[1])]
    )


@pytest.mark.slow
def test_command_line_options_apply_to_every_project(monorepo: Path) -> None:
    selected = scan("--select", "SCA002", "--exclude", "proof_refinement_agent/", cwd=monorepo)
    one_config = monorepo / "ci.toml"
    one_config.write_text('select = ["SCA001"]\n')
    configured = scan("--config", one_config, cwd=monorepo)

    # --select replaces each project's selection; the outer project still ignores SCA002
    assert found(selected.stdout) == [("SCA002", "gym/responses_api_agents/remote_agent/app.py", 48)]
    # --config: that file's settings for every file, as ruff's --config (gym/'s exclude is not read)
    assert ("SCA001", "gym/responses_api_agents/langchain_agent/app.py", 34) in found(configured.stdout)
    assert not any(code == "SCA002" for code, _, _ in found(configured.stdout))


@pytest.mark.slow
def test_each_project_keeps_its_cache_inside_its_own_root(monorepo: Path) -> None:
    gym_pyproject = monorepo / "gym" / "pyproject.toml"
    gym_pyproject.write_text(gym_pyproject.read_text() + 'cache-dir = ".cache/audit"\n')

    cold = scan(cwd=monorepo)
    warm = scan(cwd=monorepo)

    assert (monorepo / "gym" / ".cache" / "audit").is_dir()
    assert (monorepo / ".selfcall_audit_cache").is_dir()
    assert not (monorepo / ".cache").exists() and not (monorepo / "gym" / ".selfcall_audit_cache").exists()
    assert found(cold.stdout) == found(warm.stdout) == sorted(GYM_FINDINGS + OUTER_FINDINGS)


@pytest.mark.slow
def test_agents_lists_each_project_s_agents_under_its_settings(monorepo: Path) -> None:
    done = run("selfcall_audit", "agents", "--format", "json", cwd=monorepo)

    document = json.loads(done.stdout)
    calls = {row["agent"]: (row["path"], row["self_calls"]) for row in document["agents"]}
    assert document["root"] == str(monorepo.resolve())
    assert calls["OuterAgent"] == (OUTER, 1)
    assert calls["RemoteAgent"] == (
        "gym/responses_api_agents/remote_agent/app.py",
        2,
    )  # SCA002 counts in gym/
    assert "GraphAgentAdapter" not in calls  # langchain_agent/ is excluded in gym/


@pytest.mark.slow
def test_fix_rewrites_each_project_under_its_settings_with_its_own_helper(monorepo: Path) -> None:
    langchain = monorepo / "gym" / "responses_api_agents" / "langchain_agent" / "app.py"
    before = langchain.read_bytes()

    diff = run("selfcall_audit", "fix", "--diff", cwd=monorepo)
    done = run("selfcall_audit", "fix", cwd=monorepo)
    after = scan(cwd=monorepo)

    # one patch for both projects, its files named from the outer root as `git apply` wants them
    # with each project's helper as a new file, the app recorded where gym/ builds it, and the test updated
    assert [line for line in diff.stdout.splitlines() if line.startswith("+++ ")] == [
        f"+++ b/{OUTER}",
        "+++ b/services/outer/inprocess.py",
        "+++ b/gym/nemo_gym/base_responses_api_agent.py",
        "+++ b/gym/nemo_gym/inprocess.py",
        "+++ b/gym/responses_api_agents/proof_refinement_agent/app.py",
        "+++ b/gym/responses_api_agents/simple_agent/app.py",
        "+++ b/gym/responses_api_agents/simple_agent/tests/test_app.py",
    ]
    assert done.returncode == 1, done.stderr  # some calls are left to fix by hand
    assert (monorepo / "gym" / "nemo_gym" / "inprocess.py").is_file()  # gym/'s helper, in gym/
    assert (
        "from nemo_gym.inprocess import responses_in_process"
        in (monorepo / "gym" / "responses_api_agents" / "simple_agent" / "app.py").read_text()
    )
    assert (
        monorepo / "services" / "outer" / "inprocess.py"
    ).is_file()  # the outer project's, beside its agent
    assert "gym/responses_api_agents/proof_refinement_agent/app.py:37: rewrote self-call" in done.stdout
    rewritten = (monorepo / "gym" / "responses_api_agents" / "proof_refinement_agent" / "app.py").read_text()
    assert "responses_in_process(" in rewritten.splitlines()[37 - 1]  # where the call now is
    assert langchain.read_bytes() == before  # excluded by gym/'s settings: untouched
    left = [f for f in GYM_FINDINGS if "judge_agent" in f[1] or "remote_agent" in f[1]]  # not fixable
    assert found(after.stdout) == left


@pytest.mark.slow
def test_fix_names_the_project_each_summary_is_about(monorepo: Path) -> None:
    done = run("selfcall_audit", "fix", "--check", cwd=monorepo)

    summaries = [line for line in done.stdout.splitlines() if "to fix by hand" in line]
    # unnamed, the outer project's "none left" would contradict gym/'s calls listed beside it
    assert summaries == [
        "./: Would rewrite 1 self-call in 1 file; none left to fix by hand.",
        "gym/: Would rewrite 2 self-calls in 2 files; 3 self-calls to fix by hand.",
    ]


@pytest.mark.slow
def test_flake8_from_the_git_top_reports_each_file_under_its_project_s_settings(tmp_path: Path) -> None:
    """With gym/'s table, gym/ is its own project; without one (NeMo Gym's own pyproject.toml is
    not a config file), its files are the outer project's, under the outer settings. flake8 checks
    every file it is given, the test fixture too: under its own config, as a scan of it reports."""
    for gym_table in (True, False):
        root = make_monorepo(tmp_path / f"mono-{gym_table}", gym_table=gym_table)

        flake8 = run("flake8", "--select", "SCA", ".", cwd=root)
        scanned = scan(cwd=root)
        fixture = scan("tests/fixtures/project", cwd=root)

        assert flake8.returncode == 1, flake8.stderr
        assert found(flake8.stdout, counted=False) == sorted(found(scanned.stdout) + found(fixture.stdout))
        gym_sca002 = ("SCA002", "gym/responses_api_agents/remote_agent/app.py", 48)
        assert (
            gym_sca002 in found(flake8.stdout, counted=False)
        ) is gym_table  # the outer settings ignore SCA002


def test_a_nested_pyproject_without_the_table_leaves_its_folder_in_the_enclosing_project(
    cli, tmp_path: Path
) -> None:
    root = make_monorepo(tmp_path / "mono", gym_table=False)

    whole = json.loads(cli("scan", "--format", "json", cwd=root).stdout)
    inside = json.loads(cli("scan", "--format", "json", "gym", cwd=root).stdout)

    for document in (whole, inside):  # the same root and settings from the top or for gym/ alone
        assert document["root"] == str(root.resolve())
        codes = {(f["code"], f["path"]) for f in document["findings"]}
        assert ("SCA002", "gym/responses_api_agents/remote_agent/app.py") not in codes
        assert ("SCA001", "gym/responses_api_agents/langchain_agent/app.py") in codes
    assert not (root / "gym" / ".selfcall_audit_cache").exists()


def test_assert_no_self_calls_at_the_git_top_checks_each_project_under_its_settings(monorepo: Path) -> None:
    from selfcall_audit.testing import assert_no_self_calls

    allowed = [OUTER, *(path for _, path, _ in GYM_FINDINGS)]
    report = assert_no_self_calls(monorepo, allow=allowed)  # nothing else: langchain_agent is excluded

    assert sorted((f.code, f.path, f.line) for f in report.findings) == sorted(GYM_FINDINGS + OUTER_FINDINGS)
    with pytest.raises(AssertionError, match=re.escape("remote_agent/app.py:48:15: SCA002")):
        assert_no_self_calls(monorepo, allow=[OUTER])


@pytest.mark.parametrize(
    ("setting", "mistake"),
    [
        ('cache-dir = "../outside"', "`cache-dir` must be a folder inside the project root"),
        ('max-file-size = "big"', "`max-file-size` must be a non-negative integer, not 'big'"),
        ("extend-select = 3", "`extend-select` must be a list of strings, not 3"),
    ],
)
def test_a_mistake_in_a_nested_project_s_settings_names_its_file(
    cli, monorepo: Path, setting: str, mistake: str
) -> None:
    gym_pyproject = monorepo / "gym" / "pyproject.toml"
    gym_pyproject.write_text(gym_pyproject.read_text() + setting + "\n")

    done = cli("scan", cwd=monorepo)

    assert done.exit_code == 2
    assert f"gym/pyproject.toml: {mistake}" in done.stderr
    assert not (monorepo / "outside").exists()


@pytest.mark.slow
def test_fix_places_every_project_s_helper_before_it_writes_any_file(monorepo: Path) -> None:
    own_module = monorepo / "gym" / "nemo_gym" / "inprocess.py"  # gym/'s own module of that name
    own_module.parent.mkdir(exist_ok=True)
    own_module.write_text("# not the vendored helper\n")
    outer_before = (monorepo / OUTER).read_bytes()

    done = run("selfcall_audit", "fix", cwd=monorepo)

    assert done.returncode == 2
    assert "nemo_gym/inprocess.py exists and is not the vendored helper" in done.stderr
    assert (monorepo / OUTER).read_bytes() == outer_before  # the outer project, planned first, is untouched
    assert not (monorepo / OUTER).with_name("inprocess.py").exists()
    assert "rewrote" not in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("obstacle", ["a folder linked outside", "a file in the way"])
def test_a_helper_place_that_cannot_be_written_stops_the_run_before_any_file(
    obstacle: str, monorepo: Path, tmp_path: Path
) -> None:
    gym = monorepo / "gym"
    if obstacle == "a folder linked outside":
        outside = tmp_path / "outside"
        shutil.move(gym / "nemo_gym", outside)
        (gym / "nemo_gym").symlink_to(outside, target_is_directory=True)
        expected = "nemo_gym/inprocess.py resolves outside the project root"
    else:
        (gym / "shared").mkdir()
        (gym / "shared" / "sub").write_text("")
        with (gym / "pyproject.toml").open("a") as settings:
            settings.write('helper = "shared.sub.inprocess:responses_in_process"\n')
        expected = "shared/sub/inprocess.py cannot be written: shared/sub is not a folder"
    outer_before = (monorepo / OUTER).read_bytes()

    done = run("selfcall_audit", "fix", cwd=monorepo)

    assert done.returncode == 2
    assert expected in done.stderr
    assert (monorepo / OUTER).read_bytes() == outer_before
    assert not (monorepo / OUTER).with_name("inprocess.py").exists()
    assert "rewrote" not in done.stdout
    if obstacle == "a folder linked outside":
        assert not (tmp_path / "outside" / "inprocess.py").exists()

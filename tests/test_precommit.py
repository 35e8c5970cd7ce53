"""The pre-commit hooks, run by the real `pre-commit` in temporary git repositories.

The hooks are taken from a commit of this working tree made in a temporary folder, so the test
checks the code as it is here rather than what happens to be committed; pre-commit builds the
hooks' environment once for the whole module (one PRE_COMMIT_HOME, one repo and revision).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from agent_sources import DUEL_AGENT, DUEL_CONFIG, SELF_CALLING_AGENT, SOLO_CONFIG

PACKAGE_ROOT = Path(__file__).resolve().parent.parent

CLEAN_AGENT = SELF_CALLING_AGENT.replace("self.config.name", "self.config.model_server.name")

ECHO = "responses_api_agents/echo/app.py"
DUEL = "responses_api_agents/duel_agent/app.py"
SOLO = "responses_api_agents/duel_agent/configs/solo.yaml"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("pre-commit-home")
    (home / "gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    return {
        **os.environ,
        "PRE_COMMIT_HOME": str(home),
        "GIT_CONFIG_GLOBAL": str(home / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
    }


@dataclass
class Hooks:
    """The hooks under test: a commit of this working tree's package and hook manifest."""

    path: str
    rev: str
    env: dict[str, str]

    def config(self, hook: str, **options: str) -> str:
        lines = ["repos:", f"- repo: {self.path}", f"  rev: {self.rev}", "  hooks:", f"  - id: {hook}"]
        lines += [f"    {key}: {value}" for key, value in options.items()]
        return "\n".join(lines) + "\n"

    def run(self, repo: Path, hook: str, *args: str, **options: str) -> subprocess.CompletedProcess[str]:
        """`pre-commit run` with a config naming the hook: every test shares the store, so the
        hook's environment is built once (try-repo builds one of its own each time)."""
        config = repo.parent / f"{repo.name}-pre-commit-config.yaml"
        config.write_text(self.config(hook, **options))
        command = [sys.executable, "-m", "pre_commit", "run", "--config", str(config), "--color", "never"]
        return subprocess.run(
            [*command, *args], cwd=repo, env=self.env, capture_output=True, text=True, timeout=300
        )

    def try_repo(self, repo: Path, hook: str, *args: str) -> subprocess.Popen[str]:
        command = [sys.executable, "-m", "pre_commit", "try-repo", self.path, hook, "--ref", self.rev, *args]
        return subprocess.Popen(
            [*command, "--color", "never"],
            cwd=repo,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Hooks:
    repo = tmp_path_factory.mktemp("hook-repo")
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy2(PACKAGE_ROOT / name, repo / name)
    shutil.copytree(
        PACKAGE_ROOT / "selfcall_audit", repo / "selfcall_audit", ignore=shutil.ignore_patterns("__pycache__")
    )
    for args in (("init", "-q"), ("add", "-A"), ("commit", "-q", "-m", "hooks under test")):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    return Hooks(str(repo), git(repo, "rev-parse", "HEAD").strip(), env)


def make_repo(root: Path, env: dict[str, str], files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "fake-gym"\nversion = "0"\n')
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for args in (("init", "-q"), ("add", "-A"), ("commit", "-q", "-m", "start")):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    return root


@pytest.mark.slow
def test_try_repo_fails_on_a_self_call_and_passes_a_clean_file(
    tmp_path: Path, hooks: Hooks, env: dict[str, str]
) -> None:
    repo = make_repo(
        tmp_path, env, {ECHO: SELF_CALLING_AGENT, "responses_api_agents/other/app.py": CLEAN_AGENT}
    )

    # Each try-repo builds the hook's environment in a store of its own: run both side by side.
    all_files = hooks.try_repo(repo, "selfcall-audit", "--all-files")
    one_file = hooks.try_repo(repo, "selfcall-audit", "--files", "responses_api_agents/other/app.py")
    failed, _ = all_files.communicate(timeout=300)
    passed, _ = one_file.communicate(timeout=300)

    assert all_files.returncode == 1, failed
    assert f"{ECHO}:6:26: SCA001 EchoAgent.run posts to its own /v1/responses" in failed
    assert one_file.returncode == 0, passed
    assert "Passed" in passed


@pytest.mark.slow
def test_scan_hook_passes_a_clean_tree(tmp_path: Path, hooks: Hooks, env: dict[str, str]) -> None:
    repo = make_repo(tmp_path / "clean", env, {ECHO: CLEAN_AGENT})

    result = hooks.run(repo, "selfcall-audit", "--all-files")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "Passed" in result.stdout


@pytest.mark.slow
def test_a_changed_yaml_alone_is_checked_against_the_whole_project(
    tmp_path: Path, hooks: Hooks, env: dict[str, str]
) -> None:
    versus = DUEL_CONFIG.format(name="duel_red", peer="duel_blue") + DUEL_CONFIG.format(
        name="duel_blue", peer="duel_red"
    )
    repo = make_repo(
        tmp_path / "repo",
        env,
        {
            DUEL: DUEL_AGENT,
            "responses_api_agents/duel_agent/configs/versus.yaml": versus,
            "notes.py": "X = 1\n",
        },
    )
    before = hooks.run(repo, "selfcall-audit", "--all-files")
    # The commit adds only a config, in which the agent's `peer` is the instance itself.
    (repo / SOLO).write_text(SOLO_CONFIG)
    git(repo, "add", SOLO)

    staged = hooks.run(repo, "selfcall-audit")  # what `git commit` runs: the staged files
    only_the_yaml = hooks.run(repo, "selfcall-audit", "--files", SOLO)
    unrelated_file = hooks.run(repo, "selfcall-audit", "--files", "notes.py")

    assert before.returncode == 0, before.stdout + before.stderr
    for result in (staged, only_the_yaml):
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"{DUEL}:6:23: SCA001 DuelAgent.run posts to its own /v1/responses" in result.stdout
        assert f"instance `duel_solo` routes `peer` back to itself in {SOLO}" in result.stdout
    # pre-commit reports on what changed: a file that neither holds nor binds a self-call passes.
    assert unrelated_file.returncode == 0, unrelated_file.stdout + unrelated_file.stderr


@pytest.mark.slow
def test_without_file_names_the_hook_scans_the_whole_project(
    tmp_path: Path, hooks: Hooks, env: dict[str, str]
) -> None:
    repo = make_repo(tmp_path / "repo", env, {ECHO: SELF_CALLING_AGENT, "CHANGES.md": "start\n"})
    (repo / "CHANGES.md").write_text("a change that is neither Python nor YAML\n")
    git(repo, "add", "CHANGES.md")

    skipped = hooks.run(repo, "selfcall-audit")
    whole = hooks.run(repo, "selfcall-audit", pass_filenames="false", always_run="true")

    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert "(no files to check)Skipped" in skipped.stdout
    assert whole.returncode == 1, whole.stdout + whole.stderr
    assert f"{ECHO}:6:26: SCA001" in whole.stdout


@pytest.mark.slow
def test_fix_hook_rewrites_the_self_call(tmp_path: Path, hooks: Hooks, env: dict[str, str]) -> None:
    repo = make_repo(tmp_path / "repo", env, {ECHO: SELF_CALLING_AGENT})

    fixed = hooks.run(repo, "selfcall-audit-fix", "--all-files")
    rewritten = (repo / ECHO).read_text()
    rescan = hooks.run(repo, "selfcall-audit", "--all-files")

    assert fixed.returncode == 1, fixed.stdout + fixed.stderr  # pre-commit fails a hook that changed files
    assert "files were modified by this hook" in fixed.stdout
    assert "from responses_api_agents.echo.inprocess import responses_in_process" in rewritten  # vendored
    assert (repo / "responses_api_agents/echo/inprocess.py").is_file()
    assert "await responses_in_process(\n            self," in rewritten
    assert "self.server_client.post" not in rewritten
    assert rescan.returncode == 0, rescan.stdout + rescan.stderr


@pytest.mark.slow
def test_in_a_monorepo_each_file_is_checked_in_its_own_project(
    tmp_path: Path, hooks: Hooks, env: dict[str, str]
) -> None:
    """From the git top, a changed file of the nested project gym/ (its pyproject.toml with a
    [tool.selfcall-audit] table) is checked under gym/'s settings, one of the outer project under
    the outer ones."""
    gym_settings = '[project]\nname = "gym"\n\n[tool.selfcall-audit]\nignore = ["SCA001"]\n'
    repo = make_repo(
        tmp_path / "mono",
        env,
        {ECHO: SELF_CALLING_AGENT, "gym/pyproject.toml": gym_settings, f"gym/{ECHO}": SELF_CALLING_AGENT},
    )

    both = hooks.run(repo, "selfcall-audit", "--files", ECHO, f"gym/{ECHO}")
    nested_only = hooks.run(repo, "selfcall-audit", "--files", f"gym/{ECHO}")

    assert both.returncode == 1, both.stdout + both.stderr
    assert f"\n{ECHO}:6:26: SCA001 EchoAgent.run posts to its own /v1/responses" in both.stdout
    assert "gym/" not in both.stdout  # gym/ ignores SCA001
    assert nested_only.returncode == 0, nested_only.stdout + nested_only.stderr

"""The documentation says what the code does: every console example runs (as docs_support.py
describes), the CI, pre-commit, pytest-helper and configuration examples work on the demo
repository, the rules page is generated from the registry, and every link between pages resolves.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from docs_support import (
    ALL_BLOCKS,
    FENCE,
    INTEGRATION,
    PAGES,
    REPO,
    RULES_PAGE,
    USAGE,
    WORKSPACES,
    Block,
    demo_repo,
    environment,
    fenced,
    missing,
    run_block,
)

from selfcall_audit.config import Settings, load_settings
from selfcall_audit.report.docs import END, START, render_rules, sync
from selfcall_audit.rules import RULES


def test_every_console_block_says_how_it_runs() -> None:
    unmarked = [block.id for block in ALL_BLOCKS if not ("in" in block.options or "skip" in block.options)]
    unknown = [block.id for block in ALL_BLOCKS if block.options.get("in", "checkout") not in WORKSPACES]
    skipped = [block.id for block in ALL_BLOCKS if "skip" in block.options]

    assert unmarked == [], "add <!-- docs-test: in=WORKSPACE exit=N --> above these blocks"
    assert unknown == []
    assert all(block.options["skip"] for block in ALL_BLOCKS if "skip" in block.options), "give the reason"
    assert len(skipped) <= 3, f"blocks not run: {skipped}"
    assert len(ALL_BLOCKS) - len(skipped) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if "in" in b.options], ids=lambda block: block.id)
def test_console_example(block: Block, tmp_path: Path) -> None:
    statuses = [int(status) for status in block.options["exit"].split(",")]
    if len(statuses) == 1:
        statuses *= len(block.commands)
    assert len(statuses) == len(block.commands), "one exit status per command"

    results = run_block(block, tmp_path)

    assert len(results) == len(block.commands), f"the block stopped early:\n{results}"
    for command, status, (actual_status, output) in zip(block.commands, statuses, results):
        shown = "\n".join(output)
        assert actual_status == status, f"$ {command.line}\nexited {actual_status}:\n{shown}"
        assert missing(command.expected, output) == [], f"$ {command.line}\nprinted:\n{shown}"
        assert "Traceback" not in shown


def test_the_output_matcher_reads_the_examples_strictly() -> None:
    actual = ["a", "Found 6 self-calls (47 ms).", "b c d"]

    assert missing(["a", "...", "b ... d"], actual) == []
    assert missing(["Found 6 self-calls (0.21s)."], actual) == []
    assert missing(["b c d", "a"], actual) == ["a"]
    assert missing(["Found 7 self-calls (47 ms)."], actual) == ["Found 7 self-calls (47 ms)."]
    assert missing(["b c"], actual) == ["b c"]


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings."""
    anchors = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") and not line.startswith("#!"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def _outside_code(text: str) -> str:
    return FENCE.sub("", text)


@pytest.mark.parametrize("page", [p for p in PAGES if p.exists()], ids=lambda page: page.name)
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(_outside_code(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in _anchors(linked)):
            broken.append(target)

    assert broken == []


def test_the_docs_folder_is_linked_from_the_readme() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")

    for page in sorted((REPO / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"
    assert len(readme.splitlines()) <= 250


def test_install_instructions_name_no_package_index_nor_a_placeholder_owner() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert "pip install selfcall-audit" not in text, page.name
        assert "pip install 'selfcall-audit[" not in text, page.name
        assert "OWNER" not in text, page.name


def test_rules_page_is_generated_from_the_registry() -> None:
    text = RULES_PAGE.read_text(encoding="utf-8")

    assert sync(text) == text, "run: python -m selfcall_audit.report.docs --write docs/rules.md"
    assert "python -m selfcall_audit.report.docs --write docs/rules.md" in text


def test_every_rule_has_a_table_row_and_a_before_after_example() -> None:
    rendered = render_rules()

    for code, rule in RULES.items():
        assert f"| {code} | `{rule.name}` | {rule.summary} |" in rendered
        section = rendered.split(f"## {code} ")[1].split("\n## ")[0]
        assert f"Before:\n\n```python\n{rule.bad}\n```" in section
        assert f"After:\n\n```python\n{rule.good}\n```" in section
    assert "| SCA003 | `possible-agent-self-call` |" in rendered
    assert "off (`--select SCA003` or `--strict`)" in rendered


def test_sync_replaces_only_between_the_markers() -> None:
    stale = f"intro\n{START}\nold table\n{END}\noutro\n"

    synced = sync(stale)

    assert synced == f"intro\n{START}\n{render_rules()}\n{END}\noutro\n"
    assert sync(synced) == synced
    with pytest.raises(ValueError, match="markers"):
        sync("no markers here")


def test_write_and_check_from_the_command_line(tmp_path: Path) -> None:
    page = tmp_path / "rules.md"
    page.write_text(f"# x\n{START}\nold\n{END}\n")

    def docs(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "selfcall_audit.report.docs", *args, str(page)]
        return subprocess.run(command, capture_output=True, text=True, timeout=60)

    stale = docs("--check")
    written = docs("--write")
    fresh = docs("--check")

    assert stale.returncode == 1
    assert "out of date" in stale.stdout
    assert written.returncode == 0
    assert fresh.returncode == 0
    assert "| SCA001 |" in page.read_text()


def _run_lines(lines: list[str], cwd: Path, tmp: Path) -> list[int]:
    """Each CI line's exit status, run as the CI's shell runs it, in the demo repository."""
    statuses = []
    for line in lines:
        done = subprocess.run(
            ["bash", "-c", line], cwd=cwd, env=environment(tmp), capture_output=True, text=True, timeout=300
        )
        assert "Traceback" not in done.stderr, done.stderr
        statuses.append(done.returncode)
    return statuses


def _split_install(lines: list[str]) -> list[str]:
    """The lines after the install step, which must carry the placeholder the reader replaces."""
    installs = [line for line in lines if line.startswith("pip install")]
    assert len(installs) == 1 and "<git-host>/<org>" in installs[0], installs
    return [line for line in lines if not line.startswith("pip install")]


def test_the_github_actions_workflow_runs_on_the_demo(tmp_path: Path) -> None:
    (workflow,) = [yaml.safe_load(b) for b in fenced(INTEGRATION, "yaml") if "runs-on:" in b]
    steps = [step["run"] for step in workflow["jobs"]["audit"]["steps"] if "run" in step]
    demo = demo_repo(tmp_path)

    statuses = _run_lines(_split_install(steps), demo, tmp_path)

    assert statuses == [0, 1]  # the SARIF step passes with findings; the gate fails the job
    sarif = json.loads((demo / "selfcall-audit.sarif").read_text())
    assert len(sarif["runs"][0]["results"]) == 6


def test_the_gitlab_job_runs_on_the_demo(tmp_path: Path) -> None:
    (job,) = [yaml.safe_load(b)["selfcall-audit"] for b in fenced(INTEGRATION, "yaml") if "script:" in b]
    demo = demo_repo(tmp_path)

    statuses = _run_lines(_split_install(job["script"]), demo, tmp_path)

    assert statuses == [0, 1]  # --exit-zero for the report, then the JUnit step gates
    for report in job["artifacts"]["reports"].values():
        assert (demo / report).stat().st_size > 0


def test_the_pytest_helper_example_fails_on_the_demo_naming_what_to_allow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (example,) = [
        m.group(2)
        for m in FENCE.finditer(INTEGRATION.read_text(encoding="utf-8"))
        if m.group(1) == "python" and "assert_no_self_calls" in m.group(2)
    ]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(demo_repo(tmp_path))
    namespace: dict[str, object] = {}
    exec(example, namespace)

    with pytest.raises(AssertionError) as failed:
        namespace["test_agents_do_not_call_themselves"]()  # type: ignore[operator]

    message = str(failed.value)
    assert "5 agent self-calls found by selfcall-audit:" in message
    assert "responses_api_agents/simple_agent/app.py:62:26: SCA001" in message
    assert "/aggregate_metrics" not in message


@pytest.mark.slow
def test_the_local_pre_commit_hook_runs_from_a_checkout(tmp_path: Path) -> None:
    """The `repo: local` example, its checkout path replaced by a copy of this one."""
    (config,) = [b for b in fenced(INTEGRATION, "yaml") if "repo: local" in b]
    assert config.count("/path/to/selfcall-audit") == 1
    checkout = tmp_path / "selfcall-audit"
    shutil.copytree(
        REPO / "selfcall_audit", checkout / "selfcall_audit", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, checkout / name)
    demo = demo_repo(tmp_path)
    (demo / ".pre-commit-config.yaml").write_text(config.replace("/path/to/selfcall-audit", str(checkout)))
    subprocess.run(["git", "add", "-A"], cwd=demo, check=True)
    env = {**environment(tmp_path), "PRE_COMMIT_HOME": str(tmp_path / "pre-commit")}
    env.pop("PYTHONPATH")  # the hook runs the copy pre-commit installed

    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"],
        cwd=demo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )

    assert done.returncode == 1, done.stdout + done.stderr
    assert "responses_api_agents/simple_agent/app.py:62:26: SCA001" in done.stdout


def test_the_configuration_example_names_every_setting_and_is_accepted(tmp_path: Path) -> None:
    (example,) = [
        m.group(2) for m in FENCE.finditer(USAGE.read_text(encoding="utf-8")) if m.group(1) == "toml"
    ]
    (tmp_path / "pyproject.toml").write_text(example)
    keys = set(re.findall(r"(?m)^([a-z-]+) = ", example))
    internal = {"config_file", "nested_projects"}  # set by the run, not by a user
    settings_keys = {name.replace("_", "-") for name in Settings._fields if name not in internal}

    settings = load_settings(tmp_path)

    assert keys == settings_keys | {"extend-exclude"}
    defaults = Settings()
    assert settings.agent_bases == defaults.agent_bases
    assert (settings.route, settings.own_routes, settings.route_wrappers) == (
        defaults.route,
        defaults.own_routes,
        defaults.route_wrappers,
    )
    assert (settings.max_file_size, settings.cache_dir, settings.jobs) == (
        2_000_000,
        ".selfcall_audit_cache",
        0,
    )
    assert settings.exclude == ("scratch/",)


def test_every_module_the_docs_name_exists() -> None:
    """Modules move; the pages that name them (`analysis/facts.py`, `report/`) follow."""
    package = REPO / "selfcall_audit"
    top_folders = "|".join(p.name for p in package.iterdir() if p.is_dir() and not p.name.startswith("_"))
    named = re.compile(rf"`((?:{top_folders})/[\w/]*(?:\.py)?)`")
    missing_modules = []
    for page in PAGES:
        for name in named.findall(page.read_text(encoding="utf-8")):
            if not (package / name).exists():
                missing_modules.append(f"{page.name}: {name}")

    assert missing_modules == []

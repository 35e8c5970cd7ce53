"""Worker processes change how fast a scan is, never what it reports: the same report with
`--jobs 1` and `--jobs 2`, the cache cold or warm, whatever was parsed ahead of need."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

AGENTS = 30  # enough files for the workers to start
AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from shared.base import SharedBase
from shared.broken import unused_helper


class Agent{n}(SharedBase, SimpleResponsesAPIAgent):
    async def run(self, body):
        return await self.ask(body)
"""
SHARED_BASE = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class SharedBase(SimpleResponsesAPIAgent):
    async def ask(self, body):
        return await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
"""
# Imported by every agent, so parsed ahead of need by the workers, yet never needed: its syntax
# error is not reported (as with one process), and it does not count as parsed.
SHARED_BROKEN = "def unused_helper(:\n"


SELF_CALLING = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class Agent{n}(SimpleResponsesAPIAgent):
    async def run(self, body):
        return await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
"""


def _project(root: Path, agent: str = AGENT) -> Path:
    files = {f"responses_api_agents/agent_{n}/app.py": agent.format(n=n) for n in range(AGENTS)}
    files |= {"shared/__init__.py": "", "shared/base.py": SHARED_BASE, "shared/broken.py": SHARED_BROKEN}
    (root / "pyproject.toml").parent.mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "workers"\n')
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _report(command, root: Path, *options: str) -> dict:
    done = command("scan", root, "--format", "json", *options)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    del report["summary"]["seconds"]
    return report


@pytest.mark.slow
def test_parallel_and_serial_scans_report_the_same(command, tmp_path: Path) -> None:
    root = _project(tmp_path / "repo")

    serial = _report(command, root, "--jobs", "1", "--no-cache")
    parallel = _report(command, root, "--jobs", "2", "--no-cache")
    cold = _report(command, root, "--jobs", "2")
    warm = _report(command, root, "--jobs", "2")

    assert parallel == serial == cold
    assert warm["findings"] == serial["findings"] and warm["errors"] == serial["errors"]
    assert len(serial["findings"]) == 1
    assert serial["findings"][0]["path"] == "shared/base.py"
    assert serial["errors"] == []
    assert serial["summary"]["files_parsed"] == AGENTS + 1  # the agents and shared/base.py


AGENT_TEST = """\
async def test_run_posts_to_itself(agent):
    await agent.run(request, body)
    agent.server_client.post.assert_called_once_with(server_name="a", url_path="/v1/responses", json=body)
"""


# `fix` in a process of its own (the in-process test run may hold threads, beside which the
# workers never start), each rewrite, test search and test update recorded with the process that did it.
RECORDING_FIX = """\
import os
import sys

from selfcall_audit.frontends.cli import main
from selfcall_audit.migrate import codemod, test_impact, test_update

log = sys.argv[1]


def recorded(job):
    def run(*args, **kwargs):
        with open(log, "a") as out:
            out.write(f"{job.__name__} {os.getpid()}\\n")
        return job(*args, **kwargs)

    return run


codemod.rewrite_source = recorded(codemod.rewrite_source)
test_update._update_file = recorded(test_update._update_file)
test_impact._impacted_in = recorded(test_impact._impacted_in)
with open(log, "a") as out:
    out.write(f"main {os.getpid()}\\n")
sys.exit(main(sys.argv[2:]))
"""


def test_fix_rewrites_files_finds_and_updates_tests_in_worker_processes_as_one_process_would(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "repo", SELF_CALLING)
    for n in range(AGENTS):
        (root / f"responses_api_agents/agent_{n}/tests").mkdir()
        (root / f"responses_api_agents/agent_{n}/tests/test_app.py").write_text(AGENT_TEST)
    driver = tmp_path / "recording_fix.py"
    driver.write_text(RECORDING_FIX)
    diffs = {}
    for jobs in ("1", "2"):
        log = tmp_path / f"jobs-{jobs}.log"
        helper = "pkg.helper:responses_in_process"
        done = subprocess.run(
            [
                sys.executable,
                driver,
                log,
                "fix",
                "--no-cache",
                "--diff",
                "--jobs",
                jobs,
                "--helper",
                helper,
                root,
            ],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        diffs[jobs] = done.stdout
        ran = [line.split() for line in log.read_text().splitlines()]
        main_process = ran.pop(0)[1]
        assert Counter(job for job, _ in ran) == {
            "rewrite_source": AGENTS + 1,
            "_impacted_in": AGENTS,
            "_update_file": AGENTS,
        }
        assert all((pid == main_process) == (jobs == "1") for _, pid in ran), ran  # each in a worker or none

    assert diffs["1"] == diffs["2"]
    assert diffs["1"].count("+        return await responses_in_process(") == AGENTS + 1  # and shared/base.py
    assert diffs["1"].count("+@patch(") == AGENTS

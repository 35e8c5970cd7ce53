"""Worker processes change how fast a scan is, never what it reports: the same report with
`--jobs 1` and `--jobs 2`, the cache cold or warm, whatever was parsed ahead of need."""

from __future__ import annotations

import json
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


def _project(root: Path) -> Path:
    files = {f"responses_api_agents/agent_{n}/app.py": AGENT.format(n=n) for n in range(AGENTS)}
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

"""Nothing of the scanned checkout runs: neither a command its git configuration names nor a module
lying in the folder the tool is started from. Each case leaves a marker file if the code ran."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        return await self.server_client.post(  # SCA001
            server_name=self.config.name, url_path="/v1/responses", json=body
        )
"""


def _checkout(root: Path) -> Path:
    (root / "responses_api_agents" / "echo_agent").mkdir(parents=True)
    (root / "responses_api_agents" / "echo_agent" / "app.py").write_text(AGENT)
    (root / "pyproject.toml").write_text("[project]\nname = 'echo'\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _scan(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "selfcall_audit", "scan", "--format", "concise", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_checkouts_fsmonitor_command_is_not_run(tmp_path: Path) -> None:
    root = _checkout(tmp_path / "repo")
    marker = tmp_path / "fsmonitor-ran"
    hook = tmp_path / "fsmonitor.sh"
    hook.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    hook.chmod(0o755)
    subprocess.run(["git", "-C", str(root), "config", "core.fsmonitor", str(hook)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)  # git itself runs it
    marker.unlink(missing_ok=True)

    done = _scan(root)

    assert not marker.exists(), "scan ran the checkout's core.fsmonitor command"
    assert done.returncode == 1, done.stderr
    assert "responses_api_agents/echo_agent/app.py:6:" in done.stdout


def test_python_m_does_not_import_modules_from_the_current_folder(tmp_path: Path) -> None:
    root = _checkout(tmp_path / "repo")
    marker = tmp_path / "imported"
    for name in ("click", "select"):  # a third-party module and a standard one
        (root / f"{name}.py").write_text(f"open({str(marker / name)!r}, 'w').close()\n")
    marker.mkdir()

    done = _scan(root)

    assert sorted(os.listdir(marker)) == [], "python -m imported a module of the scanned folder"
    assert done.returncode == 1, done.stderr
    assert "responses_api_agents/echo_agent/app.py:6:" in done.stdout

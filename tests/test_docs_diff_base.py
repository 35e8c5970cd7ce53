"""The `--diff-base` CI examples of docs/diff-base.md run on the demo repository: a branch that adds
one self-call to the demo's six gets that one reported, by the GitHub Actions step and the GitLab
job as written."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml
from docs_support import REPO, demo_repo, environment, fenced
from git_support import git

PAGE = REPO / "docs" / "diff-base.md"
NEW_CALL = """
    async def again(self, body):
        return await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
"""
AGENT = "responses_api_agents/simple_agent/app.py"


def branch_with_a_new_self_call(tmp_path: Path) -> tuple[Path, str]:
    """The demo committed as `main` (known to the clone as origin/main too), then a commit that
    adds a self-call to the simple agent; the base commit's id."""
    demo = demo_repo(tmp_path)
    git(demo, "add", "-A")
    git(demo, "commit", "-q", "-m", "base")
    base = git(demo, "rev-parse", "HEAD")
    git(demo, "update-ref", "refs/remotes/origin/main", base)
    text = (demo / AGENT).read_text()
    (demo / AGENT).write_text(
        text.replace('\n\nif __name__ == "__main__":', NEW_CALL + '\n\nif __name__ == "__main__":')
    )
    git(demo, "commit", "-q", "-am", "a new self-call")
    return demo, base


def run(line: str, demo: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line],
        cwd=demo,
        env={**environment(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_github_actions_step_annotates_only_the_new_self_call(tmp_path: Path) -> None:
    (workflow,) = [yaml.safe_load(block) for block in fenced(PAGE, "yaml") if "runs-on:" in block]
    steps = [step["run"] for step in workflow["jobs"]["selfcall-audit"]["steps"] if "run" in step]
    (scan,) = [step for step in steps if "--diff-base" in step]
    demo, _ = branch_with_a_new_self_call(tmp_path)

    done = run(scan.replace("${{ github.base_ref }}", "main"), demo, tmp_path)

    assert done.returncode == 1, done.stderr
    annotations = done.stdout.splitlines()
    assert len(annotations) == 1
    assert annotations[0].startswith(f"::error file={AGENT},line=")
    assert "6 finding(s) already present" in done.stderr


def test_the_gitlab_job_reports_only_the_new_self_call(tmp_path: Path) -> None:
    (job,) = [yaml.safe_load(block)["selfcall-audit"] for block in fenced(PAGE, "yaml") if "script:" in block]
    (scan,) = [line for line in job["script"] if "--diff-base" in line]
    demo, base = branch_with_a_new_self_call(tmp_path)

    done = run(scan, demo, tmp_path, CI_MERGE_REQUEST_DIFF_BASE_SHA=base)

    assert done.returncode == 1, done.stderr
    (report,) = job["artifacts"]["reports"].values()
    issues = json.loads((demo / report).read_text())
    assert [issue["location"]["path"] for issue in issues] == [AGENT]

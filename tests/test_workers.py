"""Worker processes change how fast a scan is, never what it reports: the same report with
`--jobs 1` and `--jobs 2`, the cache cold or warm, whatever was parsed ahead of need."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from selfcall_audit import api
from selfcall_audit.config import load_settings
from selfcall_audit.orchestration import store
from selfcall_audit.orchestration.jobs import extract_facts
from selfcall_audit.workspace import discovery

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
        await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
"""
# Imported by every agent, so parsed ahead of need by the workers, yet never needed: its syntax
# error is not reported (as with one process), and it does not count as parsed.
SHARED_BROKEN = "def unused_helper(:\n"


SELF_CALLING = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class Agent{n}(SimpleResponsesAPIAgent):
    async def run(self, body):
        await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
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
from selfcall_audit.migrate import rewrite, test_impact, test_update

log = sys.argv[1]


def recorded(job):
    def run(*args, **kwargs):
        with open(log, "a") as out:
            out.write(f"{job.__name__} {os.getpid()}\\n")
        return job(*args, **kwargs)

    return run


rewrite.rewrite_source = recorded(rewrite.rewrite_source)
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
    assert diffs["1"].count("+        await responses_in_process(") == AGENTS + 1  # and shared/base.py
    assert diffs["1"].count("+@patch(") == AGENTS


def test_libcst_is_loaded_once_before_the_rewrites_are_shared_out(
    command, tmp_path: Path, monkeypatch
) -> None:
    """The worker processes are forked with the rewrite's modules loaded: loading libcst in each of
    them cost `fix` on NeMo Gym a tenth of its time."""
    root = _project(tmp_path / "repo", SELF_CALLING)
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # every process' imports on stderr

    done = command("fix", "--no-cache", "--jobs", "2", "--helper", "pkg.helper:responses_in_process", root)

    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("rewrote self-call") == AGENTS + 1
    loaded = [line for line in done.stderr.splitlines() if line.endswith("| selfcall_audit.migrate.rewrite")]
    assert len(loaded) == 1


def _padded(text: str, size: int) -> str:
    return text + "#" * (size - len(text)) + "\n"


SUBCLASS = """\
from responses_api_agents.{agent}.app import Agent{n}


class Sub{n}(Agent{n}):
    pass
"""


def test_the_largest_files_are_handed_out_first_and_the_report_is_the_same(
    tmp_path: Path, monkeypatch
) -> None:
    """A batch ends when its last file is parsed: handed out in the listing's order, a large
    file found last kept one worker parsing while the others had nothing left. The files naming a
    base are read largest first (as the prefilter finds them), and every later batch is handed
    out largest first too; what is reported does not depend on the order."""
    sizes = {"a": 300, "b": 3_000, "c": 1_500}  # the agents' files, in bytes
    root = tmp_path / "repo"
    files = {
        f"responses_api_agents/{name}/app.py": _padded(SELF_CALLING.format(n=n), size)
        for n, (name, size) in enumerate(sizes.items())
    }
    # the modules subclassing an agent (by its name, naming no base): parsed in the next batch
    files |= {
        f"extras/sub_{n}.py": _padded(SUBCLASS.format(agent=name, n=n), size)
        for n, (name, size) in enumerate(zip(sizes, (2_000, 600, 1_000)))
    }
    (root / "pyproject.toml").parent.mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "order"\n')
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    largest_first, handed_out = _scan_recording(root, monkeypatch, settle_ns=0)  # all settled
    assert handed_out == [
        "responses_api_agents/b/app.py",
        "responses_api_agents/c/app.py",
        "responses_api_agents/a/app.py",
        "extras/sub_0.py",
        "extras/sub_2.py",
        "extras/sub_1.py",
    ]
    # Just written, no file has settled: their sizes are not known and they are read as listed.
    as_listed, handed_out = _scan_recording(root, monkeypatch, settle_ns=3600 * 10**9)
    assert handed_out[:3] == sorted(handed_out[:3]) and len(handed_out) == 6
    reports = {"largest first": largest_first, "as listed": as_listed}
    assert reports["largest first"].findings == reports["as listed"].findings
    assert [f.path for f in reports["as listed"].findings] == sorted(
        f"responses_api_agents/{n}/app.py" for n in sizes
    )


def _scan_recording(root: Path, monkeypatch, settle_ns: int) -> tuple[api.Report, list[str]]:
    """The report of a scan in this process (one job), and the files parsed, in the order they
    were handed out."""
    handed_out: list[str] = []

    def recorded(item, functions=None):
        handed_out.append(item[0])
        return extract_facts(item, functions)

    with monkeypatch.context() as patched:
        patched.setattr(store, "extract_facts", recorded)
        patched.setattr(discovery, "SETTLE_NS", settle_ns)
        report = api.analyze([root], settings_for=lambda r: load_settings(r)._replace(jobs=1, cache_dir=None))
    return report, handed_out


BACKGROUND = """\
import os

from selfcall_audit.workspace.workers import Workers

parent = os.getpid()
ran = []


def where():
    ran.append(os.getpid())
    return "here" if os.getpid() == parent else "forked"


def dies():
    if os.getpid() != parent:
        os._exit(1)  # killed, out of memory
    return "here"


forked, later = Workers(2).background(where), Workers(1).background(where)
print(forked(), len(ran))  # the child's list was its own
print(later(), ran == [parent])
print(Workers(2).background(dies)())
"""


def test_a_job_in_the_background_runs_in_a_process_of_its_own_or_here(tmp_path: Path) -> None:
    """`fix` searches for tests in the background while it loads libcst. With one job there is no
    fork, and the job runs when its result is asked for; a child that dies leaves the job to this
    process. (In a process of its own: a test suite's threads would forbid the fork.)"""
    script = tmp_path / "background.py"
    script.write_text(BACKGROUND)

    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["forked 0", "here True", "here"]


OUTLIVED = """\
import os
import signal
import sys
import time

from selfcall_audit.workspace.workers import Workers


def job(path):
    with open(path + ".tmp", "w") as out:
        out.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    time.sleep(60)


Workers(2).background(job, sys.argv[1])
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
if sys.argv[2] == "interrupted":
    raise KeyboardInterrupt
if sys.argv[2] == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("end", ["returns", "interrupted", "killed"])
def test_a_job_in_the_background_ends_with_the_process_that_started_it(end: str, tmp_path: Path) -> None:
    """`fix` interrupted while it plans, or killed, leaves no search for tests running."""
    script, started = tmp_path / "outlived.py", tmp_path / "started"
    script.write_text(OUTLIVED)

    subprocess.run([sys.executable, str(script), str(started), end], capture_output=True, timeout=60)

    child = Path(f"/proc/{started.read_text()}/stat")
    deadline = time.monotonic() + 10
    while child.exists() and child.read_text().split()[2] != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not child.exists() or child.read_text().split()[2] == "Z"

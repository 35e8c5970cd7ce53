"""A whole run evaluates its modules in this process and in one forked for each other core: the
report is the one a single process makes, whatever each process took, learned or failed at."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

AGENTS = 30  # enough modules to share them out
HELPED = 20
AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
{imports}

class Agent{n}(SimpleResponsesAPIAgent):
    async def run(self, body):
        return await {call}
"""
# Each imported by one agent, so not parsed until the evaluation needs it (by whichever process
# evaluates that agent): a helper posting to the agent itself, and one that cannot be parsed.
HELPER = """\
async def post_to_self(agent, body):
    return await agent.server_client.post(server_name=agent.config.name, url_path="/v1/responses", json=body)
"""
BROKEN_HELPER = HELPER.replace("body):", "body:")

# `scan` as the console script runs it, each module's evaluation and each file's parsing recorded
# with the process that made it; with `fail`, every forked process fails at its first module.
RECORDING_SCAN = """\
import os
import sys

from selfcall_audit.analysis import resolve
from selfcall_audit.frontends.cli import main
from selfcall_audit.orchestration import store

log, fail = sys.argv[1], sys.argv[2] == "fail"
parent = os.getpid()
findings_in = resolve.Resolver.findings_in


def recorded(self, path, only=None):
    if fail and os.getpid() != parent:
        raise RuntimeError("a forked process fails")
    with open(log, "a") as out:
        out.write(f"evaluated {path} {os.getpid()}\\n")
    return findings_in(self, path, only)


def extracted(item, functions=None):
    with open(log, "a") as out:
        out.write(f"parsed {item[0]} {os.getpid()}\\n")
    return extract_facts(item, functions)


resolve.Resolver.findings_in = recorded
extract_facts, store.extract_facts = store.extract_facts, extracted
with open(log, "a") as out:
    out.write(f"main - {parent}\\n")
sys.exit(main(sys.argv[3:]))
"""


def _project(root: Path) -> Path:
    files = {"pyproject.toml": '[project]\nname = "shared"\n', "helpers/__init__.py": ""}
    for n in range(AGENTS):
        imports, call = "", "self.server_client.post(server_name='other', url_path='/run', json=body)"
        if n < HELPED:  # each its own helper: half post to the agent itself, half cannot be parsed
            imports, call = f"from helpers.h{n} import post_to_self\n", "post_to_self(self, body)"
            files[f"helpers/h{n}.py"] = BROKEN_HELPER if n % 2 else HELPER
        files[f"responses_api_agents/agent_{n}/app.py"] = AGENT.format(n=n, imports=imports, call=call)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _scan(
    tmp_path: Path, root: Path, jobs: str, mode: str = "", cache: bool = False
) -> tuple[dict, dict[str, str]]:
    """The JSON report of a scan, with how often each file was parsed (`parsed`), and the process
    that evaluated each module ("main": the one the scan ran in; else its process id)."""
    driver = tmp_path / "recording_scan.py"
    driver.write_text(RECORDING_SCAN)
    log = tmp_path / "evaluated.log"
    log.unlink(missing_ok=True)
    options = [] if cache else ["--no-cache"]
    done = subprocess.run(
        [sys.executable, driver, log, mode, "scan", "--format", "json", "--jobs", jobs, *options, root],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and done.stderr == "", done.stderr  # no warning of a fork beside threads
    report = json.loads(done.stdout)
    del report["summary"]["seconds"]
    recorded = [line.split() for line in log.read_text().splitlines()]
    main = next(pid for what, _, pid in recorded if what == "main")
    report["parsed"] = Counter(rel for what, rel, _ in recorded if what == "parsed")
    return report, {rel: "main" if pid == main else pid for what, rel, pid in recorded if what == "evaluated"}


def test_the_modules_are_shared_out_and_reported_as_one_process_reports_them(tmp_path: Path) -> None:
    root = _project(tmp_path / "repo")

    alone, one = _scan(tmp_path, root, "1")
    shared, processes = _scan(tmp_path, root, "2")

    assert set(one.values()) == {"main"} and len(one) == AGENTS
    assert processes.keys() == one.keys() and len(set(processes.values())) == 2  # each module once, by both
    assert shared == alone
    agents = [f"responses_api_agents/agent_{n}/app.py" for n in range(AGENTS)]
    assert sorted(f["path"] for f in alone["findings"]) == sorted(agents[0:HELPED:2])
    assert [e["path"] for e in alone["errors"]] == sorted(f"helpers/h{n}.py" for n in range(1, HELPED, 2))
    assert alone["summary"]["files_parsed"] == AGENTS + HELPED
    assert set(shared["parsed"].values()) == {1}  # each helper once, whoever parsed it


def test_what_a_forked_process_parsed_is_cached_by_the_parent(tmp_path: Path) -> None:
    root = _project(tmp_path / "repo")

    cold, processes = _scan(tmp_path, root, "2", cache=True)
    edited = f"responses_api_agents/agent_{AGENTS - 1}/app.py"
    (root / edited).write_text(AGENT.format(n=AGENTS - 1, imports="", call="body"))
    warm, _ = _scan(tmp_path, root, "2", cache=True)  # no snapshot holds: evaluated again

    forked = [rel for rel, process in processes.items() if process != "main"]
    assert any(
        rel.startswith(tuple(f"responses_api_agents/agent_{n}/" for n in range(HELPED))) for rel in forked
    )
    # parsed again: the edited agent, and the helpers that cannot be parsed (no facts to cache)
    assert sorted(warm["parsed"]) == sorted([edited, *(f"helpers/h{n}.py" for n in range(1, HELPED, 2))])
    assert warm["summary"]["files_parsed"] == 1 + HELPED // 2
    del cold["parsed"], warm["parsed"]
    assert warm["findings"] == cold["findings"] and warm["errors"] == cold["errors"]


def test_a_forked_process_that_fails_leaves_its_modules_to_this_one(tmp_path: Path) -> None:
    root = _project(tmp_path / "repo")

    alone, _ = _scan(tmp_path, root, "1")
    recovered, processes = _scan(tmp_path, root, "2", "fail")

    assert recovered == alone
    assert set(processes.values()) == {"main"} and len(processes) == AGENTS


SHARE = """\
import os
import sys
import time

from selfcall_audit.workspace.workers import Workers

items = list(range(int(sys.argv[2])))


def task(take):
    taken = []
    while (item := take()) is not None:
        time.sleep(0.002)  # long enough for every process to take some
        taken.append((os.getpid(), item))
    return taken


taken = Workers(int(sys.argv[1])).share(items, task, task)
print(len(taken), sorted(item for share in taken for _, item in share) == items, len({pid for share in taken for pid, _ in share}))
"""


def test_each_item_is_taken_once_by_one_process() -> None:
    # as many processes as the jobs allow, each with half a batch of items (12) or more
    for jobs, items, processes in (("1", "200", 1), ("3", "200", 3), ("8", "30", 2), ("2", "23", 1)):
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(SHARE), jobs, items], capture_output=True, text=True
        )
        assert done.stdout.split() == [str(processes), "True", str(processes)], done.stderr

"""Reusing the last whole-project result after files changed: only when the same analysis would
run again. Every scan after a change must report what a scan without any cache reports."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from selfcall_audit.config import load_settings
from selfcall_audit.orchestration import stages
from selfcall_audit.orchestration.cache import FactsCache
from selfcall_audit.orchestration.project import Project

AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from responses_api_agents.tutor.transport import send


class TutorAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        await self.server_client.post(server_name="tutor", url_path="/v1/responses", json=body)

    async def ask(self, body):
        return await send(self.config.name, "/v1/responses", body)
"""
TRANSPORT = """\
async def send(name, path, body):
    return {"name": name, "path": path, "body": body}
"""
POSTING_TRANSPORT = """\
async def send(name, path, body):
    return await CLIENT.server_client.post(server_name=name, url_path=path, json=body)
"""
CONFIG = """\
tutor:
  responses_api_agents:
    tutor:
      entrypoint: app.py
"""
FILLER = """\
def double(value):
    return 2 * value
"""
SUBCLASS = """\
from responses_api_agents.tutor.app import TutorAgent


class StrictTutor(TutorAgent):
    async def check(self, body):
        await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
"""
APP_BUILDER = """\
from responses_api_agents.tutor.app import TutorAgent


class StandaloneTutor(TutorAgent):
    def setup_webserver(self):
        return build_app(self)
"""
FILES = {
    "pyproject.toml": "[project]\nname = 'reuse'\n",
    "nemo_gym/base_responses_api_agent.py": "class SimpleResponsesAPIAgent:\n    pass\n",
    "responses_api_agents/tutor/app.py": AGENT,
    "responses_api_agents/tutor/transport.py": TRANSPORT,
    "responses_api_agents/tutor/configs/tutor.yaml": CONFIG,
    **{f"lib/filler_{n}.py": FILLER for n in range(3)},
}

# What a run loaded tells whether it analysed: a reused result needs no resolution.
RUN = """\
import json, sys
from pathlib import Path

from selfcall_audit.config import load_settings
from selfcall_audit.orchestration.project import Project

root = Path(sys.argv[1])
report = Project(root, load_settings(root)).analyze([root])
print(json.dumps({
    "findings": [[f.code, f.path, f.line, f.fixable] for f in report.findings],
    "errors": [[e.path, e.message] for e in report.errors],
    "resolved": "selfcall_audit.analysis.resolve" in sys.modules,
}))
"""


def _scan(root: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", RUN, str(root)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _uncached(cli, root: Path) -> dict:
    report = json.loads(cli("scan", root, "--format", "json", "--no-cache").stdout)
    return {
        "findings": [[f["code"], f["path"], f["line"], f["fixable"]] for f in report["findings"]],
        "errors": [[e["path"], e["message"]] for e in report["errors"]],
    }


def _append(rel: str, text: str) -> Callable[[Path], None]:
    return lambda root: (root / rel).write_text((root / rel).read_text() + text)


def _replace(rel: str, old: str, new: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        text = (root / rel).read_text()
        assert old in text
        (root / rel).write_text(text.replace(old, new))

    return change


def _write(rel: str, text: str) -> Callable[[Path], None]:
    return lambda root: (root / rel).write_text(text)


# (change, whether the last result still holds)
CHANGES = {
    "a module no run parses gains a function": (
        _append("lib/filler_0.py", "\n\ndef triple(v):\n    return 3 * v\n"),
        True,
    ),
    "an agent gains a comment": (_append("responses_api_agents/tutor/app.py", "# reviewed\n"), True),
    "a helper the agent calls changes but still cannot post": (
        _replace("responses_api_agents/tutor/transport.py", '"name": name', '"target": name'),
        True,
    ),
    "the self-call moves down a line": (
        _replace("responses_api_agents/tutor/app.py", "class Tutor", "\nclass Tutor"),
        False,
    ),
    "the self-call is gone": (_replace("responses_api_agents/tutor/app.py", '"tutor"', '"grader"'), False),
    "a helper the agent calls starts posting": (
        _write("responses_api_agents/tutor/transport.py", POSTING_TRANSPORT),
        False,
    ),
    "a module no run parsed subclasses the agent": (_write("lib/filler_2.py", SUBCLASS), False),
    "a module no run parsed subclasses the agent and builds its own app": (
        _write("lib/filler_2.py", APP_BUILDER),
        False,
    ),
    "the YAML instance is renamed": (
        _replace("responses_api_agents/tutor/configs/tutor.yaml", "tutor:\n  r", "coach:\n  r"),
        False,
    ),
    "an agent no longer parses": (_append("responses_api_agents/tutor/app.py", "def broken(:\n"), False),
}


REAL_FACTS = FactsCache.facts

# A result that met a file it could not parse is not kept: the next run looks at the file again.
NOT_KEPT = {"an agent no longer parses"}


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The project after its first scan, cache included, and that scan's result: tests change a
    copy of it, so the cold scan runs once for the module."""
    root = tmp_path_factory.mktemp("scanned") / "repo"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    before = _scan(root)
    assert before["findings"] == [["SCA001", "responses_api_agents/tutor/app.py", 7, True]]
    return root, before


@pytest.mark.parametrize("name", CHANGES)
def test_a_scan_after_a_change_reports_what_an_uncached_scan_reports(
    cli, tmp_path: Path, scanned: tuple[Path, dict], name: str
) -> None:
    change, holds = CHANGES[name]
    original, before = scanned
    root = shutil.copytree(original, tmp_path / "repo", symlinks=True)  # file times kept, as left

    change(root)
    after = _scan(root)

    assert {k: after[k] for k in ("findings", "errors")} == _uncached(cli, root)
    assert after["resolved"] is not holds
    if not holds:
        assert after["findings"] != before["findings"] or after["errors"] != before["errors"]
    again = _scan(root)  # the result is kept under the files' new state, unless a file failed to parse
    assert again == {**after, "resolved": name in NOT_KEPT}


@pytest.mark.parametrize("same_bytes", [True, False])
def test_an_agent_whose_code_line_gains_a_comment_is_compared_by_its_facts_entry_before_any_decoding(
    tmp_path: Path, scanned: tuple[Path, dict], monkeypatch, same_bytes: bool
) -> None:
    """A code line changed (by a comment at its end): the agent file's facts are extracted again
    and encoded for the cache, and the same bytes as the entry stored for it before say its facts
    are the same, without decoding that entry. Equal facts stored in other bytes (marshal marks
    objects by their reference counts) are decoded and compared."""
    original, before = scanned
    root = shutil.copytree(original, tmp_path / "repo", symlinks=True)
    _replace("responses_api_agents/tutor/app.py", "json=body)\n", "json=body)  # reviewed\n")(root)
    decoded, analysed = [], []

    def facts(self: FactsCache, rel: str, key: str) -> object:
        found = REAL_FACTS(self, rel, key)
        if found is not None:
            decoded.append(rel)
        return found

    monkeypatch.setattr(FactsCache, "facts", facts)
    monkeypatch.setattr(stages, "analyse", lambda *args, **kwargs: analysed.append(args))
    if not same_bytes:
        monkeypatch.setattr(FactsCache, "same_facts", lambda self, then, now: False)

    report = Project(root, load_settings(root)).analyze([root])

    assert [[f.code, f.path, f.line, f.fixable] for f in report.findings] == before["findings"]
    assert analysed == []  # the last result, reused
    assert decoded == ([] if same_bytes else ["responses_api_agents/tutor/app.py"])

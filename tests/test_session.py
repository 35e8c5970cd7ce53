"""`api.Session`: one project analysed again and again by a long-lived process, its facts kept warm,
unsaved text read from memory, the disk read again only where `changed` says it moved."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_sources import JUDGE_CONFIG

from selfcall_audit import api
from selfcall_audit.config import load_settings

BASE = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class BaseJudge(SimpleResponsesAPIAgent):
    async def critique(self, body):
        return await self.server_client.post(  # SCA001 (reported in this file)
            server_name=self.config.critic.name, url_path="/v1/responses", json=body
        )
"""
JUDGE = """\
from responses_api_agents.judge.base import BaseJudge


class JudgeAgent(BaseJudge):
    async def run(self, body):
        critique = await self.server_client.post(  # SCA001
            server_name=self.config.critic.name,
            url_path="/v1/responses",
            json=body,
        )
        return await critique.json()
"""
APP = "responses_api_agents/judge/app.py"
BASE_PATH = "responses_api_agents/judge/base.py"
YAML = "responses_api_agents/judge/configs/judge.yaml"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for rel, text in {
        "pyproject.toml": '[project]\nname = "fake-gym"\nversion = "0"\n',
        "responses_api_agents/__init__.py": "",
        "responses_api_agents/judge/__init__.py": "",
        APP: JUDGE,
        BASE_PATH: BASE,
        YAML: JUDGE_CONFIG,
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def lines(report: api.Report, rel: str = APP) -> list[int]:
    return [f.line for f in report.findings if f.path == rel]


def test_an_edit_is_analysed_from_memory_and_only_its_file_parsed_again(project: Path) -> None:
    session = api.Session(project, load_settings(project))

    first = session.analyze([project / APP], {APP: JUDGE.encode()}, located=True)
    edited = session.analyze([project / APP], {APP: ("# moved\n" + JUDGE).encode()}, located=True)
    removed = session.analyze(
        [project / APP], {APP: JUDGE.replace("self.config.critic.name", '"model"').encode()}, located=True
    )

    assert (lines(first), lines(edited), lines(removed)) == ([6], [7], [])
    assert first.files_parsed >= 2  # the file and the base it resolves through
    assert edited.files_parsed == 1  # the edited file alone: the rest was kept
    assert (project / APP).read_text() == JUDGE  # nothing written


def test_located_leaves_out_the_findings_of_other_files(project: Path) -> None:
    session = api.Session(project, load_settings(project))

    located = session.analyze([project / YAML], located=True)
    scoped = session.analyze([project / YAML])

    assert located.findings == []
    # the YAML line that routes `critic` back to the instance is the evidence of both self-calls
    assert sorted(f.path for f in scoped.findings) == [APP, BASE_PATH]


def test_an_unsaved_base_class_changes_its_subclass_findings(project: Path) -> None:
    session = api.Session(project, load_settings(project))
    not_an_agent = BASE.replace("(SimpleResponsesAPIAgent)", "")

    before = session.analyze([project / APP], located=True)
    after = session.analyze([project / APP], {BASE_PATH: not_an_agent.encode()}, located=True)

    assert (lines(before), lines(after)) == ([6], [])


def test_the_disk_is_read_again_where_changed_says_it_moved(project: Path) -> None:
    session = api.Session(project, load_settings(project))
    session.analyze([project / APP], located=True)
    (project / YAML).write_text(JUDGE_CONFIG.replace("name: judge", "name: other_agent"))

    kept = session.analyze([project / APP], located=True)
    session.changed([project / YAML])
    again = session.analyze([project / APP], located=True)

    assert lines(kept) == [6]  # what was read is kept until the watcher says otherwise
    assert lines(again) == []


def test_a_new_file_joins_the_listing_when_changed_says_files_came(project: Path) -> None:
    session = api.Session(project, load_settings(project))
    session.analyze([project / APP], located=True)
    other = "responses_api_agents/judge/other.py"
    # no YAML runs it, but it posts to its own name
    (project / other).write_text(JUDGE.replace("JudgeAgent", "OtherJudge").replace("critic.name", "name"))

    unknown = session.analyze([project / other], located=True)
    session.changed()
    known = session.analyze([project / other], located=True)

    assert lines(unknown, other) == []
    assert lines(known, other) == [6]


def test_a_closed_buffer_answers_from_the_disk_again(project: Path) -> None:
    """The base's self-call runs in the judge agent, its subclass; an unsaved judge that no longer
    subclasses it takes the finding away until the buffer is closed (the disk is read again)."""
    session = api.Session(project, load_settings(project))
    unrelated = JUDGE.replace(
        "from responses_api_agents.judge.base import BaseJudge",
        "from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent",
    ).replace("(BaseJudge)", "(SimpleResponsesAPIAgent)")

    saved = session.analyze([project / BASE_PATH], located=True)
    unsaved = session.analyze([project / BASE_PATH], {APP: unrelated.encode()}, located=True)
    closed = session.analyze([project / BASE_PATH], located=True)

    assert [lines(r, BASE_PATH) for r in (saved, unsaved, closed)] == [[6], [], [6]]

"""A helper that reads the agent's app from the agent gets it recorded where the repo builds it:
`fix` adds `self.<attribute> = app` before `return app` in the base agent class's
`setup_webserver`, and nothing else; a second run adds nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfcall_audit.analysis import policy
from selfcall_audit.ftypes import Blocker
from selfcall_audit.migrate import record_app
from selfcall_audit.report.messages import reason

BASE = """\
from fastapi import FastAPI


class SimpleResponsesAPIAgent:
    def setup_webserver(self) -> FastAPI:
        app = FastAPI()

        def route(path):  # a nested function's return is not the method's
            return app

        app.post("/v1/responses")(self.responses)

        # the app the server runs
        return app


def setup_webserver():
    app = FastAPI()
    return app
"""
RECORDED = BASE.replace(
    "        # the app the server runs\n        return app\n",
    "        # the app the server runs\n"
    "        # the in-process helper serves the agent's self-calls with this app\n"
    "        self._webserver_app = app\n"
    "        return app\n",
)
BASES = ("nemo_gym.base_responses_api_agent.SimpleResponsesAPIAgent",)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shipped = tmp_path / "inprocess.py"
    shipped.write_text('APP_ATTRIBUTE = "_webserver_app"\n')
    monkeypatch.setattr(record_app, "_SHIPPED", shipped)
    root = tmp_path / "repo"
    (root / "nemo_gym").mkdir(parents=True)
    (root / "nemo_gym" / "base_responses_api_agent.py").write_text(BASE)
    return root


def test_setup_webserver_records_the_app_before_it_returns_it(repo: Path) -> None:
    [recording] = record_app.record_app(repo, BASES)

    assert recording.path == "nemo_gym/base_responses_api_agent.py"
    assert recording.after.decode() == RECORDED
    assert recording.lines == (15,)


def test_a_method_that_records_it_already_is_left_as_it_is(repo: Path) -> None:
    (repo / "nemo_gym" / "base_responses_api_agent.py").write_text(RECORDED)

    assert record_app.record_app(repo, BASES) == []


def test_nothing_is_recorded_for_a_helper_that_reads_no_attribute(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "inprocess.py").write_text('"""A helper that finds the app otherwise."""\n')

    assert record_app.record_app(repo, BASES) == []


def test_the_analysis_reads_the_attribute_the_shipped_helper_reads() -> None:
    """A `setup_webserver` that records the app by hand leaves the self-calls fixable (see the
    `app_recorded_by_hand` case): the analysis knows where the helper looks, and says so."""
    assert record_app.app_attribute() == policy.APP_ATTRIBUTE
    assert f"`self.{policy.APP_ATTRIBUTE}`" in reason(Blocker("app_not_recorded", "Agent", 3))

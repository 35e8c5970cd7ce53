"""`fix` names the tests that model the HTTP self-call it rewrote, and only those."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfcall_audit.migrate import test_impact
from selfcall_audit.migrate.test_impact import Impact, Rewritten, impacted_tests
from selfcall_audit.report.messages import modelled
from selfcall_audit.workspace.workers import Workers

AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class EchoAgent(SimpleResponsesAPIAgent):
    async def responses(self, request, response, body):
        model = await self.server_client.post(server_name="model", url_path="/v1/responses", json=body)
        return await model.json()

    async def run(self, request, body):
        seeded = await self.server_client.post(server_name="resources", url_path="/seed_session", json={})
        return await self._run_once(body, seeded.cookies)

    async def _run_once(self, body, cookies):
        response = await self.server_client.post(
            server_name=self.config.name, url_path="/v1/responses", json=body, cookies=cookies
        )
        return await response.json()
"""
TESTS = """\
import asyncio
from unittest.mock import AsyncMock

from responses_api_agents.echo.app import EchoAgent


async def test_run_posts_seed_then_self_call(agent):
    await agent.run(request, body)

    paths = [c.kwargs["url_path"] for c in agent.server_client.post.await_args_list]
    assert paths == ["/seed_session", "/v1/responses"]


async def test_run_with_a_routing_fake(agent):
    async def post(*, url_path, **kwargs):
        if url_path.endswith("/v1/responses"):
            return canned
        return seeded

    agent.server_client.post = AsyncMock(side_effect=post)
    assert (await agent.run(request, body)).reward == 1.0


async def test_responses_calls_the_model(agent):
    await agent.responses(request, response, body)

    agent.server_client.post.assert_called_once_with(server_name="model", url_path="/v1/responses", json=body)


async def test_run_returns_the_reward(agent):
    assert (await agent.run(request, body)).reward == 1.0


class TestThroughAHelper:
    async def _go(self, agent):
        return await agent.run(request, body)

    async def test_failure_stops_before_verify(self, agent):
        await self._go(agent)
        agent.server_client.post.assert_any_await(server_name="echo", url_path="/v1/responses", json=body)


def test_the_route_through_a_test_client(client, post_mock):
    client.post("/run", json={})
    post_mock.assert_called_once_with(server_name="echo", url_path="/ng-rollout/0-0/v1/responses")


def test_the_agents_own_route_served(client, agent):
    assert client.post("/ng-rollout/rid/v1/responses", json={}).status_code == 200
    assert asyncio.run(agent.responses(request, response, body)).ok
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "nemo_gym").mkdir(parents=True)
    (root / "nemo_gym" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text('[project]\nname = "toy"\n')
    agent = root / "responses_api_agents" / "echo"
    (agent / "tests").mkdir(parents=True)
    (agent / "app.py").write_text(AGENT)
    (agent / "tests" / "test_app.py").write_text(TESTS)
    return root


ECHO_TESTS = "responses_api_agents/echo/tests/test_app.py"


def test_names_the_tests_that_assert_or_fake_the_self_call_and_not_the_others(repo: Path) -> None:
    found = impacted_tests(
        repo, [Rewritten("responses_api_agents/echo/app.py", "_run_once")], "/v1/responses"
    )

    assert [(t.node_id, t.line, modelled(t.models, t.route)) for t in found] == [
        (
            f"{ECHO_TESTS}::test_run_posts_seed_then_self_call",
            7,
            "asserts that the self-call to /v1/responses went through server_client.post",
        ),
        (
            f"{ECHO_TESTS}::test_run_with_a_routing_fake",
            14,
            "fakes server_client.post for /v1/responses, which the self-call no longer reaches",
        ),
        (
            f"{ECHO_TESTS}::TestThroughAHelper::test_failure_stops_before_verify",
            38,
            "asserts that the self-call to /v1/responses went through server_client.post",
        ),
        (
            f"{ECHO_TESTS}::test_the_route_through_a_test_client",
            43,
            "asserts that the self-call to /v1/responses went through server_client.post",
        ),
    ]


MOCK_CLIENT_TESTS = """\
from unittest.mock import MagicMock

from nemo_gym.server_utils import ServerClient
from responses_api_agents.echo.app import EchoAgent


def make_agent():
    return EchoAgent(config=config, server_client=MagicMock(spec=ServerClient))


async def test_the_clients_answers_in_turn():
    agent = make_agent()
    agent.server_client.post.side_effect = [seeded, canned]
    assert (await agent.run(request, body)).reward == 1.0
    assert agent.server_client.post.call_count == 2


async def test_the_clients_one_answer():
    agent = make_agent()
    agent.server_client.post.return_value.json.return_value = {"reward": 1.0}
    assert (await agent.run(request, body)).reward == 1.0


async def test_the_clients_get_alone():
    agent = make_agent()
    agent.server_client.get.return_value.json.return_value = {"reward": 1.0}
    await agent.run(request, body)
"""


def test_names_the_tests_that_tell_a_mock_clients_post_what_to_answer(repo: Path) -> None:
    """The agent's client is a mock, and the test sets what its `post` answers, in turn or always:
    the self-call took one of those answers, and now asks the agent's app, which the test never
    built."""
    (repo / "responses_api_agents" / "echo" / "tests" / "test_app.py").write_text(MOCK_CLIENT_TESTS)

    found = impacted_tests(
        repo, [Rewritten("responses_api_agents/echo/app.py", "_run_once")], "/v1/responses"
    )

    assert [(t.node_id, t.line, modelled(t.models, t.route)) for t in found] == [
        (
            f"{ECHO_TESTS}::test_the_clients_answers_in_turn",
            11,
            "fakes server_client.post, which answered the self-call too",
        ),
        (
            f"{ECHO_TESTS}::test_the_clients_one_answer",
            18,
            "fakes server_client.post, which answered the self-call too",
        ),
    ]


SERVED_APP_TESTS = """\
from unittest.mock import AsyncMock, MagicMock

from fastapi.testclient import TestClient


def middleware_emulating(agent):
    async def post(server_name, url_path, json=None, **kwargs):
        if url_path.endswith("/v1/responses"):
            try:
                return Canned(await agent.responses(None, None, json))
            except Exception as error:  # what the exception middleware answers
                return Canned(repr(error), status=500)
        return Canned({})

    agent.server_client = MagicMock(post=AsyncMock(side_effect=post))
    return agent


def plainly_routed(agent):
    async def post(server_name, url_path, json=None, **kwargs):
        if url_path.endswith("/v1/responses"):
            return Canned(await agent.responses(None, None, json))
        return Canned({})

    agent.server_client = MagicMock(post=AsyncMock(side_effect=post))
    return agent


def collect(client, rows):
    return [client.post(row["path"], json=row).json() for row in rows]


def test_a_failed_loop_reports_its_cause(agent):
    client = TestClient(middleware_emulating(agent).setup_webserver())
    failed, = collect(client, [{"path": "/run", "fail": True}])
    assert "boom" in failed["error"]


def test_a_failed_loop_is_a_failure_row(agent):
    client = TestClient(middleware_emulating(agent).setup_webserver())
    assert client.post("/run", json={"fail": True}).json()["reward"] == 0.0


def test_the_app_with_the_exception_middleware(agent):
    app = middleware_emulating(agent).setup_webserver()
    agent.setup_exception_middleware(app)
    assert "boom" in TestClient(app).post("/run", json={"fail": True}).json()["error"]


def test_a_fake_that_lets_errors_through(agent):
    client = TestClient(plainly_routed(agent).setup_webserver())
    assert "boom" in client.post("/run", json={"fail": True}).json()["error"]


async def test_run_called_directly(agent):
    assert "boom" in (await middleware_emulating(agent).run(None, {"fail": True}))["error"]
"""


def test_names_a_test_that_serves_the_app_without_the_middleware_its_fake_emulated(repo: Path) -> None:
    (repo / "responses_api_agents" / "echo" / "tests" / "test_served.py").write_text(SERVED_APP_TESTS)

    found = impacted_tests(
        repo, [Rewritten("responses_api_agents/echo/app.py", "_run_once")], "/v1/responses"
    )

    served = [(t.node_id, t.line, modelled(t.models, t.route)) for t in found if "test_served" in t.node_id]
    assert served == [
        (
            "responses_api_agents/echo/tests/test_served.py::test_a_failed_loop_reports_its_cause",
            33,
            "serves the agent's app without the exception middleware its fake of /v1/responses "
            "emulated, and checks the error text",
        )
    ]


def test_tests_elsewhere_count_when_they_import_the_rewritten_module(repo: Path) -> None:
    (repo / "tests").mkdir()
    (repo / "tests" / "test_echo.py").write_text(TESTS)
    (repo / "responses_api_agents" / "other" / "tests").mkdir(parents=True)
    (repo / "responses_api_agents" / "other" / "tests" / "test_app.py").write_text(
        TESTS.replace("responses_api_agents.echo.app", "responses_api_agents.other.app")
    )

    found = impacted_tests(
        repo, [Rewritten("responses_api_agents/echo/app.py", "_run_once")], "/v1/responses"
    )

    files = sorted({t.node_id.split("::")[0] for t in found})
    assert files == [ECHO_TESTS, "tests/test_echo.py"]


def test_nothing_rewritten_names_nothing(repo: Path) -> None:
    assert impacted_tests(repo, [], "/v1/responses") == []


def test_a_test_file_that_does_not_parse_is_skipped(repo: Path) -> None:
    (repo / "responses_api_agents" / "echo" / "tests" / "test_broken.py").write_text("def test_x(:\n")

    found = impacted_tests(
        repo, [Rewritten("responses_api_agents/echo/app.py", "_run_once")], "/v1/responses"
    )

    assert len(found) == 4


@pytest.mark.slow
def test_fix_lists_them_after_its_rewrites(repo: Path, command) -> None:
    done = command("fix", "--no-cache", cwd=repo)

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = lines.index("4 tests modelled the HTTP self-call:")
    assert lines[start + 1] == (
        f"  {ECHO_TESTS}::test_run_posts_seed_then_self_call: "
        "asserts that the self-call to /v1/responses went through server_client.post; "
        "now fakes the helper, sending the self-call to its server client as before"
    )
    assert len(lines) == start + 5


@pytest.mark.slow
def test_from_a_subfolder_the_tests_are_named_from_there_like_the_rewritten_files(
    repo: Path, command
) -> None:
    done = command("fix", "--no-cache", "--diff", cwd=repo / "responses_api_agents")

    lines = done.stderr.splitlines()
    assert "echo/app.py:14: would rewrite self-call to responses_in_process" in lines
    start = lines.index("4 tests modelled the HTTP self-call:")
    assert lines[start + 1].startswith("  echo/tests/test_app.py::test_run_posts_seed_then_self_call: ")


@pytest.mark.slow
def test_a_second_fix_has_nothing_to_name(repo: Path, command) -> None:
    command("fix", "--no-cache", repo)

    again = command("fix", "--no-cache", repo)

    assert "modelled the HTTP self-call" not in again.stdout


TWO_AGENTS = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, request, body):
        return await self._run_once(body)

    async def _run_once(self, body):
        response = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
        return await response.json()


class QuietAgent(SimpleResponsesAPIAgent):
    async def run(self, request, body):
        return await self.score(body)
"""


def test_a_method_name_two_classes_share_reaches_the_rewritten_method_through_either(repo: Path) -> None:
    (repo / "responses_api_agents" / "echo" / "app.py").write_text(TWO_AGENTS)

    found = impacted_tests(
        repo, [Rewritten("responses_api_agents/echo/app.py", "_run_once")], "/v1/responses"
    )

    # EchoAgent.run reaches the self-call, though the module's last `run` (QuietAgent's) does not
    assert f"{ECHO_TESTS}::test_run_posts_seed_then_self_call" in [t.node_id for t in found]


ECHO_APP = "responses_api_agents/echo/app.py"


def test_the_search_started_before_the_planning_answers_for_the_methods_it_was_started_for(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fix` searches for the tests of the calls it means to rewrite while it plans them; asked for
    the methods it did rewrite, the search answers if they are the same, else searches again."""
    searched: list[list[Rewritten]] = []

    def recorded(root: Path, methods: list[Rewritten], *rest: object) -> list:
        searched.append(list(methods))
        return impacted_tests(root, methods, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(test_impact, "impacted_tests", recorded)
    meant = [Rewritten(ECHO_APP, "run"), Rewritten(ECHO_APP, "_run_once")]
    done = [Rewritten(ECHO_APP, "responses")]
    started, other = (
        Impact(repo, meant, "/v1/responses", (), Workers(1)),
        Impact(repo, meant, "/v1/responses", (), Workers(1)),
    )

    assert started.of(meant) == impacted_tests(repo, meant, "/v1/responses")
    assert searched == [meant]
    assert other.of(done) == impacted_tests(repo, done, "/v1/responses")
    assert searched == [meant, meant, done]  # the search started, then the methods rewritten


REBOUND_AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class ReboundAgent(SimpleResponsesAPIAgent):
    async def run(self, request, body, delegate=None):
        response = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
        if delegate is not None:
            self = delegate
        return await response.json()
"""
REBOUND_TESTS = """\
async def test_run_posts_to_itself(agent):
    await agent.run(request, body)

    agent.server_client.post.assert_awaited_once_with(server_name="rebound", url_path="/v1/responses", json=body)
"""


@pytest.mark.slow
def test_the_tests_of_a_call_the_rewrite_refused_are_not_named(repo: Path, command) -> None:
    """The search began with the calls meant to be rewritten, the rebound agent's among them;
    the rewrite refuses that one, so its test is not named (in worker processes or one)."""
    rebound = repo / "responses_api_agents" / "rebound"
    (rebound / "tests").mkdir(parents=True)
    (rebound / "app.py").write_text(REBOUND_AGENT)
    (rebound / "tests" / "test_app.py").write_text(REBOUND_TESTS)

    for jobs in ("2", "1"):
        done = command("fix", "--no-cache", "--diff", "--jobs", jobs, cwd=repo)

        lines = done.stderr.splitlines()
        assert any("rebound/app.py:6:" in line and "`self` is rebound" in line for line in lines), done.stderr
        assert "4 tests modelled the HTTP self-call:" in lines
        assert not [line for line in lines if "rebound/tests" in line]

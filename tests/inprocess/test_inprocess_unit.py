"""Unit tests of ``responses_in_process`` without a server: the app the agent records, the
response object, the request it builds, cancellation and what happens when the app fails."""

# ruff: noqa: B008 - ``body: Model = Body()`` is the FastAPI signature of the handlers

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from fastapi import BackgroundTasks, Body, FastAPI, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from multidict import CIMultiDictProxy
from pydantic import BaseModel, ConfigDict
from starlette.middleware.sessions import SessionMiddleware

from selfcall_audit.inprocess import APP_ATTRIBUTE, InProcessResponse, responses_in_process

ROUTES = ("/v1/responses", "/ng-rollout/{rollout_id}/v1/responses")


class Config(BaseModel):
    name: str = "unit"
    host: str = "127.0.0.1"
    port: int = 8123


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: str
    temperature: float = 1.0
    tags: list[str] = []


class Routed(BaseModel):
    """An agent whose ``setup_webserver`` registers ``responses`` on the routes and records the
    app, as the base of a migrated repo does."""

    config: Config = Config()
    _webserver_app: FastAPI | None = None

    def setup_webserver(self) -> FastAPI:
        app = FastAPI()
        self._webserver_app = app
        for route in ROUTES:
            app.post(route)(self.responses)  # type: ignore[attr-defined]
        return app


class Echo(Routed):
    """Reports what the handler received; NeMo Gym's session middleware pair."""

    seen: dict[str, Any] = {}

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()

        @app.middleware("http")
        async def add_session_id(request: Request, call_next: Any) -> Any:
            request.session["session_id"] = request.session.get("session_id", "fixed")
            return await call_next(request)

        key = f"Echo___{self.config.name}"
        app.add_middleware(SessionMiddleware, secret_key=key, session_cookie=key)
        return app

    async def responses(self, request: Request, response: Response, body: Params = Body()) -> dict:
        self.seen = {"body": body, "raw": await request.body()}
        body.tags.append("mutated by handler")
        if body.input == "fail":
            raise RuntimeError("nope")
        response.set_cookie("made", "here")
        return {"input": body.input, "tags": body.tags}


def served(agent: Routed) -> Routed:
    """The agent with its app built, and completed as NeMo Gym's ``run_webserver`` completes it."""
    app = agent.setup_webserver()

    @app.middleware("http")
    async def answer_errors(request: Request, call_next: Any) -> Any:
        try:
            return await call_next(request)
        except Exception as error:
            return JSONResponse(content=repr(error), status_code=500)

    return agent


def call(agent: Any, url_path: str = "/v1/responses", **kwargs: Any) -> InProcessResponse:
    return asyncio.run(responses_in_process(agent, url_path=url_path, **kwargs))


def in_loop(coro_fn: Any) -> Any:
    return asyncio.run(coro_fn())


# ------------------------------------------------------------------------------------------
# The app
# ------------------------------------------------------------------------------------------


def test_the_app_setup_webserver_recorded_is_called_with_what_was_added_after() -> None:
    agent = served(Echo())
    assert getattr(agent, APP_ATTRIBUTE) is agent._webserver_app
    failed = call(agent, json={"input": "fail"})
    # The middleware the server added to the recorded app after setup_webserver() answered it.
    assert (failed.status, asyncio.run(failed.json())) == (500, "RuntimeError('nope')")


def test_an_agent_without_a_recorded_app_fails_clearly_and_builds_nothing() -> None:
    class Unbuilt(Routed):
        builds: int = 0

        def setup_webserver(self) -> FastAPI:
            self.builds += 1
            return super().setup_webserver()

        async def responses(self, body: dict = Body()) -> dict:
            return body

    agent = Unbuilt()
    with pytest.raises(RuntimeError, match=r"Unbuilt has no app to call in-process: .*self\._webserver_app"):
        call(agent, json={})
    assert agent.builds == 0


def test_the_app_built_last_is_the_one_called() -> None:
    class Titled(Routed):
        async def responses(self, request: Request, body: dict = Body()) -> dict:
            return {"app": id(request.app)}

    agent = Titled()
    agent.setup_webserver()
    second = agent.setup_webserver()
    assert asyncio.run(call(agent, json={}).json()) == {"app": id(second)}


# ------------------------------------------------------------------------------------------
# The response object
# ------------------------------------------------------------------------------------------


def test_the_response_offers_what_agent_code_uses_of_aiohttps() -> None:
    response = call(served(Echo()), json={"input": "hi"})
    public = {name for name in dir(response) if not name.startswith("_")}
    assert public == {
        "status",
        "reason",
        "ok",
        "headers",
        "cookies",
        "url",
        "request_info",  # what ClientResponseError carries
        "content",
        "read",
        "text",
        "json",
        "raise_for_status",
        "release",
    }


def test_body_reads_follow_aiohttp() -> None:
    agent = served(Echo())

    async def go() -> None:
        response = await responses_in_process(agent, url_path="/v1/responses", json={"input": "hi"})
        assert await response.content.read(2) == b'{"'
        assert await response.read() == b'input":"hi","tags":["mutated by handler"]}'
        assert await response.read() == b'input":"hi","tags":["mutated by handler"]}'
        assert await response.content.read() == b""

        response = await responses_in_process(agent, url_path="/v1/responses", json={"input": "hi"})
        assert await response.json() == {"input": "hi", "tags": ["mutated by handler"]}
        assert await response.text() == '{"input":"hi","tags":["mutated by handler"]}'
        assert await response.content.read() == b""  # read() drained the stream

    in_loop(go)


def test_json_checks_the_media_type_like_aiohttp() -> None:
    class Plain(Routed):
        async def responses(self, body: dict = Body()) -> PlainTextResponse:
            return PlainTextResponse('{"a": "é"}\n', headers={"content-type": "text/plain; charset=latin-1"})

    agent = Plain()
    agent.setup_webserver()

    async def go() -> None:
        response = await responses_in_process(agent, url_path="/v1/responses", json={})
        with pytest.raises(
            aiohttp.ContentTypeError, match="unexpected mimetype: text/plain; charset=latin-1"
        ):
            await response.json()
        assert await response.json(content_type=None) == {"a": "Ã©"}  # decoded as declared
        assert await response.json(content_type=None, encoding="utf-8") == {"a": "é"}

    in_loop(go)


def test_release_drops_an_unread_body_like_aiohttp() -> None:
    agent = served(Echo())

    async def go() -> None:
        response = await responses_in_process(agent, url_path="/v1/responses", json={"input": "hi"})
        await response.release()  # awaitable, and also fine to call without awaiting
        response.release()
        with pytest.raises(aiohttp.ClientConnectionError, match="Connection closed"):
            await response.read()

        response = await responses_in_process(agent, url_path="/v1/responses", json={"input": "hi"})
        body = await response.read()
        response.release()
        assert json.loads(body) == await response.json()  # json() uses the cached body
        with pytest.raises(aiohttp.ClientConnectionError):
            await response.read()  # aiohttp refuses read() once released

    in_loop(go)


def test_raise_for_status_outside_and_inside_async_with() -> None:
    agent = served(Echo())

    async def go() -> None:
        response = await responses_in_process(agent, url_path="/v1/responses", json={"input": "fail"})
        assert (response.status, response.reason, response.ok) == (500, "Internal Server Error", False)
        with pytest.raises(aiohttp.ClientResponseError) as raised:
            response.raise_for_status()
        error = raised.value
        assert (error.status, error.message) == (500, "Internal Server Error")
        assert str(error.request_info.real_url) == "http://127.0.0.1:8123/v1/responses"
        assert error.request_info.method == "POST"
        assert error.headers is not None and error.headers["content-type"] == "application/json"
        with pytest.raises(aiohttp.ClientConnectionError):
            await response.read()  # released by raise_for_status, as aiohttp does

        async with await responses_in_process(
            agent, url_path="/v1/responses", json={"input": "fail"}
        ) as inside:
            with pytest.raises(aiohttp.ClientResponseError):
                inside.raise_for_status()
            assert await inside.json() == "RuntimeError('nope')"

        ok = await responses_in_process(agent, url_path="/v1/responses", json={"input": "hi"})
        assert ok.raise_for_status() is None and ok.ok and ok.reason == "OK"

    in_loop(go)


def test_headers_cookies_url_and_repr() -> None:
    response = call(
        served(Echo()),
        "/ng-rollout/r1/v1/responses?x=1#top",
        json={"input": "hi"},
        cookies={"Echo___unit": "bad"},
    )
    assert isinstance(response.headers, CIMultiDictProxy)
    assert response.headers["Content-Type"] == response.headers["content-type"] == "application/json"
    assert len(response.headers.getall("set-cookie")) == 2
    assert sorted(response.cookies) == ["Echo___unit", "made"]
    assert response.cookies["made"].value == "here" and response.cookies["made"]["path"] == "/"
    assert response.cookies["Echo___unit"]["httponly"] is True
    assert str(response.url) == "http://127.0.0.1:8123/ng-rollout/r1/v1/responses?x=1"
    assert (
        repr(response) == "<InProcessResponse(http://127.0.0.1:8123/ng-rollout/r1/v1/responses?x=1) [200 OK]>"
    )


# ------------------------------------------------------------------------------------------
# The request
# ------------------------------------------------------------------------------------------


def test_caller_objects_are_never_mutated_and_unset_fields_are_not_sent() -> None:
    agent = served(Echo())
    as_dict = {"input": "hi", "tags": ["a"]}
    as_model = Params(input="hi", tags=["a"])
    call(agent, json=as_dict)
    assert as_dict == {"input": "hi", "tags": ["a"]}
    call(agent, json=as_model)
    assert as_model.tags == ["a"]
    assert agent.seen["raw"] == b'{"input":"hi","tags":["a"]}'  # exclude_unset: temperature not sent
    assert agent.seen["body"].temperature == 1.0


def test_handler_runs_in_a_task_of_its_own_from_an_empty_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    class Setter(Routed):
        async def responses(self, body: dict = Body()) -> dict:
            seen = var.get()
            var.set("handler")
            return {"seen": seen, "task": id(asyncio.current_task())}

    agent = Setter()
    agent.setup_webserver()

    async def go() -> None:
        var.set("caller")
        response = await responses_in_process(agent, url_path="/v1/responses", json={"a": 1})
        answer = await response.json()
        assert answer["seen"] == "unset" and var.get() == "caller"
        assert answer["task"] != id(asyncio.current_task())

    in_loop(go)


def test_the_process_that_makes_the_call_answers_it_with_the_agent_it_holds() -> None:
    """With several worker processes (NeMo Gym's `num_workers`), any of them may answer an HTTP
    self-call; the helper's is answered where it is made, by the agent object that made it."""

    class Where(Routed):
        async def responses(self, body: dict = Body()) -> dict:
            return {"pid": os.getpid(), "agent": id(self)}

    agent = Where()
    agent.setup_webserver()

    async def go() -> Any:
        response = await responses_in_process(agent, url_path="/v1/responses", json={})
        return await response.json()

    assert in_loop(go) == {"pid": os.getpid(), "agent": id(agent)}


def test_non_ascii_paths_and_queries_are_escaped_like_a_client_would() -> None:
    class Paths(Routed):
        async def responses(self, request: Request, body: dict = Body()) -> dict:
            return {
                "id": request.path_params["rollout_id"],
                "q": request.query_params["q"],
                "raw_path": request.scope["raw_path"].decode(),
            }

    agent = Paths()
    agent.setup_webserver()
    response = call(agent, "/ng-rollout/é-1/v1/responses?q=ü", json={"a": 1})
    assert asyncio.run(response.json()) == {
        "id": "é-1",
        "q": "ü",
        "raw_path": "/ng-rollout/%C3%A9-1/v1/responses",
    }
    assert str(response.url) == "http://127.0.0.1:8123/ng-rollout/%C3%A9-1/v1/responses?q=%C3%BC"


@pytest.mark.parametrize("value", ["a\r\nb", "a\x00b", "a\x01b", "a\x7fb"])
def test_control_characters_in_headers_are_refused_as_recent_aiohttp_refuses_them(value: str) -> None:
    with pytest.raises(ValueError, match="'X-Note': a control character, forbidden in headers"):
        call(served(Echo()), json={"input": "x"}, headers={"X-Note": value})
    assert call(served(Echo()), json={"input": "x"}, headers={"X-Note": "a\tb"}).ok  # a tab is allowed


def test_unknown_paths_answer_as_the_app_does() -> None:
    response = call(served(Echo()), "/v1/nothing-here", json={"input": "x"})
    assert (response.status, asyncio.run(response.json())) == (404, {"detail": "Not Found"})


# ------------------------------------------------------------------------------------------
# Cancellation
# ------------------------------------------------------------------------------------------


def test_a_cancelled_caller_leaves_the_handler_running_and_tells_it_the_client_went_away() -> None:
    """As uvicorn does when the client goes away: not cancelled; ``receive()`` says disconnect."""
    seen: dict[str, Any] = {}

    class Slow(Routed):
        async def responses(self, request: Request, body: dict = Body()) -> dict:
            seen["started"] = True
            await seen["release"].wait()
            seen["disconnected"] = await request.is_disconnected()
            seen["finished"] = True
            return body

    agent = Slow()
    agent.setup_webserver()

    async def go() -> None:
        seen["release"] = asyncio.Event()
        caller = asyncio.ensure_future(responses_in_process(agent, url_path="/v1/responses", json={"a": 1}))
        while not seen.get("started"):
            await asyncio.sleep(0.001)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        seen["release"].set()
        while not seen.get("finished"):
            await asyncio.sleep(0.001)

    in_loop(go)
    assert (seen["disconnected"], seen["finished"]) == (True, True)


def test_what_the_app_still_runs_when_the_callers_loop_ends_is_cancelled_and_logged_as_uvicorn_does(
    server_log: list[logging.LogRecord],
) -> None:
    """Documented difference: over HTTP the server runs a request to its end whatever becomes of
    the caller's event loop. In process the app runs in the caller's loop, so what it still runs
    once the answer is complete (a background task) is cancelled when that loop ends (a script's
    ``asyncio.run`` returning), and logged as uvicorn logs a request it cancels at shutdown."""
    ran: dict[str, bool] = {}

    class Later(Routed):
        async def responses(self, background: BackgroundTasks, body: dict = Body()) -> dict:
            background.add_task(self.finish_later)
            return body

        async def finish_later(self) -> None:
            ran["started"] = True
            await asyncio.Event().wait()  # never set: runs until cancelled
            ran["finished"] = True

    agent = Later()
    agent.setup_webserver()

    async def go() -> int:
        response = await responses_in_process(agent, url_path="/v1/responses", json={"a": 1})
        while not ran.get("started"):
            await asyncio.sleep(0)
        return response.status

    assert asyncio.run(go()) == 200
    assert ran == {"started": True}
    assert [(r.getMessage(), r.exc_info and r.exc_info[0]) for r in server_log] == [
        ("Exception in ASGI application\n", asyncio.CancelledError)
    ]


# ------------------------------------------------------------------------------------------
# When the app fails
# ------------------------------------------------------------------------------------------


class NoMiddleware(Routed):
    """An app without an exception middleware: Starlette answers 500 and uvicorn logs the error."""

    async def responses(self, body: dict = Body()) -> dict:
        raise LookupError("gone")


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def server_log() -> Iterator[list[logging.LogRecord]]:
    """What uvicorn's error logger gets at level ERROR (uvicorn's own logging config, which the
    servers of other tests load, stops it propagating and may raise its level)."""
    handler, logger = Records(), logging.getLogger("uvicorn.error")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.ERROR)
    yield handler.records
    logger.setLevel(level)
    logger.removeHandler(handler)


def test_an_escaping_exception_is_answered_and_logged_as_uvicorn_does(
    server_log: list[logging.LogRecord],
) -> None:
    agent = NoMiddleware()
    agent.setup_webserver()
    response = call(agent, json={"a": 1})
    assert (response.status, asyncio.run(response.read())) == (500, b"Internal Server Error")
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert [(r.getMessage(), r.exc_info and r.exc_info[0]) for r in server_log] == [
        ("Exception in ASGI application\n", LookupError)
    ]


async def no_answer(scope: Any, receive: Any, send: Any) -> None:
    """An app that returns without answering."""


async def half_an_answer(scope: Any, receive: Any, send: Any) -> None:
    """An app that starts its answer and returns before the end of the body."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{", "more_body": True})


def test_an_app_that_never_answers_gets_uvicorns_500(server_log: list[logging.LogRecord]) -> None:
    agent = Routed()
    agent._webserver_app = no_answer  # type: ignore[assignment]
    response = call(agent, json={"a": 1})
    assert (response.status, response.headers["content-type"]) == (500, "text/plain; charset=utf-8")
    assert [r.getMessage() for r in server_log] == ["ASGI callable returned without starting response."]


def test_an_answer_cut_short_fails_in_the_caller_as_a_payload_error() -> None:
    agent = Routed()
    agent._webserver_app = half_an_answer  # type: ignore[assignment]
    with pytest.raises(aiohttp.ClientPayloadError, match="Response payload is not completed"):
        call(agent, json={"a": 1})

"""Unit tests of ``responses_in_process`` without a server: the response object, finding the
agent's app, the request it builds and what happens when the app fails."""

# ruff: noqa: B008 - ``body: Model = Body()`` is the FastAPI signature of the handlers

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import json
import logging
import math
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
import uvicorn
from fastapi import Body, FastAPI, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from multidict import CIMultiDictProxy
from pydantic import BaseModel, ConfigDict
from starlette.middleware.sessions import SessionMiddleware

from selfcall_audit import inprocess
from selfcall_audit.inprocess import InProcessResponse, responses_in_process

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
    """An agent whose ``setup_webserver`` registers ``responses`` on the routes; no app serves it
    until a call builds one."""

    builds: int = 0

    def setup_webserver(self) -> FastAPI:
        self.builds += 1
        app = FastAPI()
        for route in ROUTES:
            app.post(route)(self.responses)  # type: ignore[attr-defined]
        return app


class Echo(Routed):
    """Reports what the handler received; NeMo Gym's session middleware pair."""

    config: Config = Config()
    seen: dict[str, Any] = {}

    def get_session_middleware_key(self) -> str:
        return f"Echo___{self.config.name}"

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()

        @app.middleware("http")
        async def add_session_id(request: Request, call_next: Any) -> Any:
            request.session["session_id"] = request.session.get("session_id", "fixed")
            return await call_next(request)

        key = self.get_session_middleware_key()
        app.add_middleware(SessionMiddleware, secret_key=key, session_cookie=key)
        return app

    def setup_exception_middleware(self, app: FastAPI) -> None:
        @app.middleware("http")
        async def answer_errors(request: Request, call_next: Any) -> Any:
            try:
                return await call_next(request)
            except Exception as error:
                return JSONResponse(content=repr(error), status_code=500)

    async def responses(self, request: Request, response: Response, body: Params = Body()) -> dict:
        self.seen = {"body": body, "raw": await request.body(), "task": asyncio.current_task()}
        body.tags.append("mutated by handler")
        if body.input == "fail":
            raise RuntimeError("nope")
        response.set_cookie("made", "here")
        return {"input": body.input, "tags": body.tags}


def call(agent: Any, url_path: str = "/v1/responses", **kwargs: Any) -> InProcessResponse:
    return asyncio.run(responses_in_process(agent, url_path=url_path, **kwargs))


def in_loop(coro_fn: Any) -> Any:
    return asyncio.run(coro_fn())


# ------------------------------------------------------------------------------------------
# The response object
# ------------------------------------------------------------------------------------------


def test_body_reads_follow_aiohttp() -> None:
    async def go() -> None:
        response = await responses_in_process(Echo(), url_path="/v1/responses", json={"input": "hi"})
        assert await response.content.read(2) == b'{"'
        assert await response.read() == b'input":"hi","tags":["mutated by handler"]}'
        assert await response.read() == b'input":"hi","tags":["mutated by handler"]}'
        assert await response.content.read() == b""

        response = await responses_in_process(Echo(), url_path="/v1/responses", json={"input": "hi"})
        assert await response.json() == {"input": "hi", "tags": ["mutated by handler"]}
        assert await response.text() == '{"input":"hi","tags":["mutated by handler"]}'
        assert await response.content.read() == b""  # read() drained the stream

        response = await responses_in_process(Echo(), url_path="/v1/responses", json={"input": "hi"})
        assert [chunk async for chunk in response.content.iter_chunked(20)] == [
            b'{"input":"hi","tags"',
            b':["mutated by handle',
            b'r"]}',
        ]
        assert response.content.at_eof() and response.closed
        with pytest.raises(asyncio.IncompleteReadError):
            await response.content.readexactly(1)

    in_loop(go)


def test_json_checks_the_media_type_like_aiohttp() -> None:
    class Plain(Routed):
        async def responses(self, body: dict = Body()) -> PlainTextResponse:
            return PlainTextResponse('{"a": 1}\n')

    async def go() -> None:
        response = await responses_in_process(Plain(), url_path="/v1/responses", json={})
        with pytest.raises(aiohttp.ContentTypeError, match="unexpected mimetype: text/plain; charset=utf-8"):
            await response.json()
        assert await response.json(content_type=None) == {"a": 1}
        assert response.content_type == "text/plain" and response.charset == "utf-8"
        assert [line async for line in response.content] == []  # read() above drained it

    in_loop(go)


def test_release_drops_an_unread_body_like_aiohttp() -> None:
    async def go() -> None:
        response = await responses_in_process(Echo(), url_path="/v1/responses", json={"input": "hi"})
        await response.release()  # awaitable, and also fine to call without awaiting
        response.release()
        with pytest.raises(aiohttp.ClientConnectionError, match="Connection closed"):
            await response.read()

        response = await responses_in_process(Echo(), url_path="/v1/responses", json={"input": "hi"})
        body = await response.read()
        response.release()
        assert json.loads(body) == await response.json()  # json() uses the cached body
        with pytest.raises(aiohttp.ClientConnectionError):
            await response.read()  # aiohttp refuses read() once released

    in_loop(go)


def test_raise_for_status_outside_and_inside_async_with() -> None:
    async def go() -> None:
        response = await responses_in_process(Echo(), url_path="/v1/responses", json={"input": "fail"})
        assert (response.status, response.reason, response.ok) == (500, "Internal Server Error", False)
        with pytest.raises(aiohttp.ClientResponseError) as raised:
            response.raise_for_status()
        error = raised.value
        assert (error.status, error.message) == (500, "Internal Server Error")
        assert str(error.request_info.real_url) == "http://127.0.0.1:8123/v1/responses"
        assert error.request_info.method == "POST"
        assert error.headers["content-type"] == "application/json"
        assert isinstance(error.__cause__, RuntimeError)
        with pytest.raises(aiohttp.ClientConnectionError):
            await response.read()  # released by raise_for_status, as aiohttp does

        async with await responses_in_process(
            Echo(), url_path="/v1/responses", json={"input": "fail"}
        ) as inside:
            with pytest.raises(aiohttp.ClientResponseError):
                inside.raise_for_status()
            assert await inside.json() == "RuntimeError('nope')"

        ok = await responses_in_process(Echo(), url_path="/v1/responses", json={"input": "hi"})
        assert ok.raise_for_status() is None and ok.ok and ok.reason == "OK"

    in_loop(go)


def test_headers_cookies_url_and_repr() -> None:
    response = call(
        Echo(), "/ng-rollout/r1/v1/responses?x=1", json={"input": "hi"}, cookies={"Echo___unit": "bad"}
    )
    assert isinstance(response.headers, CIMultiDictProxy)
    assert response.headers["Content-Type"] == response.headers["content-type"] == "application/json"
    assert len(response.headers.getall("set-cookie")) == 2
    assert sorted(response.cookies) == ["Echo___unit", "made"]
    assert response.cookies["made"].value == "here" and response.cookies["made"]["path"] == "/"
    assert response.cookies["Echo___unit"]["httponly"] is True
    assert str(response.url) == "http://127.0.0.1:8123/ng-rollout/r1/v1/responses?x=1"
    assert response.method == "POST" and response.history == ()
    assert (
        repr(response) == "<InProcessResponse(http://127.0.0.1:8123/ng-rollout/r1/v1/responses?x=1) [200 OK]>"
    )


def test_agent_without_host_or_session() -> None:
    class Bare(Routed):
        async def responses(self, request: Request, body: dict = Body()) -> dict:
            return {
                "url": str(request.url),
                "has_session": "session" in request.scope,
                "client": request.client,
            }

    response = call(Bare(), json={})
    assert asyncio.run(response.json()) == {"url": "/v1/responses", "has_session": False, "client": None}
    assert not response.cookies and "vary" not in response.headers
    assert str(response.url) == "http://in-process/v1/responses"


# ------------------------------------------------------------------------------------------
# Finding the app
# ------------------------------------------------------------------------------------------


class Served(BaseModel):
    """An agent whose app is built by the test, as a server (or NeMo Gym's own tests) builds it."""

    async def responses(self, request: Request, body: dict = Body()) -> dict:
        return {"app": request.app.title}


class Relay(Served):
    """An agent whose ``/run`` makes the self-call, as NeMo Gym's agents do, and that can build
    its own app."""

    builds: int = 0

    def setup_webserver(self) -> FastAPI:
        self.builds += 1
        app = FastAPI(title="built")
        app.post("/v1/responses")(self.responses)
        app.post("/run")(self.run)
        return app

    async def run(self, body: dict = Body()) -> dict:
        return await (await responses_in_process(self, url_path="/v1/responses", json={})).json()


def app_serving(agent: Relay, title: str) -> FastAPI:
    app = FastAPI(title=title)
    app.post("/v1/responses")(agent.responses)
    app.post("/run")(agent.run)
    return app


@contextlib.asynccontextmanager
async def uvicorn_serving(*apps: FastAPI) -> AsyncIterator[None]:
    """Serve ``apps`` under uvicorn on 127.0.0.1, in the running event loop, as a server process does."""
    servers = [
        uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical", lifespan="off"))
        for app in apps
    ]
    tasks = [asyncio.create_task(server.serve()) for server in servers]
    while not all(server.started for server in servers):
        await asyncio.sleep(0.005)
    try:
        yield
    finally:  # last started, first stopped: each server restores the signal handlers it found
        for server, task in reversed(list(zip(servers, tasks, strict=True))):
            server.should_exit = True
            await task


@pytest.mark.slow
def test_the_app_a_server_on_the_loop_serves_is_used_and_held_weakly() -> None:
    agent, other = Served(), Served()
    first, second = FastAPI(title="first"), FastAPI(title="second")
    first.post("/v1/responses")(agent.responses)
    second.post("/v1/responses")(other.responses)

    async def outside_any_request(*apps: FastAPI) -> list[Any]:
        async with uvicorn_serving(*apps):
            calls = [responses_in_process(a, url_path="/v1/responses", json={}) for a in (agent, other)]
            return [await (await c).json() for c in calls]

    answers = asyncio.run(outside_any_request(first, second))
    assert answers == [{"app": "first"}, {"app": "second"}]
    del first  # the helper holds an app a server serves weakly: once the app is gone, so is the answer
    gc.collect()
    with pytest.raises(TypeError, match="no app serves Served's routes"):
        call(agent, json={})


def test_a_call_made_in_a_request_uses_that_requests_app() -> None:
    agent = Relay()
    other, serving = app_serving(agent, "other"), app_serving(agent, "serving")
    assert asyncio.run(post_over_asgi(serving, "/run")) == {"app": "serving"}
    assert asyncio.run(post_over_asgi(other, "/run")) == {"app": "other"}
    assert agent.builds == 0


def test_a_built_app_stands_in_until_a_served_one_answers() -> None:
    agent = Relay()
    assert asyncio.run(agent.run({})) == {"app": "built"}
    assert asyncio.run(agent.run({})) == {"app": "built"}
    serving = app_serving(agent, "serving")
    assert asyncio.run(post_over_asgi(serving, "/run")) == {"app": "serving"}
    assert asyncio.run(agent.run({})) == {"app": "serving"}  # outside a request: the served one now
    assert agent.builds == 1


def test_finding_the_app_never_scans_the_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_scan(*args: Any) -> list[Any]:
        raise AssertionError("the heap was scanned")

    monkeypatch.setattr(gc, "get_objects", no_scan)
    monkeypatch.setattr(gc, "get_referrers", no_scan)
    agent = Relay()
    assert asyncio.run(agent.run({})) == {"app": "built"}
    assert asyncio.run(post_over_asgi(app_serving(agent, "serving"), "/run")) == {"app": "serving"}


async def post_over_asgi(app: Any, path: str) -> Any:
    """POST ``{}`` to ``app`` as a server would, without the helper."""
    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b""}
    scope |= {"headers": [(b"content-type", b"application/json")], "root_path": "", "http_version": "1.1"}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    assert sent[0]["status"] == 200, sent
    return json.loads(b"".join(m.get("body", b"") for m in sent[1:]))


def test_without_an_app_one_is_built_once_as_run_webserver_does() -> None:
    agent = Echo()
    assert call(agent, json={"input": "hi"}).status == 200
    failed = call(agent, json={"input": "fail"})
    assert agent.builds == 1
    assert (failed.status, asyncio.run(failed.json())) == (500, "RuntimeError('nope')")  # its middleware


def test_agents_no_app_serves_fail_clearly() -> None:
    class Bare(BaseModel):
        async def responses(self, body: dict = Body()) -> dict:
            return body

    class Elsewhere(BaseModel):
        def setup_webserver(self) -> FastAPI:
            return FastAPI()

    with pytest.raises(TypeError, match="no app serves Bare's routes and it has no setup_webserver"):
        call(Bare(), json={})
    with pytest.raises(TypeError, match="returned an app without the agent's routes"):
        call(Elsewhere(), json={})


# ------------------------------------------------------------------------------------------
# The request
# ------------------------------------------------------------------------------------------


def test_caller_objects_are_never_mutated_and_unset_fields_are_not_sent() -> None:
    agent = Echo()
    as_dict = {"input": "hi", "tags": ["a"]}
    as_model = Params(input="hi", tags=["a"])
    call(agent, json=as_dict)
    assert as_dict == {"input": "hi", "tags": ["a"]}
    call(agent, json=as_model)
    assert as_model.tags == ["a"]
    assert agent.seen["raw"] == b'{"input":"hi","tags":["a"]}'  # exclude_unset: temperature not sent
    assert agent.seen["body"].temperature == 1.0


def test_body_without_orjson_is_what_orjson_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    import orjson

    monkeypatch.setattr(inprocess, "_orjson_dumps", lambda: inprocess._dumps_like_orjson)
    value = {"s": "é 😀", "n": [1, -(2**63), 2**64 - 1, 1.5, math.nan, -math.inf], "t": (True, None)}
    assert inprocess._request_body(value) == orjson.dumps(value)
    for unsendable in ({1: "a"}, {"n": 2**64}, {"n": -(2**63) - 1}, {"m": Params(input="x")}, {"s": {1}}):
        with pytest.raises(TypeError):
            orjson.dumps(unsendable)
        with pytest.raises(TypeError):
            inprocess._request_body(unsendable)


def test_handler_runs_in_the_callers_task_in_a_fresh_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    class Setter(Routed):
        async def responses(self, body: dict = Body()) -> dict:
            seen = var.get()
            var.set("handler")
            return {"seen": seen, "task": id(asyncio.current_task())}

    async def go() -> None:
        var.set("caller")
        response = await responses_in_process(Setter(), url_path="/v1/responses", json={"a": 1})
        assert await response.json() == {"seen": "unset", "task": id(asyncio.current_task())}
        assert var.get() == "caller"

    in_loop(go)


def test_non_ascii_paths_and_queries_are_escaped_like_a_client_would() -> None:
    class Paths(Echo):
        async def responses(self, request: Request, body: dict = Body()) -> dict:  # type: ignore[override]
            return {
                "id": request.path_params["rollout_id"],
                "q": request.query_params["q"],
                "raw_path": request.scope["raw_path"].decode(),
            }

    response = call(Paths(), "/ng-rollout/é-1/v1/responses?q=ü", json={"a": 1})
    assert asyncio.run(response.json()) == {
        "id": "é-1",
        "q": "ü",
        "raw_path": "/ng-rollout/%C3%A9-1/v1/responses",
    }
    assert str(response.url) == "http://127.0.0.1:8123/ng-rollout/%C3%A9-1/v1/responses?q=%C3%BC"


def test_unknown_paths_answer_as_the_app_does() -> None:
    response = call(Echo(), "/v1/nothing-here", json={"input": "x"})
    assert (response.status, asyncio.run(response.json())) == (404, {"detail": "Not Found"})


# ------------------------------------------------------------------------------------------
# When the app fails
# ------------------------------------------------------------------------------------------


class NoMiddleware(BaseModel):
    """An app without an exception middleware: Starlette answers 500 and uvicorn logs the error."""

    def setup_webserver(self) -> FastAPI:
        app = FastAPI()
        app.post("/v1/responses")(self.responses)
        return app

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
    response = call(NoMiddleware(), json={"a": 1})
    assert (response.status, asyncio.run(response.read())) == (500, b"Internal Server Error")
    assert [(r.getMessage(), r.exc_info and r.exc_info[0]) for r in server_log] == [
        ("Exception in ASGI application\n", LookupError)
    ]
    with pytest.raises(aiohttp.ClientResponseError) as raised:
        response.raise_for_status()
    assert isinstance(raised.value.__cause__, LookupError)


def test_an_app_that_never_answers_gets_uvicorns_500(server_log: list[logging.LogRecord]) -> None:
    class NoAnswer(NoMiddleware):
        def setup_webserver(self) -> FastAPI:
            app = super().setup_webserver()

            async def no_answer(scope: Any, receive: Any, send: Any) -> None:
                return None

            app.middleware_stack = no_answer  # as if a middleware returned without answering
            return app

    agent = NoAnswer()
    response = call(agent, json={"a": 1})
    assert (response.status, response.headers["content-type"]) == (500, "text/plain; charset=utf-8")
    assert [r.getMessage() for r in server_log] == ["ASGI callable returned without starting response."]

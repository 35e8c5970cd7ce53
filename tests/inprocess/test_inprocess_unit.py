"""Unit tests of ``responses_in_process``: the response object's API and FastAPI-style binding."""

# ruff: noqa: B008 - ``param = Body()`` / ``Header()`` defaults are the FastAPI signatures under test

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import threading
from typing import Any

import aiohttp
import pytest
from fastapi import BackgroundTasks, Body, Cookie, Depends, Form, Header, HTTPException, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from multidict import CIMultiDictProxy
from pydantic import BaseModel, ConfigDict, Field

from selfcall_audit.inprocess import InProcessResponse, responses_in_process


class Config(BaseModel):
    name: str = "unit"
    host: str = "127.0.0.1"
    port: int = 8123


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: str
    temperature: float = 1.0
    tags: list[str] = []


class Echo(BaseModel):
    """An agent whose handler reports what it received."""

    config: Config = Config()
    seen: dict[str, Any] = {}

    def get_session_middleware_key(self) -> str:
        return f"Echo___{self.config.name}"

    async def responses(self, request: Request, response: Response, body: Params = Body()) -> dict:
        self.seen = {"body": body, "raw": await request.json(), "task": asyncio.current_task()}
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
    class Plain(BaseModel):
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
    class Bare(BaseModel):
        async def responses(self, request: Request, body: dict = Body()) -> dict:
            return {"url": str(request.url), "has_session": "session" in request.scope}

    response = call(Bare(), json={})
    assert asyncio.run(response.json()) == {"url": "/v1/responses", "has_session": False}
    assert not response.cookies and "vary" not in response.headers
    assert str(response.url) == "http://in-process/v1/responses"


# ------------------------------------------------------------------------------------------
# Request side and binding
# ------------------------------------------------------------------------------------------


def test_caller_objects_are_never_mutated() -> None:
    agent = Echo()
    as_dict = {"input": "hi", "tags": ["a"]}
    as_model = Params(input="hi", tags=["a"])
    call(agent, json=as_dict)
    assert as_dict == {"input": "hi", "tags": ["a"]}
    call(agent, json=as_model)
    assert as_model.tags == ["a"]
    assert agent.seen["raw"] == {"input": "hi", "tags": ["a"]}  # exclude_unset: temperature not sent
    assert agent.seen["body"].temperature == 1.0


def test_untyped_bodies_are_private_copies_too() -> None:
    class Mutator(BaseModel):
        async def responses(self, body: dict = Body()) -> dict:
            body["nested"]["items"].append("handler")
            return body

    caller = {"nested": {"items": ["caller"]}}
    response = call(Mutator(), json=caller)
    assert asyncio.run(response.json()) == {"nested": {"items": ["caller", "handler"]}}
    assert caller == {"nested": {"items": ["caller"]}}


def test_handler_runs_in_the_callers_task_with_a_copied_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    class Setter(BaseModel):
        async def responses(self, body: dict = Body()) -> dict:
            seen = var.get()
            var.set("handler")
            return {"seen": seen, "task": id(asyncio.current_task())}

    async def go() -> None:
        var.set("caller")
        response = await responses_in_process(Setter(), url_path="/v1/responses", json={})
        assert await response.json() == {"seen": "caller", "task": id(asyncio.current_task())}
        assert var.get() == "caller"

    in_loop(go)


@pytest.mark.parametrize(
    "url_path",
    [
        "/run",
        "/v1/responses/extra",
        "/ng-rollout//v1/responses",
        "v1/responses",
        "/ng-rollout/a/b/v1/responses",
    ],
)
def test_only_the_responses_routes_are_accepted(url_path: str) -> None:
    with pytest.raises(ValueError, match="is not /v1/responses"):
        call(Echo(), url_path, json={"input": "x"})


def test_percent_encoded_rollout_id_is_decoded_like_starlette() -> None:
    class Paths(BaseModel):
        async def responses(self, request: Request, body: dict = Body()) -> dict:
            return {"params": request.path_params, "path": request.url.path}

    response = call(Paths(), "/ng-rollout/a%20b/training-token-capture/v1/responses", json={})
    expected = {
        "params": {"rollout_id": "a b"},
        "path": "/ng-rollout/a b/training-token-capture/v1/responses",
    }
    assert asyncio.run(response.json()) == expected


def test_agents_that_cannot_be_called_fail_clearly() -> None:
    class NoHandler(BaseModel):
        pass

    class WithDepends(BaseModel):
        async def responses(self, body: dict = Body(), user: str = Depends(lambda: "x")) -> dict:
            return body

    class WithForm(BaseModel):
        async def responses(self, field: str = Form()) -> dict:
            return {}

    with pytest.raises(TypeError, match="no callable `responses`"):
        call(NoHandler(), json={})
    with pytest.raises(TypeError, match="cannot bind 'user'"):
        call(WithDepends(), json={})
    with pytest.raises(TypeError, match="cannot bind 'field'"):
        call(WithForm(), json={})


def test_header_cookie_and_query_parameters() -> None:
    class Params2(BaseModel):
        async def responses(
            self,
            body: dict = Body(),
            x_ng_agent_activation: int = Header(),
            trace: str | None = Header(default=None, alias="X-Trace"),
            agent_session_id: str | None = Cookie(default=None),
            limit: int = 3,
        ) -> dict:
            return {
                "activation": x_ng_agent_activation,
                "trace": trace,
                "cookie": agent_session_id,
                "limit": limit,
            }

    response = call(
        Params2(),
        "/v1/responses?limit=7",
        json={},
        headers=[("x-ng-agent-activation", "2"), ("x-trace", "t")],
        cookies={"agent_session_id": "s1"},
    )
    assert asyncio.run(response.json()) == {"activation": 2, "trace": "t", "cookie": "s1", "limit": 7}

    response = call(Params2(), "/v1/responses?limit=many", json={})
    detail = asyncio.run(response.json())["detail"]
    assert response.status == 422
    assert [(error["type"], error["loc"]) for error in detail] == [
        ("missing", ["header", "x-ng-agent-activation"]),
        ("int_parsing", ["query", "limit"]),
    ]


def test_embedded_and_multiple_body_parameters() -> None:
    class Embedded(BaseModel):
        async def responses(self, params: Params = Body(embed=True)) -> dict:
            return {"input": params.input}

    class Two(BaseModel):
        async def responses(self, params: Params, extra: dict = Body()) -> dict:
            return {"input": params.input, "extra": extra}

    assert asyncio.run(call(Embedded(), json={"params": {"input": "e"}}).json()) == {"input": "e"}
    assert asyncio.run(call(Two(), json={"params": {"input": "t"}, "extra": {"k": 1}}).json()) == {
        "input": "t",
        "extra": {"k": 1},
    }
    missing = call(Two(), json={"params": {"input": "t"}})
    assert missing.status == 422
    assert asyncio.run(missing.json())["detail"][0]["loc"] == ["body", "extra"]


def test_cookie_forms_and_an_explicit_cookie_header() -> None:
    class Cookies(BaseModel):
        async def responses(self, request: Request, body: dict = Body()) -> dict:
            return {"header": request.headers["cookie"], "cookies": dict(request.cookies)}

    response = call(Cookies(), json={}, cookies={"b": "2", "a": "x y"}, headers={"Cookie": "c=3"})
    assert asyncio.run(response.json()) == {
        "header": 'a="x y"; b=2; c=3',
        "cookies": {"a": "x y", "b": "2", "c": "3"},
    }


# ------------------------------------------------------------------------------------------
# Results and errors
# ------------------------------------------------------------------------------------------


class Out(BaseModel):
    kept: int
    renamed: str = Field(serialization_alias="newName")


def test_response_model_is_applied_like_fastapi() -> None:
    class Filtered(BaseModel):
        async def responses(self, body: dict = Body()) -> Out:
            return body  # type: ignore[return-value]  # FastAPI validates dicts against the model

    response = call(Filtered(), json={"kept": 1, "renamed": "r", "dropped": True})
    assert asyncio.run(response.read()) == b'{"kept":1,"newName":"r"}'
    invalid = call(Filtered(), json={"kept": "not a number"})
    assert invalid.status == 500
    assert asyncio.run(invalid.json()).startswith("ResponseValidationError(")


def test_returned_responses_pass_through_and_status_codes() -> None:
    class Direct(BaseModel):
        async def responses(self, response: Response, body: dict = Body()) -> Any:
            response.set_cookie("lost", "1")  # FastAPI ignores the sub-response for returned responses
            if body.get("status"):
                response.status_code = body["status"]
                return {"ignored": True}
            return JSONResponse({"direct": True}, status_code=202, headers={"x-a": "b"})

    direct = call(Direct(), json={})
    assert (direct.status, direct.headers["x-a"], dict(direct.cookies)) == (202, "b", {})
    assert asyncio.run(direct.json()) == {"direct": True}
    no_content = call(Direct(), json={"status": 204})
    assert (no_content.status, asyncio.run(no_content.read())) == (204, b"")
    assert no_content.cookies["lost"].value == "1"


def test_http_exception_without_body_and_background_tasks() -> None:
    ran = []

    class Tasks(BaseModel):
        async def responses(self, tasks: BackgroundTasks, body: dict = Body()) -> dict:
            tasks.add_task(ran.append, "after")
            if body.get("not_modified"):
                raise HTTPException(status_code=304)
            return {"ran": list(ran)}

    assert asyncio.run(call(Tasks(), json={}).json()) == {"ran": []}
    assert ran == ["after"]  # background work finishes before the helper returns
    not_modified = call(Tasks(), json={"not_modified": True})
    assert (not_modified.status, asyncio.run(not_modified.read())) == (304, b"")


def test_sync_handlers_run_in_a_worker_thread() -> None:
    class Sync(BaseModel):
        def responses(self, body: dict = Body()) -> dict:
            return {"thread": threading.get_ident()}

    assert asyncio.run(call(Sync(), json={}).json())["thread"] != threading.get_ident()


def test_handler_errors_are_logged_with_their_traceback(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="selfcall_audit.inprocess"):
        response = call(Echo(), json={"input": "fail"})
    assert response.status == 500 and not response.cookies  # the exception middleware answers, no session
    assert [record.exc_info[0] for record in caplog.records if record.exc_info] == [RuntimeError]


def test_non_ascii_paths_and_queries_are_escaped_like_a_client_would() -> None:
    class Paths(BaseModel):
        async def responses(self, request: Request, body: dict = Body()) -> dict:
            return {
                "id": request.path_params["rollout_id"],
                "q": request.query_params["q"],
                "raw": str(request.url),
            }

    response = call(Paths(), "/ng-rollout/é-1/v1/responses?q=ü", json={})
    assert asyncio.run(response.json()) == {
        "id": "é-1",
        "q": "ü",
        "raw": "/ng-rollout/é-1/v1/responses?q=%C3%BC",  # Starlette builds it from the decoded path
    }
    assert str(response.url) == "http://in-process/ng-rollout/%C3%A9-1/v1/responses?q=%C3%BC"

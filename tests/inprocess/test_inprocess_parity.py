"""Parity of ``responses_in_process`` with a real HTTP self-call through uvicorn.

Every comparison runs the same call both ways inside the agents' own event loop and compares
the results field by field, after replacing what is random by design (session ids, signed
session cookies, model response ids).
"""

from __future__ import annotations

import ast
import asyncio
import base64
import copy
import inspect
import json
import logging
import re
import textwrap
from collections.abc import Iterator
from http.cookies import SimpleCookie
from typing import Any

import aiohttp
import pytest
from inprocess_harness import (
    AGENT_CLASSES,
    CALLER_VAR,
    HANDLER_VAR,
    SESSION_ID_KEY,
    Agent,
    Host,
    RunRequest,
    checkpointable_external_wait,
    describe_cookies,
    get_response_json,
    raise_for_status,
    retry_checkpoint_refusal,
)

from selfcall_audit.analysis import policy
from selfcall_audit.inprocess import InProcessResponse, responses_in_process

MODES = ("http", "inprocess")
_RANDOM = [
    (re.compile(r"eyJ[A-Za-z0-9+/=]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+"), "<signed-session>"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"resp_[0-9a-f]{8}"), "<resp-id>"),
]


def normalize(value: Any) -> Any:
    """Replace what differs between any two calls (either path) by placeholders."""
    text = json.dumps(value, sort_keys=True)
    for pattern, placeholder in _RANDOM:
        text = pattern.sub(placeholder, text)
    return json.loads(text)


def session_of(cookie_value: str) -> dict[str, Any]:
    """Decode the data of a Starlette session cookie (base64 JSON, then timestamp and signature)."""
    data = cookie_value.strip('"').split(".")[0]
    return json.loads(base64.b64decode(data + "=" * (-len(data) % 4)))


async def attempt(action: Any) -> Any:
    """The result of a read, or the error it raised (type and message)."""
    try:
        return {"value": await action}
    except Exception as error:
        return {"raised": f"{type(error).__name__}: {error}"}


async def describe(response: Any) -> dict[str, Any]:
    """Everything agent code can read off a self-call response, in the order agent code reads it."""
    nemo_error = None
    try:
        await raise_for_status(response)
    except aiohttp.ClientResponseError as error:
        nemo_error = {
            "status": error.status,
            "message": error.message,
            "content": error.response_content.decode(),
        }
    read = await attempt(response.read())
    error = None
    try:
        response.raise_for_status()
    except aiohttp.ClientResponseError as raised:
        error = {"status": raised.status, "message": raised.message, "url": str(raised.request_info.real_url)}
    return {
        "status": response.status,
        "reason": response.reason,
        "ok": response.ok,
        "headers": [
            (k.lower(), v) for k, v in response.headers.items() if k.lower() not in ("date", "server")
        ],
        "cookies": describe_cookies(response.cookies),
        "url": str(response.url),
        "nemo_raise_for_status": nemo_error,
        "read": {"value": read["value"].decode()} if "value" in read else read,
        "text": await attempt(response.text()),
        "json": await attempt(response.json(content_type=None)),
        "json_strict": await attempt(response.json()),
        "raise_for_status": error,
    }


async def both_ways(agent: Agent, **call: Any) -> dict[str, dict[str, Any]]:
    """The same self-call over HTTP and in-process, each described; the caller's args are reused."""
    return {mode: await describe(await agent.self_call(mode, **call)) for mode in MODES}


def run_rollout(host: Host, agent_name: str, modes: tuple[str, ...] = MODES, **body: Any) -> dict[str, Any]:
    """POST /run to the agent over HTTP once per self-call mode; return the results by mode."""

    async def go() -> dict[str, Any]:
        results = {}
        async with aiohttp.ClientSession() as session:
            for mode in modes:
                url = host.agents[agent_name].server_client.urls[host.agents[agent_name].config.name]
                async with session.post(f"{url}/run", json={**body, "mode": mode}) as response:
                    assert response.status == 200, await response.text()
                    results[mode] = await response.json()
        return results

    return host.run(go())


PATHS = {
    "plain": {},
    "rollout": {"rollout_id": "task-7.r-1"},
    "capture": {"rollout_id": "task-7.r-1", "capture": True},
}
EXPECTED_PATH = {
    "plain": "/v1/responses",
    "rollout": "/ng-rollout/task-7.r-1/v1/responses",
    "capture": "/ng-rollout/task-7.r-1/training-token-capture/v1/responses",
}
TAKES_REQUEST = {"FullAgent", "DependentAgent", "RequestBodyAgent", "ExtrasAgent", "TypedDictAgent"}
SETS_COOKIES = {"FullAgent", "DependentAgent", "ExtrasAgent", "TypedDictAgent", "AnnotatedAgent"}


@pytest.mark.slow
@pytest.mark.parametrize("path_kind", list(PATHS))
@pytest.mark.parametrize("agent_cls", AGENT_CLASSES, ids=lambda cls: cls.__name__)
def test_multi_step_rollouts_match(host: Host, agent_cls: type[Agent], path_kind: str) -> None:
    name = agent_cls.__name__
    body = {
        "responses_create_params": {"input": "add things tools=2", "metadata": {"k": "v"}},
        "task": f"task-{name}-{path_kind}",
        "turns": 2,
        "activation": True,
        **PATHS[path_kind],
    }
    results = run_rollout(host, name, **body)

    assert normalize(results["http"]) == normalize(results["inprocess"])
    for mode, result in results.items():
        first, second = result["turns"]
        assert first["status"] == (201 if name == "AnnotatedAgent" else 200), mode
        if name == "SyncAgent":
            assert first["json"]["output"] == [
                {"type": "message", "echo": {"input": "add things tools=2", "metadata": {"k": "v"}}}
            ]
            continue
        assert len(first["json"]["output"]) == 5, mode  # two tool calls, their outputs, the answer
        assert first["json"]["output"][-1]["content"] == 'done after 2: {"total":3}', mode
        # Only a handler that copies the resources cookie onto its response keeps the session alive.
        assert result["verify"]["session_known"] is (name in SETS_COOKIES and name in TAKES_REQUEST), mode
        agent_cookie = f"{name}___{name.lower()}_instance"
        assert agent_cookie in first["cookies"], mode
        if name in SETS_COOKIES:
            assert first["cookies"]["model_affinity"]["value"].startswith("m-"), mode
        if name not in TAKES_REQUEST:
            continue
        seen = first["json"]["observed"]
        assert seen["path"] == EXPECTED_PATH[path_kind], mode
        assert seen["model_path"] == EXPECTED_PATH[path_kind], mode
        assert seen["path_params"] == ({"rollout_id": "task-7.r-1"} if path_kind != "plain" else {}), mode
        assert seen["activation"] == "1" and second["json"]["observed"]["activation"] == "2", mode
        assert seen["raw_body"] == {"input": "add things tools=2", "metadata": {"k": "v"}}, mode
        assert ("_trajectory" in first["json"]) is (path_kind != "plain"), mode
        # The agent's own session cookie from turn 1 carries the same session into turn 2.
        assert seen["session_id"] == second["json"]["observed"]["session_id"], mode
        assert session_of(first["cookies"][agent_cookie]["value"]) == {SESSION_ID_KEY: seen["session_id"]}


def test_extra_parameters_bind_alike(host: Host) -> None:
    agent = host.agents["ExtrasAgent"]
    calls = [
        {
            "url_path": "/v1/responses?verbose=true",
            "json": {"input": "x"},
            "headers": {"X-NG-Agent-Activation": "3"},
        },
        {"url_path": "/ng-rollout/rid-9/v1/responses", "json": {"input": "x"}},
        {"url_path": "/v1/responses?rollout_id=from-query&verbose=0", "json": {"input": "x"}},
        {"url_path": "/ng-rollout/a%20b/v1/responses", "json": {"input": "x"}},
        {"url_path": "/ng-rollout/é-1/v1/responses?verbose=on&note=ü", "json": {"input": "x"}},
    ]

    async def go() -> list[dict[str, Any]]:
        return [await both_ways(agent, **call) for call in calls]

    results = host.run(go())
    for result in results:
        assert normalize(result["http"]) == normalize(result["inprocess"])
    seen = [result["inprocess"]["json"]["value"]["observed"] for result in results]
    assert [s["header_param"] for s in seen] == ["3", None, None, None, None]
    assert [s["verbose"] for s in seen] == [True, False, False, False, True]
    assert [s["rollout_param"] for s in seen] == [None, "rid-9", "from-query", "a b", "é-1"]
    assert seen[3]["path"] == "/ng-rollout/a b/v1/responses"
    assert seen[4]["query"] == {"verbose": "on", "note": "ü"}
    assert seen[0]["query"] == {"verbose": "true"}


def jar(*set_cookies: str) -> SimpleCookie:
    """A cookie jar as ``response.cookies`` holds it: Morsels with the attributes the server set."""
    cookies = SimpleCookie()
    for set_cookie in set_cookies:
        cookies.load(set_cookie)
    return cookies


COOKIE_FORMS: dict[str, Any] = {
    "dict": {"b": "2", "a": "1"},
    "simple_cookie_with_quoted_value": SimpleCookie('a="has space"; b=plain'),
    "pairs": [("z", "last"), ("a", "first")],
    "needs_quoting": {"q": "a,b;c"},
    "beyond_latin_1": {"q": "😀", "r": "é"},
    "empty": {},
    # aiohttp puts the cookies in a jar and sends only those the URL may get.
    "restricted_paths": jar("keep=1; Path=/", "elsewhere=2; Path=/elsewhere", "here=3; Path=/v1"),
    "deleted_by_max_age_0": jar("keep=1", 'gone=""; Max-Age=0; Path=/'),
    "lifetimes": jar(
        "session=1; Max-Age=1209600; Path=/; HttpOnly", "negative=2; Max-Age=-1", "odd=3; Max-Age=soon"
    ),
    "expired": jar("keep=1", "old=2; expires=Thu, 01 Jan 1970 00:00:00 GMT"),
    "secure_over_http": jar("keep=1", "secret=2; Secure"),
    "another_domain": jar("keep=1", "foreign=2; Domain=other.example"),
    "this_host": jar("keep=1", "local=2; Domain=127.0.0.1"),
    "samesite_and_httponly": jar("keep=1; SameSite=Strict; HttpOnly"),
}


@pytest.mark.parametrize("form", list(COOKIE_FORMS))
def test_cookie_header_and_response_cookies_match(host: Host, form: str) -> None:
    agent = host.agents["FullAgent"]

    async def go() -> dict[str, Any]:
        return await both_ways(
            agent, url_path="/v1/responses", json={"input": "x"}, cookies=COOKIE_FORMS[form]
        )

    result = host.run(go())
    assert normalize(result["http"]) == normalize(result["inprocess"])
    seen = result["inprocess"]["json"]["value"]["observed"]
    if form == "simple_cookie_with_quoted_value":
        assert seen["cookies"] == {"a": "has space", "b": "plain"}
        assert seen["cookie_header"] == 'a="has space"; b=plain'
    if form == "empty":
        assert seen["cookie_header"] is None


def test_a_list_of_morsels_is_refused_alike(host: Host) -> None:
    """aiohttp takes a mapping, a cookie jar or (name, value) pairs; bare Morsels it cannot unpack."""
    agent = host.agents["FullAgent"]
    morsels = list(SimpleCookie("a=1; b=2").values())

    async def go() -> dict[str, str]:
        raised = {}
        for mode in MODES:
            with pytest.raises(ValueError) as caught:
                await agent.self_call(mode, url_path="/v1/responses", json={"input": "x"}, cookies=morsels)
            raised[mode] = str(caught.value)
        return raised

    raised = host.run(go())
    assert raised["http"] == raised["inprocess"]


def test_received_cookies_are_not_echoed_back(host: Host) -> None:
    """Over HTTP a response carries only Set-Cookie headers: what the handler set, plus the
    agent's own session cookie; cookies the handler merely received do not come back."""
    agent = host.agents["RequestBodyAgent"]

    async def go() -> dict[str, Any]:
        return await both_ways(agent, url_path="/v1/responses", json={"input": "x"}, cookies={"keep": "me"})

    result = host.run(go())
    assert normalize(result["http"]) == normalize(result["inprocess"])
    assert list(result["inprocess"]["cookies"]) == ["RequestBodyAgent___requestbodyagent_instance"]
    assert result["inprocess"]["json"]["value"]["observed"]["cookies"] == {"keep": "me"}


def test_session_cookie_is_interchangeable_between_paths(host: Host) -> None:
    agent = host.agents["FullAgent"]

    async def session_seen(mode: str, cookies: Any) -> tuple[str, Any]:
        response = await agent.self_call(mode, url_path="/v1/responses", json={"input": "x"}, cookies=cookies)
        return (await get_response_json(response))["observed"]["session_id"], response.cookies

    async def go() -> list[str]:
        first, cookies = await session_seen("inprocess", None)
        second, cookies = await session_seen("http", cookies)
        third, _ = await session_seen("inprocess", cookies)
        return [first, second, third]

    ids = host.run(go())
    assert len(set(ids)) == 1 and re.fullmatch(r"[0-9a-f-]{36}", ids[0])


ERROR_CALLS = {
    "handler_exception": {"json": {"input": "raise:value"}},
    "http_exception": {"json": {"input": "raise:http"}},
    "inner_server_error": {"json": {"input": "model-error"}},
    "inner_error_without_content": {"json": {"input": "raise:inner-plain"}},
    "invalid_body": {"json": {"input": 5, "surprise": True}},
    "missing_body": {"json": None},
    "handler_own_cancellation": {"json": {"input": "raise:cancelled"}},
    "invalid_response": {"json": {"input": "return:invalid"}},
    "base_exception": {"json": {"input": "raise:base"}},
}
ERROR_BODIES = {
    "handler_exception": "\"ValueError('the handler failed')\"",
    "http_exception": '{"detail":{"why":"conflict"}}',
    "inner_server_error": '"Hit an exception in FullAgent___fullagent_instance calling an inner server: '
    'b\'{\\"error\\":\\"model overloaded\\"}\'"',
    "inner_error_without_content": "Internal Server Error",
    # Starlette's BaseHTTPMiddleware turns it into this before NeMo Gym's middleware sees it.
    "base_exception": "\"RuntimeError('No response returned.')\"",
    "invalid_response": '"ResponseValidationError()"',
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(ERROR_CALLS))
def test_errors_match(host: Host, case: str) -> None:
    agent = host.agents["FullAgent"]

    async def go() -> dict[str, Any]:
        return await both_ways(agent, url_path="/v1/responses", **ERROR_CALLS[case])

    result = host.run(go())
    assert normalize(result["http"]) == normalize(result["inprocess"])
    got = result["inprocess"]
    expected_status = {"http_exception": 409, "invalid_body": 422, "missing_body": 422}.get(case, 500)
    assert got["status"] == expected_status and not got["ok"]
    assert got["raise_for_status"]["status"] == expected_status
    # NeMo's raise_for_status read the body and released the response: later reads fail alike.
    assert got["read"] == got["text"] == {"raised": "ClientConnectionError: Connection closed"}
    text = got["nemo_raise_for_status"]["content"]
    if case in ERROR_BODIES:
        assert text == ERROR_BODIES[case]
    if case == "http_exception":
        assert ("x-why", "conflict") in got["headers"]
    if case == "invalid_body":
        assert [e["loc"] for e in json.loads(text)["detail"]] == [
            ["body", "input", "str"],
            ["body", "input", "list[dict[str,any]]"],
            ["body", "surprise"],
        ]
    if case == "missing_body":
        assert json.loads(text) == {
            "detail": [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]
        }


@pytest.mark.parametrize(
    "case", ["handler_exception", "inner_server_error", "base_exception", "invalid_body"]
)
def test_raise_for_status_raises_the_same_error_without_a_cause(host: Host, case: str) -> None:
    """What the route raised is in the answer's body, not chained to the caller's error: the app's
    middleware answered it, as over HTTP."""
    agent = host.agents["FullAgent"]

    async def go() -> dict[str, tuple[type, int, BaseException | None]]:
        raised = {}
        for mode in MODES:
            response = await agent.self_call(mode, url_path="/v1/responses", **ERROR_CALLS[case])
            with pytest.raises(aiohttp.ClientResponseError) as caught:
                response.raise_for_status()
            raised[mode] = (type(caught.value), caught.value.status, caught.value.__cause__)
        return raised

    raised = host.run(go())
    assert raised["http"] == raised["inprocess"]
    assert raised["inprocess"][2] is None


def test_log_lines_match(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    """The middleware's and the validation handler's lines are printed alike, once per call."""
    agent = host.agents["FullAgent"]
    printed = {}
    for mode in MODES:

        async def go(mode: str = mode) -> None:
            for case in ("handler_exception", "invalid_body", "base_exception"):
                await agent.self_call(mode, url_path="/v1/responses", **ERROR_CALLS[case])

        capsys.readouterr()
        host.run(go())
        printed[mode] = capsys.readouterr().out.splitlines()
    assert printed["http"] == printed["inprocess"]
    assert printed["inprocess"][0] == (
        "Caught an exception in FullAgent___fullagent_instance. repr(e): ValueError('the handler failed')"
    )
    assert printed["inprocess"][1].startswith("Hit validation exception! Errors: [")
    assert printed["inprocess"][2] == (
        "Caught an exception in FullAgent___fullagent_instance. repr(e): RuntimeError('No response returned.')"
    )


def test_app_exception_handlers_dependency_overrides_and_middleware_apply(host: Host) -> None:
    agent = host.agents["DependentAgent"]

    async def go() -> list[dict[str, Any]]:
        return [
            await both_ways(agent, url_path="/v1/responses", json={"input": "tools=1"}),
            await both_ways(agent, url_path="/v1/responses", json={"input": "raise:lookup"}),
        ]

    ok, handled = host.run(go())
    for result in (ok, handled):
        assert normalize(result["http"]) == normalize(result["inprocess"])
        assert ("x-stamp", "stamped") in result["inprocess"]["headers"]
    assert ok["inprocess"]["json"]["value"]["observed"]["dependency"] == "the override"
    assert handled["inprocess"]["status"] == 418
    assert handled["inprocess"]["nemo_raise_for_status"]["content"] == '{"lookup":"\'missing\'"}'


def test_the_route_is_called_through_its_wrappers(host: Host) -> None:
    """NeMo Gym wraps ``/v1/responses`` (tracing, checkpoint tracking): both paths go through it."""
    agent = host.agents["FullAgent"]
    counts = {}
    for mode in MODES:
        before = agent.probes.get("traced", 0)
        host.run(agent.self_call(mode, url_path="/v1/responses", json={"input": "x"}))
        counts[mode] = agent.probes["traced"] - before
    assert counts == {"http": 1, "inprocess": 1}


def test_handler_sees_the_same_headers(host: Host) -> None:
    agent = host.agents["FullAgent"]
    call = {
        "url_path": "/v1/responses",
        "json": {"input": "x"},
        "cookies": {"a": "1"},
        "headers": {"X-NG-Agent-Activation": "2", "Content-Type": "text/plain"},
    }

    async def go() -> dict[str, Any]:
        return await both_ways(agent, **call)

    result = host.run(go())
    seen = {mode: result[mode]["json"]["value"]["observed"]["headers"] for mode in MODES}
    assert seen["http"] == seen["inprocess"]
    assert dict(seen["inprocess"]) == {
        "host": f"127.0.0.1:{agent.config.port}",
        "x-ng-agent-activation": "2",
        "content-type": "application/json",  # ServerClient's, over the caller's
        "content-length": "13",
        "cookie": "a=1",
    }


BODIES: dict[str, Any] = {
    "nan_and_infinity_become_null": {"input": "x", "metadata": {"nan": float("nan"), "inf": float("-inf")}},
    "unicode_unescaped": {"input": "é ü 😀"},
    "large_unsigned_int": {"input": "x", "metadata": {"n": 2**64 - 1}},
    "empty_dict": {},
    "empty_list": [],
    "zero": 0,
}


@pytest.mark.parametrize("body", list(BODIES))
def test_body_bytes_match(host: Host, body: str) -> None:
    agent = host.agents["FullAgent"]

    async def go() -> dict[str, Any]:
        return await both_ways(agent, url_path="/v1/responses", json=BODIES[body])

    result = host.run(go())
    assert normalize(result["http"]) == normalize(result["inprocess"])
    if body in ("nan_and_infinity_become_null", "unicode_unescaped"):
        seen = result["inprocess"]["json"]["value"]["observed"]["body_bytes"]
        assert (
            seen
            == {
                "nan_and_infinity_become_null": '{"input":"x","metadata":{"nan":null,"inf":null}}',
                "unicode_unescaped": '{"input":"é ü 😀"}',
            }[body]
        )


UNSENDABLE: dict[str, Any] = {
    "int_key": {"input": "x", "metadata": {1: "a"}},
    "model_in_dict": {
        "input": "x",
        "metadata": {"m": RunRequest(responses_create_params={"input": "x"}, task="t")},
    },
    "int_beyond_64_bits": {"input": "x", "metadata": {"n": 2**64}},
    "negative_int_beyond_64_bits": {"input": "x", "metadata": {"n": -(2**63) - 1}},
}


@pytest.mark.parametrize("body", list(UNSENDABLE))
def test_unsendable_bodies_raise_in_the_caller_alike(host: Host, body: str) -> None:
    agent = host.agents["FullAgent"]

    async def go() -> dict[str, str]:
        raised = {}
        for mode in MODES:
            try:
                await agent.self_call(mode, url_path="/v1/responses", json=BODIES.get(body, UNSENDABLE[body]))
            except TypeError as error:
                raised[mode] = str(error)
        return raised

    raised = host.run(go())
    assert raised["http"] == raised["inprocess"]


async def until(condition: Any, timeout: float = 10.0) -> None:
    """Wait, in the agents' loop, until ``condition()`` holds."""
    for _ in range(int(timeout / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


def pause(agent: Agent, prompt: str) -> dict[str, Any]:
    """The probe of a handler answering ``prompt`` (``pause:...``): it waits until ``release`` is set."""
    agent.probes[prompt] = {
        "release": asyncio.Event(),
        "started": False,
        "cancelled": False,
        "finished": False,
    }
    return agent.probes[prompt]


@pytest.fixture
def server_log() -> Iterator[list[str]]:
    """What uvicorn's error logger gets at level ERROR, from the servers and the helper alike."""
    records: list[str] = []
    handler, logger = logging.Handler(logging.ERROR), logging.getLogger("uvicorn.error")
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.ERROR)
    yield records
    logger.setLevel(level)
    logger.removeHandler(handler)


@pytest.mark.parametrize("how", ["wait_for", "cancel"])
def test_cancelling_the_caller_leaves_the_handler_running_as_over_http(
    host: Host, how: str, capsys: pytest.CaptureFixture[str], server_log: list[str]
) -> None:
    """Decided: as over HTTP. A client that goes away does not stop its request's handler (uvicorn
    does not cancel it), so in-process the handler runs to its end and its answer is dropped.
    Cancelling it instead would send the cancellation through the app's exception middleware,
    whose bare ``except`` logs it and answers 500, which the HTTP path never shows."""
    agent = host.agents["FullAgent"]

    async def go(mode: str) -> tuple[dict[str, bool], dict[str, bool]]:
        prompt = f"pause:{how}-{mode}"
        probe = pause(agent, prompt)
        release = probe["release"]
        call = agent.self_call(mode, url_path="/v1/responses", json={"input": prompt})
        if how == "wait_for":
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(call, 0.3)
        else:
            task = asyncio.ensure_future(call)
            await until(lambda: probe["started"])
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        await asyncio.sleep(0.05)
        when_cancelled = dict(probe)
        release.set()
        await until(lambda: probe["finished"])
        return when_cancelled, dict(probe)

    seen, printed = {}, {}
    for mode in MODES:
        capsys.readouterr()
        seen[mode] = host.run(go(mode))
        printed[mode] = capsys.readouterr().out
    assert seen["http"] == seen["inprocess"]
    assert seen["inprocess"] == (
        {"started": True, "cancelled": False, "finished": False},
        {"started": True, "cancelled": False, "finished": True},
    )
    assert printed == {"http": "", "inprocess": ""}
    assert server_log == []


def test_a_checkpoint_cancelling_a_run_mid_self_call_ends_alike(
    host: Host, capsys: pytest.CaptureFixture[str], server_log: list[str]
) -> None:
    """Newer agents track their ``/run`` requests and cancel those in flight at a weight checkpoint.
    With the self-call in flight, ``/run`` ends the same way in both modes, the self-called handler
    runs on to its end in both, and nothing is printed or logged in-process that HTTP does not."""
    agent = host.agents["FullAgent"]
    url = agent.server_client.urls[agent.config.name]

    async def go(mode: str) -> dict[str, Any]:
        prompt = f"pause:checkpoint-{mode}"
        probe = pause(agent, prompt)
        release = probe["release"]
        body = {"responses_create_params": {"input": prompt}, "task": "checkpoint", "mode": mode}
        async with aiohttp.ClientSession() as session:
            run = asyncio.ensure_future(session.post(f"{url}/run", json=body))
            await until(lambda: probe["started"])
            async with session.post(f"{url}/checkpoint") as answer:
                cancelled = (await answer.json())["cancelled"]
            async with await run as response:
                ran = (response.status, await response.text())
            await asyncio.sleep(0.05)
            when_cancelled = dict(probe)
            release.set()
            await until(lambda: probe["finished"])
        return {"cancelled": cancelled, "run": ran, "when_cancelled": when_cancelled, "after": dict(probe)}

    results, printed = {}, {}
    for mode in MODES:
        capsys.readouterr()
        results[mode] = host.run(go(mode))
        printed[mode] = capsys.readouterr().out
    assert results["http"] == results["inprocess"]
    assert results["inprocess"]["cancelled"] == 1
    assert results["inprocess"]["after"] == {"started": True, "cancelled": False, "finished": True}
    # Starlette answers the cancelled /run itself, through the exception middleware, in both modes.
    assert results["inprocess"]["run"] == (500, "\"RuntimeError('No response returned.')\"")
    assert (
        printed["http"]
        == printed["inprocess"]
        == (
            "Caught an exception in FullAgent___fullagent_instance. repr(e): RuntimeError('No response returned.')\n"
        )
    )
    assert server_log == []


@pytest.mark.slow
def test_handler_starts_from_a_fresh_context_like_a_server_request(host: Host) -> None:
    agent = host.agents["FullAgent"]

    async def one(mode: str, value: str) -> tuple[str, str]:
        CALLER_VAR.set(value)
        response = await agent.self_call(mode, url_path="/v1/responses", json={"input": "tools=1"})
        return (await get_response_json(response))["observed"]["caller_var"], HANDLER_VAR.get()

    async def go() -> dict[str, list[tuple[str, str]]]:
        return {mode: await asyncio.gather(*(one(mode, f"caller-{i}") for i in range(8))) for mode in MODES}

    results = host.run(go())
    # Neither path lets the handler see the caller's variables, nor the caller see the handler's.
    assert results["inprocess"] == results["http"] == [("default", "default")] * 8


def test_rollout_context_of_run_does_not_reach_the_handler(host: Host) -> None:
    """``/run`` sets the current rollout id (as NeMo Gym's rollout context); over HTTP the
    self-called handler does not see it, so its downstream calls keep their paths."""
    results = run_rollout(
        host, "FullAgent", responses_create_params={"input": "tools=1"}, task="ctx", rollout_id="r-5"
    )
    for mode in MODES:
        assert results[mode]["turns"][0]["json"]["observed"]["rollout_var"] is None, mode


@pytest.mark.slow
def test_concurrent_rollouts_keep_their_sessions(host: Host) -> None:
    agent = host.agents["FullAgent"]
    url = agent.server_client.urls[agent.config.name]

    async def rollout(session: aiohttp.ClientSession, mode: str, i: int) -> dict[str, Any]:
        body = {
            "responses_create_params": {"input": f"rollout {i} tools={i % 4}"},
            "task": f"concurrent-{i}",
            "rollout_id": f"c-{i}",
            "turns": 2,
            "mode": mode,
        }
        async with session.post(f"{url}/run", json=body) as response:
            return await response.json()

    async def go() -> dict[str, list[dict[str, Any]]]:
        async with aiohttp.ClientSession() as session:
            return {
                mode: await asyncio.gather(*(rollout(session, mode, i) for i in range(24))) for mode in MODES
            }

    results = host.run(go())
    assert normalize(results["http"]) == normalize(results["inprocess"])
    for i, result in enumerate(results["inprocess"]):
        tools = i % 4
        assert result["verify"] == {
            "task": f"concurrent-{i}",
            "session_known": True,
            "total": 2 * tools * (tools + 1) // 2,
        }
        assert result["turns"][0]["json"]["observed"]["path_params"] == {"rollout_id": f"c-{i}"}


@pytest.mark.slow
@pytest.mark.parametrize(("modes", "self_calls"), [(("inprocess",), 0), (("http",), 3)])
def test_only_http_self_calls_reach_the_server(host: Host, modes: tuple[str, ...], self_calls: int) -> None:
    agent, server = host.agents["FullAgent"], host.uvicorn["FullAgent"]
    served, sent = server.server_state.total_requests, agent.server_client.requests[agent.config.name]
    run_rollout(
        host, "FullAgent", modes, responses_create_params={"input": "tools=1"}, task="sockets", turns=3
    )
    assert server.server_state.total_requests - served == 1 + self_calls  # the /run itself, then self-calls
    assert agent.server_client.requests[agent.config.name] - sent == self_calls


def test_caller_body_is_never_mutated(host: Host) -> None:
    agent = host.agents["TypedDictAgent"]
    nested = {"input": [{"role": "user", "content": "tools=1", "extra": {"list": [1, 2]}}], "model": "m"}

    async def go() -> None:
        for mode in MODES:
            body = copy.deepcopy(nested)
            response = await agent.self_call(mode, url_path="/v1/responses", json=body)
            assert response.status == 200
            assert body == nested, mode

    host.run(go())


def test_response_headers_differ_only_by_uvicorns_date_and_server_and_spelling(host: Host) -> None:
    """Documented difference: aiohttp's parser spells well-known header names its own way
    (``Content-Type``); in-process they read back as the app wrote them (Starlette: lowercase).
    Lookups ignore case either way."""
    agent = host.agents["FullAgent"]

    async def go() -> dict[str, list[str]]:
        names = {}
        for mode in MODES:
            response = await agent.self_call(mode, url_path="/v1/responses", json={"input": "x"})
            assert response.headers["content-type"] == response.headers["Content-Type"] == "application/json"
            names[mode] = list(response.headers)
        return names

    names = host.run(go())
    assert [n.lower() for n in names["http"] if n not in ("Date", "Server")] == names["inprocess"]
    assert {"content-length", "content-type", "set-cookie"} <= set(names["inprocess"])


def test_in_process_response_type(host: Host) -> None:
    async def go() -> Any:
        return await responses_in_process(host.agents["SyncAgent"], url_path="/v1/responses", json={"a": 1})

    response = host.run(go())
    assert isinstance(response, InProcessResponse)
    assert repr(response).startswith("<InProcessResponse(http://127.0.0.1:")


URL_FORMS = {
    "space_and_plus_in_query": "/v1/responses?note=a b&sum=1+2&escaped=%2B",
    "needless_and_lowercase_escapes": "/ng-rollout/%41%c3%a9%7e/v1/responses",
    "stray_percent_in_query": "/v1/responses?x=%zz&y=1",
    "fragment": "/v1/responses#part",
}
URL_SEEN = {
    "space_and_plus_in_query": ("/v1/responses", "note=a+b&sum=1+2&escaped=%2B"),
    "needless_and_lowercase_escapes": ("/ng-rollout/A%C3%A9~/v1/responses", ""),
    "stray_percent_in_query": ("/v1/responses", "x=%25zz&y=1"),
    "fragment": ("/v1/responses", ""),
}


@pytest.mark.parametrize("form", list(URL_FORMS))
def test_the_url_reaches_the_app_as_aiohttp_sends_it(host: Host, form: str) -> None:
    """aiohttp (yarl) normalises the URL before sending it: the app sees that URL, not the caller's text."""
    agent = host.agents["ExtrasAgent"]

    result = host.run(both_ways(agent, url_path=URL_FORMS[form], json={"input": "x"}))

    assert normalize(result["http"]) == normalize(result["inprocess"])
    seen = result["inprocess"]["json"]["value"]["observed"]
    assert (seen["raw_path"], seen["query_string"]) == URL_SEEN[form]


def test_background_tasks_run_after_the_answer_alike(host: Host) -> None:
    """The caller has its answer once the response is complete; the handler's background tasks
    run after it, in both modes."""
    agent = host.agents["FullAgent"]

    async def go() -> dict[str, dict[str, Any]]:
        seen = {}
        for mode in MODES:
            probe: dict[str, Any] = {"release": asyncio.Event()}
            agent.probes["background"] = probe
            response = await agent.self_call(mode, url_path="/v1/responses", json={"input": "background"})
            seen[mode] = {"status": response.status, "finished_when_answered": probe.get("finished", False)}
            probe["release"].set()  # the task runs on after the answer, to its end
            await until(lambda probe=probe: probe.get("finished", False))
        return seen

    seen = host.run(go())
    assert seen["http"] == seen["inprocess"] == {"status": 200, "finished_when_answered": False}


REDIRECTS = {
    **{f"to_a_route_{status}": f"/v1/redirect/{status}" for status in (301, 302, 303, 307, 308)},
    "to_itself": "/v1/redirect/307?to=self",
}


@pytest.mark.slow
@pytest.mark.parametrize("redirect", list(REDIRECTS))
def test_a_redirect_is_returned_not_followed_in_process(host: Host, redirect: str) -> None:
    """Documented difference: aiohttp follows a redirect (and raises ``TooManyRedirects`` after
    10); the helper returns it. NeMo Gym's self-calls post to routes that answer themselves."""
    agent = host.agents["DependentAgent"]
    url_path = REDIRECTS[redirect]

    async def go() -> dict[str, Any]:
        try:
            over_http = await agent.self_call("http", url_path=url_path, json={"input": "x"})
            followed: Any = (over_http.status, len(over_http.history))
        except aiohttp.TooManyRedirects as error:
            followed = ("TooManyRedirects", len(error.history))
        in_process = await responses_in_process(agent, url_path=url_path, json={"input": "x"})
        return {"http": followed, "inprocess": (in_process.status, in_process.headers["location"])}

    got = host.run(go())
    status = int(url_path.split("/")[3].split("?")[0])
    assert got["http"] == (("TooManyRedirects", 10) if redirect == "to_itself" else (200, 1))
    location = f"http://127.0.0.1:{agent.config.port}{url_path}" if redirect == "to_itself" else "/v1/echo"
    assert got["inprocess"] == (status, location)


def test_a_host_header_of_the_caller_replaces_the_servers(host: Host) -> None:
    agent = host.agents["FullAgent"]

    result = host.run(
        both_ways(agent, url_path="/v1/responses", json={"input": "x"}, headers={"Host": "agent.test:81"})
    )

    assert normalize(result["http"]) == normalize(result["inprocess"])
    seen = result["inprocess"]["json"]["value"]["observed"]
    assert seen["url"] == "http://agent.test:81/v1/responses"
    assert [value for name, value in seen["headers"] if name == "host"] == ["agent.test:81"]


@pytest.mark.parametrize("stream", [False, True])
def test_compression_and_chunking_happen_only_over_http(host: Host, stream: bool) -> None:
    """Documented difference: aiohttp asks for gzip and decompresses what GZipMiddleware sends,
    which uvicorn sends chunked; the helper sends no Accept-Encoding and has no wire, so the body
    is the same but those headers (and the compressed length) are absent."""
    agent = host.agents["CompressingAgent"]

    result = host.run(both_ways(agent, url_path="/v1/responses", json={"input": "x", "stream": stream}))

    http, in_process = result["http"], result["inprocess"]
    assert http["read"] == in_process["read"] and http["status"] == in_process["status"] == 200
    assert json.loads(in_process["read"]["value"])["echo"] == {"input": "x", "stream": stream}
    assert ("content-encoding", "gzip") in http["headers"]
    differs = {"content-encoding", "content-length", "transfer-encoding"}
    assert normalize([h for h in http["headers"] if h[0] not in differs]) == normalize(
        [h for h in in_process["headers"] if h[0] not in differs]
    )
    assert not any(name in ("content-encoding", "transfer-encoding") for name, _ in in_process["headers"])


@pytest.mark.parametrize("charset", ["utf-8", "UTF8", "latin-1", "no-such-codec"])
def test_the_declared_charset_decodes_text_alike(host: Host, charset: str) -> None:
    """aiohttp decodes with the declared charset if Python knows it, else JSON's UTF-8."""
    agent = host.agents["CompressingAgent"]

    result = host.run(both_ways(agent, url_path="/v1/responses", json={"charset": charset}))

    for described in result.values():
        del described["headers"]  # compressed over HTTP only, as documented
    assert normalize(result["http"]) == normalize(result["inprocess"])
    word = "cafÃ©" if charset == "latin-1" else "café"
    assert result["inprocess"]["text"] == {"value": json.dumps({"word": word}, ensure_ascii=False)}


def test_header_values_are_sent_in_utf_8_as_aiohttp_writes_them(host: Host) -> None:
    agent = host.agents["FullAgent"]

    result = host.run(
        both_ways(agent, url_path="/v1/responses", json={"input": "x"}, headers={"X-Note": "café 😀"})
    )

    assert normalize(result["http"]) == normalize(result["inprocess"])
    seen = dict(result["inprocess"]["json"]["value"]["observed"]["headers"])
    assert seen["x-note"] == "café 😀".encode().decode("latin-1")  # Starlette reads header bytes as latin-1


@pytest.mark.parametrize(("value", "error"), [("a\r\nb", ValueError), (5, TypeError)])
def test_header_values_aiohttp_refuses_raise_in_the_caller_alike(host: Host, value: Any, error: type) -> None:
    """The same error type; the message is the helper's own (aiohttp's changes between versions)."""
    agent = host.agents["FullAgent"]

    async def go() -> dict[str, type]:
        raised = {}
        for mode in MODES:
            with pytest.raises(error) as caught:
                await agent.self_call(
                    mode, url_path="/v1/responses", json={"input": "x"}, headers={"X-Note": value}
                )
            raised[mode] = type(caught.value)
        return raised

    raised = host.run(go())
    assert raised["http"] == raised["inprocess"]


def test_forwarded_headers_are_applied_over_http_only(host: Host) -> None:
    """Documented difference: uvicorn trusts 127.0.0.1 as a proxy, so the X-Forwarded-Proto and
    X-Forwarded-For the caller sends set the scheme and client over HTTP; the helper has no
    uvicorn in between."""
    agent = host.agents["FullAgent"]
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "10.1.2.3"}

    result = host.run(both_ways(agent, url_path="/v1/responses", json={"input": "x"}, headers=forwarded))

    urls = {mode: result[mode]["json"]["value"]["observed"]["url"] for mode in MODES}
    assert urls["http"] == f"https://127.0.0.1:{agent.config.port}/v1/responses"
    assert urls["inprocess"] == f"http://127.0.0.1:{agent.config.port}/v1/responses"


def test_the_caller_waits_for_a_streamed_body_in_process_only(host: Host) -> None:
    """Documented difference: aiohttp returns the response once its headers arrive and the body
    streams in as it is read; in-process the call returns with the whole body."""
    agent = host.agents["CompressingAgent"]

    async def go() -> dict[str, tuple[bool, bool]]:
        seen = {}
        for mode in MODES:
            agent.probes["stream_finished"] = False
            response = await agent.self_call(
                mode, url_path="/v1/responses", json={"input": "x", "stream": "slow"}
            )
            finished_when_answered = agent.probes["stream_finished"]
            body = json.loads(await response.read())
            seen[mode] = (finished_when_answered, body["echo"]["stream"] == "slow")
        return seen

    seen = host.run(go())
    assert seen == {"http": (False, True), "inprocess": (True, True)}


def test_a_path_without_its_leading_slash_raises_in_the_caller_alike(host: Host) -> None:
    """``base_url + url_path`` is no URL (the path runs into the port): aiohttp raises, as does the helper."""
    agent = host.agents["FullAgent"]

    async def go() -> dict[str, str]:
        raised = {}
        for mode in MODES:
            with pytest.raises(aiohttp.InvalidUrlClientError) as caught:
                await agent.self_call(mode, url_path="v1/responses", json={"input": "x"})
            raised[mode] = str(caught.value)
        return raised

    raised = host.run(go())
    assert raised["http"] == raised["inprocess"] == f"http://127.0.0.1:{agent.config.port}v1/responses"


def test_response_header_values_are_read_as_aiohttp_reads_them(host: Host) -> None:
    """aiohttp decodes header bytes as UTF-8, an invalid byte kept as a surrogate escape."""
    agent = host.agents["CompressingAgent"]

    result = host.run(both_ways(agent, url_path="/v1/responses", json={"headers": True}))

    differs = ("content-encoding", "content-length", "transfer-encoding")  # compressed over HTTP only
    cookies = {}
    for mode, described in result.items():
        described["headers"] = [h for h in described["headers"] if h[0] not in differs]
        cookies[mode] = described.pop("cookies")
    assert normalize(result["http"]) == normalize(result["inprocess"])
    headers = dict(result["inprocess"]["headers"])
    assert (headers["x-latin-1"], headers["x-utf-8"]) == ("caf\udce9", "café 😀")
    assert ("set-cookie", "word=café; Path=/") in result["inprocess"]["headers"]
    # Documented difference: http.cookies (the helper, and aiohttp before 3.12) skips a cookie
    # value beyond ASCII that is not quoted; some later aiohttp releases parse it.
    assert "word" not in cookies["inprocess"]
    cookies["http"].pop("word", None)
    assert normalize(cookies["http"]) == normalize(cookies["inprocess"])  # the session cookie


def test_a_response_header_beyond_aiohttps_limit_fails_over_http_only(host: Host) -> None:
    """Documented difference: aiohttp refuses a response header value over 8190 bytes (a session
    cookie grown that big, say) with a 400 ``ClientResponseError`` in the caller; in-process there
    is no parser and no limit."""
    agent = host.agents["CompressingAgent"]

    async def go(size: int) -> dict[str, Any]:
        outcome: dict[str, Any] = {}
        for mode in MODES:
            try:
                response = await agent.self_call(mode, url_path="/v1/responses", json={"header_size": size})
            except aiohttp.ClientResponseError as error:
                outcome[mode] = ("raised", error.status)
            else:
                outcome[mode] = (response.status, len(response.headers["x-big"]))
        return outcome

    assert host.run(go(8190)) == {"http": (200, 8190), "inprocess": (200, 8190)}
    assert host.run(go(8191)) == {"http": ("raised", 400), "inprocess": (200, 8191)}


def test_nemo_gyms_readers_and_wrappers_read_what_the_helpers_response_serves() -> None:
    """`fix` rewrites a call whose response is passed to NeMo Gym's readers alone, or made through
    the lambda its wrappers are given: each is run on both responses here, and reads nothing of
    the response the helper's does not serve."""
    readers = {"raise_for_status": raise_for_status, "get_response_json": get_response_json}
    wrappers = {
        "retry_checkpoint_refusal": retry_checkpoint_refusal,
        "checkpointable_external_wait": checkpointable_external_wait,
    }
    assert set(readers) == policy.RESPONSE_READERS
    assert set(wrappers) == policy.RESPONSE_WRAPPERS
    for function in [*readers.values(), *wrappers.values()]:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        read = {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "response"
        }
        assert read <= policy.RESPONSE_MEMBERS | policy.RESPONSE_READS, read


@pytest.mark.parametrize("case", ["handler_exception", "http_exception"])
@pytest.mark.parametrize("wrapper", [retry_checkpoint_refusal, checkpointable_external_wait])
def test_a_response_given_back_by_a_wrapper_reads_alike(host: Host, wrapper: Any, case: str) -> None:
    """The retry wrapper reads the status, and the body of a 409, before it gives the response back."""
    agent = host.agents["FullAgent"]

    async def go() -> dict[str, Any]:
        described = {}
        for mode in MODES:
            response = await wrapper(
                lambda mode=mode: agent.self_call(mode, url_path="/v1/responses", **ERROR_CALLS[case])
            )
            described[mode] = await describe(response)
        return described

    result = host.run(go())
    assert normalize(result["http"]) == normalize(result["inprocess"])
    assert result["inprocess"]["status"] == (409 if case == "http_exception" else 500)

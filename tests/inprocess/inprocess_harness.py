"""Small servers shaped like NeMo Gym's, for parity tests of ``selfcall_audit.inprocess``.

An agent (FastAPI, session middleware keyed ``<Class>___<name>``, an exception middleware that
answers 500 with ``repr(exc)`` or the inner-server text, ``/v1/responses`` and its two rollout
twins, ``/run``), a mock model server, and a resources server whose state is keyed by its own
session cookie. Every server runs under uvicorn on 127.0.0.1 inside one background event loop,
and the agents' ``run`` self-calls either over HTTP or through ``responses_in_process``.
"""

# ruff: noqa: B008 - ``body: Model = Body()`` is the FastAPI signature the helper must support

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import json
import re
import threading
from collections import Counter
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal
from uuid import uuid4

import aiohttp
import orjson
import uvicorn
from fastapi import BackgroundTasks, Body, Depends, FastAPI, Header, HTTPException, Request, Response
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, PrivateAttr
from starlette.middleware.gzip import GZipMiddleware
from starlette.middleware.sessions import SessionMiddleware
from typing_extensions import NotRequired, TypedDict

from selfcall_audit.inprocess import responses_in_process

SESSION_ID_KEY = "session_id"
CALLER_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("caller_var", default="default")
HANDLER_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("handler_var", default="default")
# Headers aiohttp adds of its own, which name the client; the in-process call has no client.
CLIENT_HEADERS = ("accept", "accept-encoding", "user-agent")
# Set around ``/run`` as NeMo Gym's ``rollout_context`` sets the current rollout id.
ROLLOUT_VAR: contextvars.ContextVar[str | None] = contextvars.ContextVar("rollout_var", default=None)


# ------------------------------------------------------------------------------------------
# Client side: what agents use to reach other servers
# ------------------------------------------------------------------------------------------


class ServerClient:
    """Posts to servers by instance name over aiohttp, without a cookie jar, like NeMo Gym's."""

    def __init__(self, urls: dict[str, str]) -> None:
        self.urls = urls
        self.requests: Counter[str] = Counter()
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if loop not in self._sessions:
            self._sessions[loop] = aiohttp.ClientSession(
                cookie_jar=aiohttp.DummyCookieJar(), connector=aiohttp.TCPConnector(limit=0)
            )
        return self._sessions[loop]

    async def post(self, server_name: str, url_path: str, **kwargs: Any) -> aiohttp.ClientResponse:
        """NeMo Gym's ``ServerClient.request`` and ``request``: the body forms are theirs."""
        self.requests[server_name] += 1
        if "json" in kwargs and isinstance(kwargs["json"], BaseModel):
            kwargs["json"] = kwargs["json"].model_dump(exclude_unset=True)
        if kwargs.get("json"):
            kwargs["data"] = orjson.dumps(kwargs.pop("json"))
            kwargs["headers"] = {**(kwargs.get("headers") or {}), "Content-Type": "application/json"}
        return await self._session().post(self.urls[server_name] + url_path, **kwargs)

    async def close(self) -> None:
        for session in self._sessions.values():
            await session.close()


async def raise_for_status(response: Any) -> None:
    """NeMo Gym's helper: read the body, raise, and keep the body on the error."""
    if not response.ok:
        content = await response.content.read()
        try:
            response.raise_for_status()
        except aiohttp.ClientResponseError as error:
            error.response_content = content
            raise


async def get_response_json(response: Any) -> Any:
    return json.loads(await response.read())


async def retry_checkpoint_refusal(operation: Any) -> Any:
    """NeMo Gym's agents' wrapper that makes a call again while a checkpoint refuses it (409 with
    a `checkpoint_parked` code) and gives back any other response."""
    while True:
        response = await operation()
        if response.status != 409:
            return response
        refusal = json.loads(await response.read())
        if not isinstance(refusal, dict) or refusal.get("error", {}).get("code") != "checkpoint_parked":
            return response


async def checkpointable_external_wait(operation: Any) -> Any:
    """NeMo Gym's agents' wrapper that marks a wait a checkpoint may cut: the call's own result."""
    return await operation()


# ------------------------------------------------------------------------------------------
# Shared middleware, as NeMo Gym's servers install it
# ------------------------------------------------------------------------------------------


def install_session_middleware(app: FastAPI, key: str) -> None:
    @app.middleware("http")
    async def assign_session_id(request: Request, call_next: Any) -> Any:
        request.session[SESSION_ID_KEY] = request.session.get(SESSION_ID_KEY, str(uuid4()))
        return await call_next(request)

    app.add_middleware(SessionMiddleware, secret_key=key, session_cookie=key)


def install_exception_middleware(app: FastAPI, key: str) -> None:
    @app.middleware("http")
    async def answer_errors(request: Request, call_next: Any) -> Any:
        try:
            return await call_next(request)
        except aiohttp.ClientResponseError as error:
            assert hasattr(error, "response_content"), "use raise_for_status"
            text = f"Hit an exception in {key} calling an inner server: {error.response_content}"
            return JSONResponse(content=text, status_code=500)
        except Exception as error:
            print(f"Caught an exception in {key}. repr(e): {error!r}")
            return JSONResponse(content=repr(error), status_code=500)
        except:  # noqa: E722 - NeMo Gym's middleware answers whatever was raised
            print(f"Caught an unknown exception in {key}.")
            return JSONResponse(content="An unknown error occurred", status_code=500)


def install_validation_handler(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def validation_exception_handler(request: Request, exc: Any) -> Any:
        print(f"Hit validation exception! Errors: {json.dumps(exc.errors(), default=str)}")
        return await request_validation_exception_handler(request, exc)


def traced(handler: Any, probes: dict[str, Any]) -> Any:
    """A tracing wrapper like NeMo Gym's ``traced_endpoint``: FastAPI sees the handler's signature."""
    if not inspect.iscoroutinefunction(handler):
        return handler

    @functools.wraps(handler)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        probes["traced"] = probes.get("traced", 0) + 1
        return await handler(*args, **kwargs)

    return wrapper


# ------------------------------------------------------------------------------------------
# Model server: calls a tool N times ("tools=N" in the first user message), then answers
# ------------------------------------------------------------------------------------------


def build_model_app(log: list[dict[str, Any]]) -> FastAPI:
    app = FastAPI()

    async def responses(request: Request, response: Response, body: dict = Body()) -> Any:
        items = (
            body["input"] if isinstance(body["input"], list) else [{"role": "user", "content": body["input"]}]
        )
        prompt = next(item["content"] for item in items if item.get("role") == "user")
        log.append({"path": request.url.path, "cookie": request.headers.get("cookie"), "prompt": prompt})
        if "model-error" in prompt:
            return JSONResponse({"error": "model overloaded"}, status_code=503)
        wanted = int(m.group(1)) if (m := re.search(r"tools=(\d+)", prompt)) else 0
        outputs = [item for item in items if item.get("type") == "function_call_output"]
        rollout_id = request.path_params.get("rollout_id", "none")
        response.set_cookie("model_affinity", f"m-{rollout_id}")
        if len(outputs) < wanted:
            step = len(outputs) + 1
            item = {
                "type": "function_call",
                "name": "add",
                "arguments": json.dumps({"x": step}),
                "call_id": f"call_{step}",
            }
        else:
            last = outputs[-1]["output"] if outputs else "nothing"
            item = {"type": "message", "role": "assistant", "content": f"done after {len(outputs)}: {last}"}
        return {"id": f"resp_{uuid4().hex[:8]}", "object": "response", "output": [item], "usage": {"t": 1}}

    app.post("/v1/responses")(responses)
    app.post("/ng-rollout/{rollout_id}/v1/responses")(responses)
    app.post("/ng-rollout/{rollout_id}/training-token-capture/v1/responses")(responses)
    return app


# ------------------------------------------------------------------------------------------
# Resources server: per-session running total, keyed by its session cookie
# ------------------------------------------------------------------------------------------


def build_resources_app() -> FastAPI:
    app = FastAPI()
    key = "ResourcesServer___resources"
    install_session_middleware(app, key)
    install_exception_middleware(app, key)
    state: dict[str, dict[str, Any]] = {}

    @app.post("/seed_session")
    async def seed_session(request: Request, body: dict = Body()) -> dict:
        state[request.session[SESSION_ID_KEY]] = {"task": body.get("task"), "total": 0, "calls": 0}
        return {"seeded": True}

    @app.post("/add")
    async def add(request: Request, body: dict = Body()) -> dict:
        session = state.setdefault(request.session[SESSION_ID_KEY], {"task": None, "total": 0, "calls": 0})
        session["total"] += body["x"]
        session["calls"] += 1
        return {"total": session["total"]}

    @app.post("/verify")
    async def verify(request: Request, body: dict = Body()) -> dict:
        session = state.get(request.session[SESSION_ID_KEY])
        known = session is not None and session["task"] == body.get("task")
        return {"task": body.get("task"), "session_known": known, "total": session and session["total"]}

    return app


# ------------------------------------------------------------------------------------------
# Agents
# ------------------------------------------------------------------------------------------


class Interrupted(BaseException):
    """Raised by a handler: not an ``Exception``, so only a bare ``except`` answers it."""


class CreateParams(BaseModel):
    """The request body, strict like NeMo Gym's create params."""

    model_config = ConfigDict(extra="forbid")
    input: str | list[dict[str, Any]]
    model: str | None = None
    metadata: dict[str, Any] | None = None


class CreateParamsDict(TypedDict):
    input: str | list[dict[str, Any]]
    model: NotRequired[str]


class AgentResponse(BaseModel):
    """The response model; extra keys survive, as on NeMo Gym's response model."""

    model_config = ConfigDict(extra="allow")
    id: str
    object: Literal["response"] = "response"
    output: list[dict[str, Any]]
    usage: dict[str, Any] | None = None


class RunRequest(BaseModel):
    responses_create_params: CreateParams
    task: str
    mode: Literal["http", "inprocess"] = "http"
    rollout_id: str | None = None
    capture: bool = False
    turns: int = 1
    activation: bool = False


class AgentConfig(BaseModel):
    name: str
    host: str = "127.0.0.1"
    port: int = 0
    token_capture: bool = False


class Agent(BaseModel):
    """Base of the test agents: the routes, middleware and ``run`` of a NeMo Gym agent."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    config: AgentConfig
    server_client: ServerClient
    probes: dict[str, Any] = {}
    # The app setup_webserver built, which responses_in_process calls (the line fix adds to the base).
    _webserver_app: FastAPI | None = None
    # The /run requests in flight, which a checkpoint cancels (as newer NeMo Gym agents track them).
    _runs: set[asyncio.Task[Any]] = PrivateAttr(default_factory=set)

    def get_session_middleware_key(self) -> str:
        return f"{type(self).__name__}___{self.config.name}"

    def setup_webserver(self) -> FastAPI:
        """As NeMo Gym's newer agents: ``/v1/responses`` and its twins through a tracing wrapper."""
        app = FastAPI()
        self._webserver_app = app
        install_session_middleware(app, self.get_session_middleware_key())
        responses = traced(self.responses, self.probes)
        app.post("/v1/responses")(responses)
        app.post("/ng-rollout/{rollout_id}/v1/responses")(responses)
        app.post("/ng-rollout/{rollout_id}/training-token-capture/v1/responses")(responses)
        run = self.run

        @functools.wraps(run)
        async def run_with_rollout_context(*args: Any, **kwargs: Any) -> dict:
            token = ROLLOUT_VAR.set(kwargs["body"].rollout_id or "none")
            task = asyncio.current_task()
            assert task is not None
            self._runs.add(task)
            try:
                return await run(*args, **kwargs)
            finally:
                self._runs.discard(task)
                ROLLOUT_VAR.reset(token)

        app.post("/run")(run_with_rollout_context)
        app.post("/checkpoint")(self.checkpoint)
        return app

    async def checkpoint(self) -> dict:
        """Cancel the rollouts in flight, as a weight checkpoint retires them."""
        for task in self._runs:
            task.cancel()
        return {"cancelled": len(self._runs)}

    def setup_exception_middleware(self, app: FastAPI) -> None:
        install_exception_middleware(app, self.get_session_middleware_key())

    def url_path_for_run(self, url_path: str, body: RunRequest) -> str:
        if not body.rollout_id:
            return url_path
        capture = "/training-token-capture" if body.capture or self.config.token_capture else ""
        return f"/ng-rollout/{body.rollout_id}{capture}{url_path}"

    def url_path_for_request(self, url_path: str, request: Request | None) -> str:
        rollout_id = request.path_params.get("rollout_id") if request is not None else None
        if not rollout_id:
            return url_path
        capture = "/training-token-capture" if "/training-token-capture/" in request.url.path else ""
        return f"/ng-rollout/{rollout_id}{capture}{url_path}"

    async def self_call(self, mode: str, **kwargs: Any) -> Any:
        if mode == "http":
            return await self.server_client.post(server_name=self.config.name, **kwargs)
        return await responses_in_process(self, **kwargs)

    async def episode(
        self, body: Any, request: Request | None, response: Response | None, **extra: Any
    ) -> AgentResponse:
        """The tool loop of a simple agent, plus what the handler saw, for comparison."""
        params = body if isinstance(body, dict) else body.model_dump(exclude_unset=True)
        items = (
            params["input"]
            if isinstance(params["input"], list)
            else [{"role": "user", "content": params["input"]}]
        )
        prompt = next(item["content"] for item in items if item.get("role") == "user")
        await self._maybe_misbehave(prompt)
        HANDLER_VAR.set("set-by-handler")
        resources_cookies: Any = request.cookies if request is not None else None
        model_cookies: Any = None
        outputs: list[dict[str, Any]] = []
        turns = []
        while True:
            model_response = await self.server_client.post(
                server_name="model",
                url_path=self.url_path_for_request("/v1/responses", request),
                json={**params, "input": items + outputs},
                cookies=model_cookies,
            )
            await raise_for_status(model_response)
            model_json = await get_response_json(model_response)
            model_cookies = model_response.cookies
            outputs.extend(model_json["output"])
            turns.append([item["type"] for item in model_json["output"]])
            calls = [item for item in model_json["output"] if item["type"] == "function_call"]
            if not calls:
                break
            for call in calls:
                tool_response = await self.server_client.post(
                    server_name="resources",
                    url_path=f"/{call['name']}",
                    json=json.loads(call["arguments"]),
                    cookies=resources_cookies,
                )
                resources_cookies = tool_response.cookies
                tool_output = (await tool_response.content.read()).decode()
                outputs.append(
                    {"type": "function_call_output", "call_id": call["call_id"], "output": tool_output}
                )
        if response is not None:
            for name, value in (*(resources_cookies or {}).items(), *model_cookies.items()):
                response.set_cookie(name, value)
        for item in items:  # handlers may mutate their own copy, however deep; the caller's must not change
            if isinstance(item.get("extra"), dict):
                item["extra"]["list"].append("handler")
        if isinstance(body, BaseModel):
            body.input = []
        else:
            body["input"] = []
        result = AgentResponse(id=model_json["id"], output=outputs, usage=model_json["usage"])
        observed: dict[str, Any] = {"caller_var": CALLER_VAR.get(), "rollout_var": ROLLOUT_VAR.get(), **extra}
        if request is not None:
            observed |= {
                "path": request.url.path,
                "raw_path": request.scope["raw_path"].decode("latin-1"),
                "query_string": request.scope["query_string"].decode("latin-1"),
                "url": str(request.url),
                "path_params": dict(request.path_params),
                "query": dict(request.query_params),
                "cookie_header": request.headers.get("cookie"),
                "cookies": dict(request.cookies),
                "activation": request.headers.get("x-ng-agent-activation"),
                "content_type": request.headers.get("content-type"),
                "session_id": request.session.get(SESSION_ID_KEY),
                "model_path": self.url_path_for_request("/v1/responses", request),
                "raw_body": json.loads(await request.body() or b"null"),
                "body_bytes": (await request.body()).decode(),
                "headers": [(k, v) for k, v in request.headers.items() if k not in CLIENT_HEADERS],
            }
            if request.path_params.get("rollout_id"):
                result = result.model_copy(
                    update={"_trajectory": {"turns": turns, "rollout": request.path_params}}
                )
        return result.model_copy(update={"observed": observed})

    async def _maybe_misbehave(self, prompt: str) -> None:
        if prompt == "raise:value":
            raise ValueError("the handler failed")
        if prompt == "raise:http":
            raise HTTPException(status_code=409, detail={"why": "conflict"}, headers={"x-why": "conflict"})
        if prompt == "raise:base":
            raise Interrupted("not an Exception")
        if prompt == "raise:lookup":
            raise KeyError("missing")
        if prompt == "raise:inner-plain":
            raise aiohttp.ClientResponseError(None, (), status=502, message="no content")  # type: ignore[arg-type]
        if prompt == "raise:cancelled":  # a CancelledError of the handler's own; nobody cancelled it
            cancelled = asyncio.get_running_loop().create_future()
            cancelled.cancel()
            await cancelled
        if prompt.startswith("pause:"):  # waits until the test releases it
            probe = self.probes[prompt]
            probe["started"] = True
            try:
                await probe.pop("release").wait()
            except asyncio.CancelledError:
                probe["cancelled"] = True
                raise
            finally:
                probe["finished"] = True
        if prompt.startswith("sleep:"):
            probe = self.probes.setdefault(prompt, {"started": True, "cancelled": False, "finished": False})
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                probe["cancelled"] = True
                raise
            finally:
                probe["finished"] = True

    async def run(self, request: Request, body: RunRequest) -> dict:
        """Seed, self-call ``turns`` times feeding cookies forward, verify; report everything seen."""
        cookies: Any = request.cookies
        seed = await self.server_client.post(
            server_name="resources", url_path="/seed_session", json=body.model_dump(), cookies=cookies
        )
        await raise_for_status(seed)
        cookies = seed.cookies
        params = body.responses_create_params
        url_path = self.url_path_for_run("/v1/responses", body)
        turns = []
        for turn in range(body.turns):
            before = params.model_dump()
            headers = {"x-ng-agent-activation": str(turn + 1)} if body.activation else None
            response = await self.self_call(
                body.mode, url_path=url_path, json=params, cookies=cookies, headers=headers
            )
            await raise_for_status(response)
            data = await get_response_json(response)
            assert params.model_dump() == before, "the self-call mutated the caller's body"
            turns.append(
                {"status": response.status, "json": data, "cookies": describe_cookies(response.cookies)}
            )
            cookies = response.cookies
            params = params.model_copy(update={"input": f"{params.input} again"})
        verify = await self.server_client.post(
            server_name="resources", url_path="/verify", json={"task": body.task}, cookies=cookies
        )
        await raise_for_status(verify)
        return {"turns": turns, "verify": await get_response_json(verify)}


class FullAgent(Agent):
    async def responses(
        self, request: Request, response: Response, background: BackgroundTasks, body: CreateParams = Body()
    ) -> AgentResponse:
        if body.input == "return:invalid":
            return {"id": 1, "output": "not a list"}  # type: ignore[return-value]
        if body.input == "background":
            background.add_task(self.finish_later, self.probes.setdefault("background", {}))
        return await self.episode(body, request, response)

    async def finish_later(self, probe: dict[str, Any]) -> None:
        """A background task: runs after the response is sent, until the test releases it."""
        await probe["release"].wait()
        probe["finished"] = True


def who_calls() -> str:
    return "the dependency"


class DependentAgent(Agent):
    """An app with a dependency override, an exception handler and a middleware of its own, and
    a route that redirects (to ``to``: by default a route that echoes the request; ``self``: a loop)."""

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.dependency_overrides[who_calls] = lambda: "the override"

        @asynccontextmanager
        async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, str]]:
            yield {"pool": "the agent's pool"}  # uvicorn copies it into each request's scope

        app.router.lifespan_context = lifespan

        @app.post("/v1/redirect/{status}")
        async def redirect(request: Request, status: int, to: str = "/v1/echo") -> RedirectResponse:
            return RedirectResponse(str(request.url) if to == "self" else to, status_code=status)

        @app.api_route("/v1/echo", methods=["GET", "POST"])
        async def echo(request: Request) -> dict:
            return {
                "method": request.method,
                "url": str(request.url),
                "headers": [(k, v) for k, v in request.headers.items() if k not in CLIENT_HEADERS],
                "body": (await request.body()).decode(),
                "lifespan_state": dict(request.scope.get("state", {})),
            }

        @app.exception_handler(LookupError)
        async def lookup_failed(request: Request, exc: LookupError) -> JSONResponse:
            return JSONResponse({"lookup": str(exc)}, status_code=418)

        @app.middleware("http")
        async def stamp(request: Request, call_next: Any) -> Any:
            response = await call_next(request)
            response.headers["x-stamp"] = "stamped"
            return response

        return app

    async def responses(
        self,
        request: Request,
        response: Response,
        body: CreateParams = Body(),
        caller: str = Depends(who_calls),
    ) -> AgentResponse:
        return await self.episode(body, request, response, dependency=caller)


class BodyOnlyAgent(Agent):
    async def responses(self, body: CreateParams = Body()) -> AgentResponse:
        return await self.episode(body, None, None)


class RequestBodyAgent(Agent):
    async def responses(self, request: Request, body: CreateParams = Body()) -> AgentResponse:
        return await self.episode(body, request, None)


class ExtrasAgent(Agent):
    async def responses(
        self,
        request: Request,
        response: Response,
        body: CreateParams = Body(),
        x_ng_agent_activation: str | None = Header(default=None),
        verbose: bool = False,
        rollout_id: str | None = None,
    ) -> AgentResponse:
        extra = {"header_param": x_ng_agent_activation, "verbose": verbose, "rollout_param": rollout_id}
        return await self.episode(body, request, response, **extra)


class TypedDictAgent(Agent):
    async def responses(self, request: Request, response: Response, body: CreateParamsDict) -> dict:
        result = await self.episode(body, request, response)
        return result.model_dump()


class AnnotatedAgent(Agent):
    async def responses(self, body: Annotated[CreateParams, Body()], response: Response):
        result = await self.episode(body, None, response)
        response.status_code = 201
        return result.model_dump()


class SyncAgent(Agent):
    def responses(self, body: dict = Body()) -> AgentResponse:
        return AgentResponse(id="sync", output=[{"type": "message", "echo": body}])


class CompressingAgent(Agent):
    """An app behind Starlette's GZipMiddleware; ``{"stream": true}`` streams the answer (``"slow"``:
    its second part 0.2 s later), ``{"charset": C}`` answers a short JSON text declared in charset C,
    ``{"headers": true}`` answers with header and cookie values beyond ASCII, ``{"header_size": N}``
    with a header value of N bytes."""

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.add_middleware(GZipMiddleware, minimum_size=100)
        return app

    async def responses(self, body: dict = Body()) -> Any:
        if "header_size" in body:
            return Response(
                b"{}", media_type="application/json", headers={"x-big": "x" * body["header_size"]}
            )
        if body.get("headers"):
            answer = Response(b"{}", media_type="application/json")
            answer.headers["x-latin-1"] = "café"  # Starlette encodes header values in Latin-1
            answer.raw_headers.append((b"x-utf-8", "café 😀".encode()))
            answer.raw_headers.append((b"set-cookie", "word=café; Path=/".encode()))
            return answer
        if "charset" in body:
            content = json.dumps({"word": "café"}, ensure_ascii=False).encode()
            return Response(content, media_type=f"application/json; charset={body['charset']}")
        text = json.dumps({"echo": body, "padding": "x" * 1000})
        if body.get("stream") == "slow":
            return StreamingResponse(self.slowly(text), media_type="application/json")
        if body.get("stream"):
            return StreamingResponse(iter([text[:10], text[10:]]), media_type="application/json")
        return JSONResponse(json.loads(text))

    async def slowly(self, text: str) -> AsyncIterator[str]:
        yield text[:10]
        await asyncio.sleep(0.2)
        yield text[10:]
        self.probes["stream_finished"] = True


AGENT_CLASSES: tuple[type[Agent], ...] = (
    FullAgent,
    DependentAgent,
    BodyOnlyAgent,
    RequestBodyAgent,
    ExtrasAgent,
    TypedDictAgent,
    AnnotatedAgent,
    SyncAgent,
)
# Served too, for the rows of what differs; not part of the rollout comparisons.
OTHER_AGENT_CLASSES: tuple[type[Agent], ...] = (CompressingAgent,)


def describe_cookies(cookies: Any) -> dict[str, dict[str, Any]]:
    """A cookie jar as plain data: value and every attribute aiohttp parsed."""
    return {
        name: {
            "key": morsel.key,
            "value": morsel.value,
            "coded_value": morsel.coded_value,
            **dict(morsel.items()),
        }
        for name, morsel in cookies.items()
    }


# ------------------------------------------------------------------------------------------
# Hosting
# ------------------------------------------------------------------------------------------


def build_served_app(agent: Agent) -> FastAPI:
    """The app as NeMo Gym's ``run_webserver`` builds it around ``setup_webserver``."""
    app = agent.setup_webserver()

    @app.get("/", include_in_schema=False)
    async def liveness() -> dict:
        return {"status": "ok"}

    agent.setup_exception_middleware(app)
    install_validation_handler(app)
    return app


class Host:
    """Runs the servers under uvicorn in one background event loop on 127.0.0.1."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.servers: list[uvicorn.Server] = []
        self.tasks: list[asyncio.Task[Any]] = []
        self.model_log: list[dict[str, Any]] = []
        self.client = ServerClient({})
        self.agents: dict[str, Agent] = {}
        self.uvicorn: dict[str, uvicorn.Server] = {}

    def start(self) -> None:
        self.thread.start()
        self.run(self._start())

    def stop(self) -> None:
        self.run(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        """Run a coroutine in the servers' loop (where agents run) and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def url(self, name: str) -> str:
        return self.client.urls[name]

    async def _serve(self, app: FastAPI) -> int:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical", lifespan="on")
        server = uvicorn.Server(config)
        self.servers.append(server)
        self.tasks.append(asyncio.create_task(server.serve()))
        while not server.started:
            await asyncio.sleep(0.005)
        return server.servers[0].sockets[0].getsockname()[1]

    async def _start(self) -> None:
        port = await self._serve(build_model_app(self.model_log))
        self.client.urls["model"] = f"http://127.0.0.1:{port}"
        port = await self._serve(build_resources_app())
        self.client.urls["resources"] = f"http://127.0.0.1:{port}"
        for cls in AGENT_CLASSES + OTHER_AGENT_CLASSES:
            name = f"{cls.__name__.lower()}_instance"
            agent = cls(config=AgentConfig(name=name), server_client=self.client)
            agent.config.port = await self._serve(build_served_app(agent))
            self.client.urls[name] = f"http://127.0.0.1:{agent.config.port}"
            self.agents[cls.__name__] = agent
            self.uvicorn[cls.__name__] = self.servers[-1]

    async def _stop(self) -> None:
        await self.client.close()
        for server in self.servers:
            server.should_exit = True
        await asyncio.gather(*self.tasks)

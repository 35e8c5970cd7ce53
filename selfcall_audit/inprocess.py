"""Call an agent's own ``/v1/responses`` handler in-process instead of over HTTP.

``await responses_in_process(self, url_path=P, json=J, cookies=C)`` replaces
``await self.server_client.post(server_name=self.config.name, url_path=P, json=J, cookies=C)``.
It runs the agent's ``responses`` handler as the agent's FastAPI app would and returns an object
that behaves like the ``aiohttp.ClientResponse`` of the HTTP self-call, so the code around the
call (``raise_for_status``, ``get_response_json``, ``.cookies``, ...) keeps working unchanged.

Reproduced from the HTTP path:

- the handler gets a real ``starlette.requests.Request`` for ``url_path`` (path params of the
  ``/ng-rollout/{rollout_id}/...`` twins, query string, the ``Cookie`` header aiohttp would
  send for ``cookies``, the caller's ``headers``), a ``fastapi.Response`` to set cookies on, and
  its body validated against the parameter's annotation; a failed validation is FastAPI's 422;
- the return value is serialised with the response model of the return annotation, as FastAPI
  does; a returned ``Response`` is passed through;
- ``HTTPException`` becomes its status and ``{"detail": ...}`` body; any other exception the
  500 that NeMo Gym's exception middleware sends: ``repr(exc)`` as a JSON string, or "Hit an
  exception in <Class>___<name> calling an inner server: <body>" for an inner server's
  ``ClientResponseError``;
- on NeMo Gym servers (they have ``get_session_middleware_key``) the session middleware pair is
  reproduced with Starlette's own signer and cookie settings: the agent's session cookie is read
  from ``cookies`` and a ``session_id`` assigned, so ``request.session`` works, and ``.cookies``
  holds what the HTTP response's ``Set-Cookie`` headers held: the cookies the handler set plus
  the agent's own (signed) session cookie, which the agent's HTTP routes accept and vice versa.
  Other cookies the handler received are not echoed back, over HTTP or here.

Different by design: no socket, hence no client address and no Date, Server, Accept, User-Agent
or Content-Length headers; the handler runs inside the caller's task, in a copy of the caller's
``contextvars`` context (it sees the caller's context variables, e.g. a current rollout id, and
cannot change them); cancelling the caller cancels the handler; background tasks finish before
the call returns.

Only the standard library is imported with this module; fastapi, starlette, pydantic, aiohttp,
multidict and yarl are imported on first use, so the file can be vendored as it is.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import json as jsonlib
import logging
import re
import typing
import weakref
from base64 import b64decode, b64encode
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Iterable, Mapping
from copy import deepcopy
from dataclasses import dataclass, field, is_dataclass
from http import HTTPStatus
from http.cookies import Morsel, SimpleCookie
from types import SimpleNamespace, UnionType
from typing import Any
from urllib.parse import quote, unquote
from uuid import uuid4

__all__ = ["InProcessResponse", "responses_in_process"]

_log = logging.getLogger(__name__)

# The routes NeMo Gym's SimpleResponsesAPIAgent serves with its ``responses`` handler.
_ROUTE = re.compile(r"(?:/ng-rollout/(?P<rollout_id>[^/]+)(?:/training-token-capture)?)?/v1/responses")
# NeMo Gym's session middleware keys the rollout session by this.
_SESSION_ID_KEY = "session_id"
_JSON_MEDIA_TYPE = re.compile(r"^application/(?:[\w.+-]+?\+)?json")
_ENCODE_COOKIE_VALUE = SimpleCookie().value_encode
# What a client sends as it is in a path or query (``%`` too: escapes in ``url_path`` stay escapes).
_URL_SAFE = re.compile(r"[A-Za-z0-9/%!$&'()*+,;=:@\-._~?]*")

_Headers = Mapping[str, str] | Iterable[tuple[str, str]]


class _Unset:
    """An absent body or parameter (``None`` is a valid JSON body)."""

    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()


@functools.cache
def _lib() -> SimpleNamespace:
    """The framework names used per call, imported once and on first use."""
    from fastapi import params
    from fastapi.encoders import jsonable_encoder
    from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
    from fastapi.exceptions import RequestValidationError, ResponseValidationError
    from fastapi.utils import is_body_allowed_for_status_code
    from pydantic import BaseModel, TypeAdapter, ValidationError
    from pydantic_core import to_jsonable_python
    from starlette.background import BackgroundTasks
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException
    from starlette.requests import HTTPConnection, Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response

    try:
        from aiohttp import ClientResponseError
    except ImportError:  # without aiohttp no inner-server error can reach the handler
        inner_server_error: Any = ()
    else:
        inner_server_error = ClientResponseError

    return SimpleNamespace(
        params=params,
        jsonable_encoder=jsonable_encoder,
        http_exception_handler=http_exception_handler,
        request_validation_exception_handler=request_validation_exception_handler,
        RequestValidationError=RequestValidationError,
        ResponseValidationError=ResponseValidationError,
        is_body_allowed_for_status_code=is_body_allowed_for_status_code,
        BaseModel=BaseModel,
        TypeAdapter=TypeAdapter,
        ValidationError=ValidationError,
        to_jsonable_python=to_jsonable_python,
        BackgroundTasks=BackgroundTasks,
        run_in_threadpool=run_in_threadpool,
        HTTPException=HTTPException,
        HTTPConnection=HTTPConnection,
        Request=Request,
        JSONResponse=JSONResponse,
        PlainTextResponse=PlainTextResponse,
        Response=Response,
        ClientResponseError=inner_server_error,
    )


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


async def responses_in_process(
    agent: Any,
    *,
    url_path: str,
    json: Any = None,
    cookies: Any = None,
    headers: _Headers | None = None,
) -> InProcessResponse:
    """Run ``agent.responses`` for ``url_path`` in-process; returns a ClientResponse look-alike.

    ``url_path`` is ``/v1/responses`` or one of its ``/ng-rollout/{rollout_id}/`` twins, with an
    optional query string. ``json`` is a pydantic model (dumped with ``exclude_unset=True`` as
    NeMo Gym's ServerClient dumps it) or JSON-able data, and is never mutated. ``cookies`` is a
    mapping (``dict``, ``SimpleCookie``), ``(name, value)`` pairs, or Morsels (a cookie jar).
    """
    handler = getattr(agent, "responses", None)
    if not callable(handler):
        raise TypeError(f"{type(agent).__name__} has no callable `responses` handler")
    path, _, query = url_path.partition("?")
    match = _ROUTE.fullmatch(unquote(path))
    if match is None:
        raise ValueError(f"{url_path!r} is not /v1/responses or one of its /ng-rollout/{{rollout_id}}/ twins")
    exchange = _Exchange(
        agent=agent,
        handler=handler,
        plan=_plan_for(handler),
        scope=_build_scope(agent, path, query, match.group("rollout_id"), json, cookies, headers),
        payload=_payload(json),
    )
    return await _InContext(exchange.run(), contextvars.copy_context())


class InProcessResponse:
    """The parts of ``aiohttp.ClientResponse`` that agent code uses after a self-call.

    Body reads follow aiohttp, so code behaves as it did over HTTP: ``.content`` is a one-shot
    stream and ``read()`` caches what is left of it; ``release()``, and ``raise_for_status()``
    on an error outside ``async with``, drop an unread body (later reads raise
    ``ClientConnectionError``, as NeMo Gym's ``raise_for_status`` callers would see over HTTP).
    """

    method = "POST"
    history: tuple[Any, ...] = ()

    def __init__(
        self,
        status: int,
        raw_headers: list[tuple[bytes, bytes]],
        body: bytes,
        request_scope: Mapping[str, Any],
        error: BaseException | None = None,
        parsed_cookies: Mapping[str, tuple[tuple[str, Morsel[str]], ...]] | None = None,
    ) -> None:
        self.status = status
        self.reason = _reason(status)
        self.content = _Content(body)
        self._raw_headers = raw_headers
        self._scope = request_scope
        self._error = error
        self._parsed_cookies = parsed_cookies or {}
        self._body: bytes | None = None
        self._headers: Any = None
        self._cookies: SimpleCookie | None = None
        self._released = False
        self._in_context = False

    def __repr__(self) -> str:
        return f"<InProcessResponse({self._url()}) [{self.status} {self.reason}]>"

    @property
    def ok(self) -> bool:
        """``True`` for a status below 400, as in aiohttp."""
        return self.status < 400

    @property
    def headers(self) -> Any:
        """Response headers as a case-insensitive ``multidict.CIMultiDictProxy``."""
        if self._headers is None:
            self._headers = _multidict(self._raw_headers)
        return self._headers

    @property
    def cookies(self) -> SimpleCookie:
        """The response's ``Set-Cookie`` headers, parsed as aiohttp parses them."""
        if self._cookies is None:
            values = [value.decode("latin-1") for name, value in self._raw_headers if name == b"set-cookie"]
            self._cookies = _parse_set_cookies(values, self._parsed_cookies)
        return self._cookies

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "application/octet-stream").partition(";")[0].strip().lower()

    @property
    def charset(self) -> str | None:
        for param in self.headers.get("Content-Type", "").split(";")[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "charset":
                return value.strip().strip('"')
        return None

    @property
    def url(self) -> Any:
        """The URL the HTTP self-call would have used, as a ``yarl.URL``."""
        from yarl import URL

        return URL(self._url())

    real_url = url

    @property
    def request_info(self) -> Any:
        from aiohttp import RequestInfo

        return RequestInfo(self.url, self.method, _multidict(self._scope["headers"]), self.url)

    @property
    def closed(self) -> bool:
        return self._released or self.content.at_eof()

    def _url(self) -> str:
        server, query = self._scope["server"], self._scope["query_string"].decode("latin-1")
        origin = f"http://{server[0]}:{server[1]}" if server else "http://in-process"
        return origin + self._scope["raw_path"].decode("latin-1") + (f"?{query}" if query else "")

    async def read(self) -> bytes:
        """The body (what is left of ``.content``), cached as aiohttp caches it."""
        if self._body is None:
            try:
                self._body = await self.content.read()
            except BaseException:
                self.close()
                raise
        elif self._released:
            raise _connection_closed()
        return self._body

    async def text(self, encoding: str | None = None, errors: str = "strict") -> str:
        body = self._body if self._body is not None else await self.read()
        return body.decode(encoding or self.charset or "utf-8", errors)

    async def json(
        self,
        *,
        encoding: str | None = None,
        loads: Callable[[str], Any] = jsonlib.loads,
        content_type: str | None = "application/json",
    ) -> Any:
        """Decode the body as JSON; other media types raise unless ``content_type=None``."""
        body = self._body if self._body is not None else await self.read()
        if content_type:
            ctype = self.headers.get("Content-Type", "").lower()
            if content_type == "application/json":
                expected = bool(_JSON_MEDIA_TYPE.match(ctype))
            else:
                expected = content_type in ctype
            if not expected:
                from aiohttp import ContentTypeError

                raise ContentTypeError(
                    self.request_info,
                    self.history,
                    status=self.status,
                    message=f"Attempt to decode JSON with unexpected mimetype: {ctype}",
                    headers=self.headers,
                )
        stripped = body.strip()
        if not stripped:
            return None
        return loads(stripped.decode(encoding or self.charset or "utf-8"))

    def raise_for_status(self) -> None:
        """Raise ``aiohttp.ClientResponseError`` for a status >= 400, chained to the handler's error."""
        if self.ok:
            return
        from aiohttp import ClientResponseError

        if not self._in_context:
            self.release()
        raise ClientResponseError(
            self.request_info, self.history, status=self.status, message=self.reason, headers=self.headers
        ) from self._error

    def release(self) -> Awaitable[None]:
        """Drop what is left of the body; the result may be awaited or not, as in aiohttp."""
        self.close()
        return _DONE

    def close(self) -> None:
        if not self._released:
            self.content.set_exception(_connection_closed())
            self._released = True

    async def __aenter__(self) -> InProcessResponse:
        self._in_context = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._in_context = False
        self.release()


# --------------------------------------------------------------------------------------------
# Response pieces
# --------------------------------------------------------------------------------------------


class _Done:
    """An already finished awaitable, for callers that ``await response.release()``."""

    def __await__(self) -> Generator[Any, None, None]:
        return iter(())


_DONE = _Done()


class _Content:
    """A one-shot byte stream with the reading methods of ``aiohttp.StreamReader``."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0
        self._exception: BaseException | None = None

    def exception(self) -> BaseException | None:
        return self._exception

    def set_exception(self, exc: BaseException) -> None:
        self._exception = exc

    def at_eof(self) -> bool:
        return self._pos >= len(self._data)

    async def read(self, n: int = -1) -> bytes:
        if self._exception is not None:
            raise self._exception
        end = len(self._data) if n < 0 else min(len(self._data), self._pos + n)
        chunk = self._data[self._pos : end]
        self._pos = end
        return chunk

    async def readany(self) -> bytes:
        return await self.read()

    async def readline(self) -> bytes:
        newline = self._data.find(b"\n", self._pos)
        return await self.read(-1 if newline < 0 else newline + 1 - self._pos)

    async def readexactly(self, n: int) -> bytes:
        chunk = await self.read(n)
        if len(chunk) < n:
            raise asyncio.IncompleteReadError(chunk, n)
        return chunk

    async def iter_chunked(self, n: int) -> AsyncIterator[bytes]:
        while not self.at_eof():
            yield await self.read(n)

    async def iter_any(self) -> AsyncIterator[bytes]:
        while not self.at_eof():
            yield await self.read()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while not self.at_eof():
            yield await self.readline()


def _connection_closed() -> Exception:
    from aiohttp import ClientConnectionError

    return ClientConnectionError("Connection closed")


def _reason(status: int) -> str:
    """The reason phrase uvicorn sends, which aiohttp exposes as ``reason``."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _multidict(raw: list[tuple[bytes, bytes]]) -> Any:
    from multidict import CIMultiDict, CIMultiDictProxy

    return CIMultiDictProxy(
        CIMultiDict((name.decode("latin-1"), value.decode("latin-1")) for name, value in raw)
    )


def _parse_set_cookies(
    values: list[str], parsed: Mapping[str, tuple[tuple[str, Morsel[str]], ...]]
) -> SimpleCookie:
    """Parse ``Set-Cookie`` values as aiohttp parses them (callers may mutate what they get)."""
    cookies = SimpleCookie()
    for value in values:
        for name, morsel in parsed.get(value) or _parse_set_cookie(value):
            cookies[name] = morsel.copy()
    return cookies


@functools.lru_cache(maxsize=1024)
def _parse_set_cookie(value: str) -> tuple[tuple[str, Morsel[str]], ...]:
    """One ``Set-Cookie`` value, parsed once: a rollout's cookies repeat on every call."""
    try:
        from aiohttp._cookie_helpers import parse_set_cookie_headers
    except ImportError:  # aiohttp < 3.12 loaded each header into a SimpleCookie
        jar = SimpleCookie()
        jar.load(value)
        return tuple(jar.items())
    return tuple(parse_set_cookie_headers([value]))


# --------------------------------------------------------------------------------------------
# Request side
# --------------------------------------------------------------------------------------------


def _payload(json: Any) -> Any:
    """A private JSON-shaped copy of the body: what the handler would have parsed off the wire."""
    if json is None:
        return _UNSET
    lib = _lib()
    if isinstance(json, lib.BaseModel):
        return json.model_dump(mode="json", exclude_unset=True)
    return lib.to_jsonable_python(json)


def _build_scope(
    agent: Any,
    path: str,
    query: str,
    rollout_id: str | None,
    json: Any,
    cookies: Any,
    headers: _Headers | None,
) -> dict[str, Any]:
    """The ASGI scope uvicorn would build for the aiohttp request of the HTTP self-call."""
    config = getattr(agent, "config", None)
    host, port = getattr(config, "host", None), getattr(config, "port", None)
    raw: list[tuple[bytes, bytes]] = []
    if host and port:
        raw.append((b"host", f"{host}:{port}".encode("latin-1")))
    cookie_header = None
    for name, value in headers.items() if isinstance(headers, Mapping) else headers or ():
        if name.lower() == "cookie":
            cookie_header = value
        else:
            raw.append((name.lower().encode("latin-1"), str(value).encode("latin-1")))
    if json is not None and all(name != b"content-type" for name, _ in raw):
        raw.append((b"content-type", b"application/json"))
    if cookies:
        cookie_header = _cookie_header(cookies, cookie_header)
    if cookie_header:
        raw.append((b"cookie", cookie_header.encode("latin-1")))
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": unquote(path),
        "raw_path": _escaped(path),
        "root_path": "",
        "query_string": _escaped(query),
        "headers": raw,
        "client": None,
        "server": (host, port) if host and port else None,
        "state": {},
        "path_params": {} if rollout_id is None else {"rollout_id": rollout_id},
    }


def _escaped(text: str) -> bytes:
    """``text`` as a client puts it on the wire: unsafe characters %-escaped, escapes kept."""
    if _URL_SAFE.fullmatch(text) is None:
        text = quote(text, safe="/%!$&'()*+,;=:@-._~?")
    return text.encode("ascii")


def _cookie_header(cookies: Any, existing: str | None) -> str:
    """The ``Cookie`` header aiohttp's ``ClientRequest.update_cookies`` builds, without its cost.

    aiohttp loads everything into a ``SimpleCookie`` and prints it: pairs sorted by name, a
    Morsel's coded value as it came, a string quoted the way ``SimpleCookie`` quotes it.
    """
    merged: dict[str, Any] = dict(SimpleCookie(existing)) if existing else {}
    for item in cookies.items() if isinstance(cookies, Mapping) else cookies:
        name, value = (item.key, item) if isinstance(item, Morsel) else item
        merged[name] = value
    parts = []
    for name in sorted(merged):
        value = merged[name]
        if not isinstance(value, Morsel):
            morsel: Morsel[str] = Morsel()
            morsel.set(name, *_ENCODE_COOKIE_VALUE(value))  # raises CookieError where aiohttp would
            value = morsel
        parts.append(f"{value.key}={value.coded_value}")
    return "; ".join(parts)


# --------------------------------------------------------------------------------------------
# Handler plan: how FastAPI would bind each parameter and serialise the result
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Param:
    name: str
    kind: str  # request | response | background | body | path | query | header | cookie
    alias: str = ""
    adapter: Any = None
    make_default: Callable[[], Any] | None = None  # None: the parameter is required
    validate_default: bool = False


@dataclass(frozen=True)
class _Plan:
    params: tuple[_Param, ...]
    embed_body: bool
    is_coroutine: bool
    response_adapter: Any
    takes_response: bool
    takes_background: bool


_PLANS: weakref.WeakKeyDictionary[Any, _Plan] = weakref.WeakKeyDictionary()


def _plan_for(handler: Callable[..., Any]) -> _Plan:
    """The handler's plan, built once per function (bound methods share their function's plan)."""
    key = getattr(handler, "__func__", handler)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = _make_plan(handler)
    return plan


def _make_plan(handler: Callable[..., Any]) -> _Plan:
    """How FastAPI would bind the handler's parameters and serialise its result.

    Only what a ``responses`` handler can ask for is supported (request, response, background
    tasks, body, path, query, header and cookie parameters); dependencies and forms raise.
    """
    lib = _lib()
    special = lib.params.Depends | lib.params.Param | lib.params.Body
    signature = inspect.signature(handler, eval_str=True)
    bound: list[_Param] = []
    embed = False
    for name, parameter in signature.parameters.items():
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        annotation = Any if parameter.annotation is inspect.Parameter.empty else parameter.annotation
        field_info = parameter.default if isinstance(parameter.default, special) else None
        if typing.get_origin(annotation) is typing.Annotated:
            annotation, *metadata = typing.get_args(annotation)
            field_info = next((item for item in reversed(metadata) if isinstance(item, special)), field_info)
        if _is_subclass(annotation, lib.HTTPConnection):
            bound.append(_Param(name, "request"))
        elif _is_subclass(annotation, lib.Response):
            bound.append(_Param(name, "response"))
        elif _is_subclass(annotation, lib.BackgroundTasks):
            bound.append(_Param(name, "background"))
        elif isinstance(field_info, lib.params.Depends | lib.params.Form):
            raise TypeError(f"responses_in_process cannot bind {name!r} of {handler!r}: {field_info!r}")
        else:
            kind = _param_kind(name, annotation, field_info, lib.params)
            embed = embed or bool(getattr(field_info, "embed", False))
            bound.append(_field_param(name, kind, annotation, parameter.default, field_info))
    kinds = [param.kind for param in bound]
    return _Plan(
        params=tuple(bound),
        embed_body=embed or kinds.count("body") > 1,
        is_coroutine=_is_coroutine(handler),
        response_adapter=_response_adapter(signature),
        takes_response="response" in kinds,
        takes_background="background" in kinds,
    )


def _field_param(name: str, kind: str, annotation: Any, default: Any, field_info: Any) -> _Param:
    """A validated parameter: its alias, type adapter and default, as FastAPI derives them."""
    alias = getattr(field_info, "alias", None) or name
    if kind == "header" and field_info.alias is None and field_info.convert_underscores:
        alias = name.replace("_", "-")
    make_default: Callable[[], Any] | None
    if field_info is None:
        make_default = None if default is inspect.Parameter.empty else functools.partial(deepcopy, default)
        validate_default = False
    else:
        make_default = None if field_info.is_required() else _default_maker(field_info)
        validate_default = bool(field_info.validate_default)
    return _Param(name, kind, alias, _lib().TypeAdapter(annotation), make_default, validate_default)


def _default_maker(field_info: Any) -> Callable[[], Any]:
    """A fresh default per call, as FastAPI gives (factory, else a deep copy)."""
    if field_info.default_factory is not None:
        return field_info.default_factory
    return functools.partial(deepcopy, field_info.default)


def _param_kind(name: str, annotation: Any, field_info: Any, params: Any) -> str:
    """Where FastAPI reads a parameter from: explicit marker, route path, else body or query."""
    if isinstance(field_info, params.Body):
        return "body"
    if isinstance(field_info, params.Param):
        return str(field_info.in_.value)
    if name == "rollout_id":
        return "path"
    return "body" if _is_complex(annotation) else "query"


def _is_complex(annotation: Any) -> bool:
    """FastAPI's test for a parameter that comes from the body rather than the query string."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is UnionType:
        return any(_is_complex(arg) for arg in typing.get_args(annotation))
    cls = origin or annotation
    return is_dataclass(cls) or _is_subclass(cls, (_lib().BaseModel, Mapping, list, set, frozenset, tuple))


def _is_subclass(cls: Any, parents: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, parents)


def _is_coroutine(handler: Callable[..., Any]) -> bool:
    call = getattr(handler, "__call__", None)  # noqa: B004 - an object with an async __call__
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def _response_adapter(signature: inspect.Signature) -> Any:
    """The route's response model, inferred from the return annotation as FastAPI infers it."""
    annotation = signature.return_annotation
    if annotation in (inspect.Signature.empty, None) or _is_subclass(annotation, _lib().Response):
        return None
    return _lib().TypeAdapter(annotation)


# --------------------------------------------------------------------------------------------
# One call
# --------------------------------------------------------------------------------------------


class _Sink:
    """Collects the ASGI response messages that would have gone to the socket."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []

    async def send(self, message: Mapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = list(message.get("headers", ()))
        elif message["type"] == "http.response.body":
            self.chunks.append(bytes(message.get("body", b"")))


@dataclass
class _Exchange:
    """One in-process request through the stack NeMo Gym puts around the agent's route."""

    agent: Any
    handler: Callable[..., Any]
    plan: _Plan
    scope: dict[str, Any]
    payload: Any
    error: BaseException | None = None
    body_sent: bool = False
    parsed_cookies: dict[str, tuple[tuple[str, Morsel[str]], ...]] = field(default_factory=dict)

    async def run(self) -> InProcessResponse:
        """Exception middleware, then session middleware (NeMo Gym servers), then the route."""
        sink = _Sink()
        # Looked up on the class: a miss on a pydantic instance goes through its slow __getattr__.
        has_session = callable(getattr(type(self.agent), "get_session_middleware_key", None))
        server_key = (
            self.agent.get_session_middleware_key() if has_session else _fallback_server_key(self.agent)
        )
        try:
            await self._route(_session_cookie(server_key) if has_session else None, sink)
        except (Exception, asyncio.CancelledError) as exc:
            if sink.status is not None:  # the response had started: nothing sane to replace it with
                raise
            if isinstance(exc, asyncio.CancelledError):
                if _cancelled_from_outside():
                    raise
                # The handler's own CancelledError: over HTTP, Starlette's BaseHTTPMiddleware
                # (NeMo Gym's middleware) turns the missing response into this error.
                self.error = RuntimeError("No response returned.")
                self.error.__cause__ = exc
            else:
                self.error = exc
            await _exception_response(self.error, server_key)(self.scope, self._receive, sink.send)
        return InProcessResponse(
            status=sink.status or 500,
            raw_headers=sink.headers,
            body=b"".join(sink.chunks),
            request_scope=self.scope,
            error=self.error,
            parsed_cookies=self.parsed_cookies,
        )

    async def _receive(self) -> dict[str, Any]:
        """The JSON body (serialised only if the handler reads it), then a client that stays."""
        if self.body_sent:
            return await asyncio.get_running_loop().create_future()
        self.body_sent = True
        body = b"" if self.payload is _UNSET else _dumps(self.payload)
        return {"type": "http.request", "body": body, "more_body": False}

    async def _route(self, session_cookie: _SessionCookie | None, sink: _Sink) -> None:
        """Session middleware (NeMo Gym's pair), FastAPI's route handler and exception handlers."""
        lib = _lib()
        request = lib.Request(self.scope, self._receive)
        if session_cookie is not None:
            session, loaded = session_cookie.load(request)
            session[_SESSION_ID_KEY] = session.get(_SESSION_ID_KEY, str(uuid4()))
            self.scope["session"] = session
        try:
            response = await self._call_handler(request)
        except lib.HTTPException as exc:
            self.error = exc
            response = await lib.http_exception_handler(request, exc)
        except lib.RequestValidationError as exc:
            self.error = exc
            response = await lib.request_validation_exception_handler(request, exc)
        await response(self.scope, self._receive, sink.send)
        if session_cookie is not None:
            self.parsed_cookies = session_cookie.add_headers(sink.headers, session, loaded)

    async def _call_handler(self, request: Any) -> Any:
        lib = _lib()
        sub_response = _sub_response() if self.plan.takes_response else None
        background = lib.BackgroundTasks() if self.plan.takes_background else None
        values, errors = self._bind(request, sub_response, background)
        if errors:
            raise lib.RequestValidationError(errors, body=None if self.payload is _UNSET else self.payload)
        if self.plan.is_coroutine:
            raw = await self.handler(**values)
        else:
            raw = await lib.run_in_threadpool(self.handler, **values)
        if isinstance(raw, lib.Response):
            if raw.background is None:
                raw.background = background
            return raw
        status = getattr(sub_response, "status_code", None) or 200
        adapter = self.plan.response_adapter
        if adapter is None:
            response = lib.JSONResponse(lib.jsonable_encoder(raw), status_code=status, background=background)
        else:
            try:
                value = adapter.validate_python(raw, from_attributes=True)
            except lib.ValidationError as exc:
                errors = [
                    {**error, "loc": ("response", *error["loc"])} for error in exc.errors(include_url=False)
                ]
                raise lib.ResponseValidationError(errors, body=raw) from exc
            content = adapter.dump_json(value, by_alias=True)
            response = lib.Response(content, status, media_type="application/json", background=background)
        if not lib.is_body_allowed_for_status_code(response.status_code):
            response.body = b""
        if sub_response is not None:
            response.raw_headers.extend(sub_response.raw_headers)
        return response

    def _bind(self, request: Any, sub_response: Any, background: Any) -> tuple[dict[str, Any], list[Any]]:
        """The handler's arguments and the validation errors, as FastAPI binds them."""
        validation_error = _lib().ValidationError
        values: dict[str, Any] = {}
        errors: list[Any] = []
        for param in self.plan.params:
            if param.kind == "request":
                values[param.name] = request
                continue
            if param.kind == "response":
                values[param.name] = sub_response
                continue
            if param.kind == "background":
                values[param.name] = background
                continue
            raw, loc = self._raw_value(param, request)
            if raw is _UNSET:
                if param.make_default is None:
                    errors.append({"type": "missing", "loc": loc, "msg": "Field required", "input": None})
                    continue
                raw = param.make_default()
                if not param.validate_default:
                    values[param.name] = raw
                    continue
            try:
                values[param.name] = param.adapter.validate_python(raw, from_attributes=True)
            except validation_error as exc:
                errors.extend(
                    {**error, "loc": (*loc, *error["loc"])} for error in exc.errors(include_url=False)
                )
        return values, errors

    def _raw_value(self, param: _Param, request: Any) -> tuple[Any, tuple[str, ...]]:
        """Where the parameter's value comes from, and the error location FastAPI reports."""
        if param.kind == "body":
            if not self.plan.embed_body:
                return self.payload, ("body",)
            found = self.payload.get(param.alias, _UNSET) if isinstance(self.payload, dict) else _UNSET
            return found, ("body", param.alias)
        if param.kind == "path" and param.alias in self.scope["path_params"]:
            return self.scope["path_params"][param.alias], ("path", param.alias)
        if param.kind == "header":
            return request.headers.get(param.alias, _UNSET), ("header", param.alias)
        if param.kind == "cookie":
            return request.cookies.get(param.alias, _UNSET), ("cookie", param.alias)
        return request.query_params.get(param.alias, _UNSET), ("query", param.alias)


class _SessionCookie:
    """Starlette's ``SessionMiddleware`` as NeMo Gym installs it, without the ASGI wrapping.

    The middleware's own signer and cookie settings are reused, so the cookie is the one the
    agent's app would set and accept; the session is always written, because NeMo Gym's
    middleware assigns ``session_id`` on every request.
    """

    def __init__(self, key: str) -> None:
        from itsdangerous import BadSignature
        from starlette.middleware.sessions import SessionMiddleware

        middleware = SessionMiddleware(app=None, secret_key=key, session_cookie=key)  # type: ignore[arg-type]
        self.bad_signature = BadSignature
        self.name = middleware.session_cookie
        self.signer = middleware.signer
        self.max_age = middleware.max_age
        self.path = middleware.path
        self.flags = middleware.security_flags
        max_age = "" if self.max_age is None else f"Max-Age={self.max_age}; "
        self.attributes = f"path={self.path}; {max_age}{self.flags}"
        # What aiohttp parses out of this cookie's attributes; only the value changes per call.
        ((_, self.parsed),) = _parse_set_cookie(f"{self.name}=value; {self.attributes}")

    def load(self, request: Any) -> tuple[dict[str, Any], bool]:
        """The session the request's cookie carries (empty if none or forged), and whether it had one."""
        cookie = request.cookies.get(self.name)
        if cookie is not None:
            try:
                data = self.signer.unsign(cookie.encode("utf-8"), max_age=self.max_age)
                return jsonlib.loads(b64decode(data)), True
            except self.bad_signature:
                pass
        return {}, False

    def add_headers(
        self, headers: list[tuple[bytes, bytes]], session: dict[str, Any], loaded: bool
    ) -> dict[str, tuple[tuple[str, Morsel[str]], ...]]:
        """Append ``Vary: Cookie`` and the session's ``Set-Cookie`` as the middleware does.

        Returns the new ``Set-Cookie`` value already parsed, since parsing it costs more than
        building it and it is new on every call.
        """
        vary = [index for index, (name, _) in enumerate(headers) if name == b"vary"]
        if vary:
            headers[vary[0]] = (b"vary", headers[vary[0]][1] + b", Cookie")
            for index in reversed(vary[1:]):
                del headers[index]
        else:
            headers.append((b"vary", b"Cookie"))
        if session:
            data = self.signer.sign(b64encode(jsonlib.dumps(session).encode("utf-8"))).decode("utf-8")
            value = f"{self.name}={data}; {self.attributes}"
            headers.append((b"set-cookie", value.encode("latin-1")))
            morsel = self.parsed.copy()
            morsel.set(self.name, data, data)
            return {value: ((self.name, morsel),)}
        if loaded:
            expires = "expires=Thu, 01 Jan 1970 00:00:00 GMT; "
            value = f"{self.name}=null; path={self.path}; {expires}{self.flags}"
            headers.append((b"set-cookie", value.encode("latin-1")))
        return {}


@functools.lru_cache(maxsize=256)
def _session_cookie(key: str) -> _SessionCookie:
    return _SessionCookie(key)


def _sub_response() -> Any:
    """The ``Response`` FastAPI hands to handlers: no headers and no status until they set some."""
    response = _lib().Response()
    del response.headers["content-length"]
    response.status_code = None
    return response


def _cancelled_from_outside() -> bool:
    """Whether the running task was asked to cancel; Python 3.10 cannot tell, so assume it was."""
    cancelling = getattr(asyncio.current_task(), "cancelling", None)
    return cancelling is None or cancelling() > 0


def _fallback_server_key(agent: Any) -> str:
    """NeMo Gym's ``<Class>___<instance>`` key for an agent without ``get_session_middleware_key``."""
    return f"{type(agent).__name__}___{getattr(getattr(agent, 'config', None), 'name', None)}"


def _exception_response(exc: BaseException, server_key: str) -> Any:
    """The 500 NeMo Gym's exception middleware answers with; callers classify failures by it."""
    lib = _lib()
    _log.error("in-process /v1/responses handler of %s raised %r", server_key, exc, exc_info=exc)
    if isinstance(exc, lib.ClientResponseError):
        if not hasattr(exc, "response_content"):
            # NeMo Gym's middleware asserts on this, and Starlette's error middleware answers.
            return lib.PlainTextResponse("Internal Server Error", status_code=500)
        text = f"Hit an exception in {server_key} calling an inner server: {exc.response_content}"
        return lib.JSONResponse(text, status_code=500)
    return lib.JSONResponse(repr(exc), status_code=500)


def _dumps(payload: Any) -> bytes:
    return jsonlib.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class _InContext:
    """Drive a coroutine from the awaiting task, each step inside ``context``.

    The handler runs in the caller's task, so there is no scheduling hop and cancelling the
    caller throws ``CancelledError`` straight into the handler; since every step runs in
    ``context``, context variables the handler sets never reach the caller's context.
    """

    def __init__(self, coro: Coroutine[Any, Any, Any], context: contextvars.Context) -> None:
        self._coro = coro
        self._context = context

    def __await__(self) -> Generator[Any, Any, Any]:
        run, send, throw = self._context.run, self._coro.send, self._coro.throw
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                yielded = run(send, value) if error is None else run(throw, error)
            except StopIteration as stop:
                return stop.value
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # cancellation and close() belong to the handler
                value, error = None, exc

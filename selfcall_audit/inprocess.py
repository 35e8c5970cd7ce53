"""Call an agent's own ``/v1/responses`` route in-process instead of over HTTP.

``await responses_in_process(self, url_path=P, json=J, cookies=C)`` replaces
``await self.server_client.post(server_name=self.config.name, url_path=P, json=J, cookies=C)``.
The request goes through the agent's FastAPI app as the app is registered — its middleware
(NeMo Gym's session and exception middleware included), exception handlers, dependency
overrides, routing and the route's own wrapped endpoint, body binding and response
serialisation — by calling the app's ASGI interface, so nothing of FastAPI or Starlette is
re-implemented here. The result behaves like the ``aiohttp.ClientResponse`` of the HTTP
self-call, so the code around the call (``raise_for_status``, ``get_response_json``,
``.cookies``, ...) keeps working unchanged.

What stands in for the HTTP hop, as NeMo Gym's ``ServerClient``, aiohttp and uvicorn do it:

- the request body is the bytes ``ServerClient`` sends (orjson after
  ``model_dump(exclude_unset=True)``), so what cannot be sent raises in the caller;
- the ``Cookie`` header is built as aiohttp builds it (cookies its jar would not give the URL
  left out), with ``Host``, ``Content-Type``, ``Content-Length`` and the caller's ``headers``,
  all in UTF-8; response headers are read back as aiohttp reads them;
- the app runs in a fresh ``contextvars`` context, as a new server request does: it sees none of
  the caller's context variables (such as the current rollout id);
- the request's ``state`` is a copy of what the app's lifespan left in the uvicorn server that
  serves it on the caller's event loop, as uvicorn gives each request;
- an exception that escapes the app is logged and answered as uvicorn does (a plain-text 500);
- the URL is escaped by yarl as aiohttp escapes it, and a redirect to the app itself is followed
  as aiohttp follows it (307 and 308 post the body again, 301, 302 and 303 GET).

Different by design: no socket (no client address, no ``Date`` or ``Server`` response headers,
no compression or chunking, no proxy headers applied), cancelling the caller cancels the
handler, the call returns once the app has finished (the handler's background tasks have run, a
streamed body is complete), and a redirect to another server is returned, not followed.

The app is the one that serves the agent's routes: the app of the request the caller runs in, or
the one a uvicorn server on the caller's event loop serves; if there is none (a unit test that
never served it), one is built once with the agent's ``setup_webserver()`` and
``setup_exception_middleware()``. Finding it never scans the heap, so a first call costs the same
whenever it is made.

Only the standard library is imported with this module; fastapi, starlette, pydantic, aiohttp,
multidict, yarl and, if installed, orjson are imported on first use, so the file can be
copied into a project as it is.
"""

from __future__ import annotations

import asyncio
import codecs
import contextvars
import functools
import inspect
import json as jsonlib
import logging
import math
import re
import sys
import weakref
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
)
from dataclasses import dataclass, field
from http import HTTPStatus
from http.cookies import Morsel, SimpleCookie
from typing import Any
from urllib.parse import unquote

__all__ = ["InProcessResponse", "responses_in_process"]

# uvicorn logs an exception that escapes the app here; so does an in-process call.
_SERVER_LOG = logging.getLogger("uvicorn.error")
_JSON_MEDIA_TYPE = re.compile(r"^application/(?:[\w.+-]+?\+)?json")
_ENCODE_COOKIE_VALUE = SimpleCookie().value_encode
# The scope key under which an in-process request carries its exchange, for the error tap.
_EXCHANGE_KEY = "inprocess.exchange"
# uvicorn's answer when the app raises before it started a response.
_SERVER_ERROR_HEADERS = [
    (b"content-type", b"text/plain; charset=utf-8"),
    (b"content-length", b"21"),
    (b"connection", b"close"),
]
_SERVER_ERROR_BODY = b"Internal Server Error"
# The redirects aiohttp follows, and after how many it raises ``TooManyRedirects``.
_REDIRECT_STATUSES = frozenset((301, 302, 303, 307, 308))
_MAX_REDIRECTS = 10

_Headers = Mapping[str, str] | Iterable[tuple[str, str]]


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
    """POST ``url_path`` to the agent's own app in-process; returns a ClientResponse look-alike.

    ``url_path`` is what the HTTP self-call would post to (``/v1/responses`` or one of its
    ``/ng-rollout/{rollout_id}/`` twins, with an optional query string). ``json``, ``cookies``
    and ``headers`` are what ``ServerClient.post`` takes: a pydantic model or JSON-able data,
    a mapping, ``(name, value)`` pairs or Morsels (a cookie jar), extra request headers.
    """
    app, state = _AGENT_APPS.app_for(agent)
    body = _request_body(json)
    method = "POST"
    history: list[InProcessResponse] = []
    while True:
        scope = _scope(agent, method, url_path, body, json, cookies, headers)
        # a copy per request, as uvicorn gives each request
        scope["state"] = dict(state)
        response = await _Exchange(app, scope, b"" if body is None else body)
        response.history = tuple(history)
        target = _redirect_target(response)
        if target is None:
            return response
        history.append(response)
        response.release()
        if len(history) >= _MAX_REDIRECTS:
            from aiohttp import TooManyRedirects

            raise TooManyRedirects(history[0].request_info, tuple(history))
        url_path = target
        posted_again = response.status in (301, 302) and method == "POST"
        if response.status == 303 or posted_again:
            method, body = "GET", None
        if response.cookies and _redirects_send_their_cookies():
            cookies = response.cookies


@functools.cache
def _redirects_send_their_cookies() -> bool:
    """Whether the installed aiohttp follows a redirect that sets cookies with those cookies in
    place of the caller's (3.11.8 to 3.12.6 rebind ``cookies`` to the redirect's)."""
    from aiohttp import __version__

    version = tuple(int(part) for part in re.findall(r"\d+", __version__)[:3])
    return (3, 11, 8) <= version < (3, 12, 7)


def _redirect_target(response: InProcessResponse) -> str | None:
    """Where aiohttp would follow ``response`` to, if it redirects to the app itself.

    A redirect to another server is not followed: the app cannot answer for it.
    """
    if response.status not in _REDIRECT_STATUSES:
        return None
    location = response.headers.get("Location") or response.headers.get("URI")
    if location is None:
        return None
    from yarl import URL

    target = response.url.join(URL(location))
    return target.raw_path_qs if target.origin() == response.url.origin() else None


# --------------------------------------------------------------------------------------------
# The app that serves the agent
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Remembered:
    """The app last used for an agent: held weakly if a server serves it, kept if the helper built it;
    and the state its lifespan left, which uvicorn copies into each request's scope."""

    agent: weakref.ref[Any]
    app: Callable[[], Any]
    served: bool
    state: Mapping[str, Any]


class _AgentApps:
    """Which app answers an agent's self-calls, found without scanning the heap.

    In order: the app whose request the caller runs in (Starlette puts itself in the request's
    scope, and the helper walks up the caller's stack); the served app that answered the agent
    before; an app a uvicorn server running on the caller's event loop serves (its ``serve()``
    task holds it); else an app the helper builds once with the agent's ``setup_webserver()``
    and ``setup_exception_middleware()``, which stands in until a served app turns up. An app
    serves the agent if one of its routes has an endpoint that, once unwrapped (``functools.wraps``
    wrappers such as tracing), is a method of the agent.
    """

    def __init__(self) -> None:
        self._apps: dict[int, _Remembered] = {}

    def app_for(self, agent: Any) -> tuple[Any, Mapping[str, Any]]:
        """The app that answers the agent's self-calls, and its lifespan state."""
        entry = self._apps.get(id(agent))
        known = entry.app() if entry is not None and entry.agent() is agent else None
        if known is None:
            known, known_served, known_state = None, False, {}
        else:
            known_served, known_state = entry.served, entry.state
        app = _app_of_running_request(agent, known)
        if app is None and known_served:
            return known, known_state
        app = app or _app_served_on_this_loop(agent)
        if app is None:
            if known is None:
                known = _build_app(agent)
                known_state = self._remember(agent, known, served=False)
            return known, known_state
        if app is not known or not known_served:
            return app, self._remember(agent, app, served=True)
        return app, known_state

    def _remember(self, agent: Any, app: Any, *, served: bool) -> Mapping[str, Any]:
        _tap_routes(app)
        state = _lifespan_state(app) if served else {}
        key = id(agent)
        try:
            ref = weakref.ref(agent, lambda _, apps=self._apps: apps.pop(key, None))
        # an agent that cannot be referenced weakly is looked up every time
        except TypeError:
            return state
        hold = weakref.ref(app) if served else functools.partial(_identity, app)
        self._apps[key] = _Remembered(ref, hold, served, state)
        return state


def _identity(value: Any) -> Any:
    return value


_AGENT_APPS = _AgentApps()


def _app_of_running_request(agent: Any, known: Any) -> Any:
    """The app whose request (or lifespan) the caller runs in, if it serves the agent."""
    frame = sys._getframe(3)
    while frame is not None:
        # only frames with a ``scope`` are read: before 3.13 reading copies locals
        code = frame.f_code
        if "scope" in code.co_varnames + code.co_freevars + code.co_cellvars:
            scope = frame.f_locals.get("scope")
            app = scope.get("app") if isinstance(scope, dict) else None
            if app is not None and (app is known or _serves(app, agent)):
                return app
        frame = frame.f_back
    return None


# A uvicorn server's ``serve()`` is the outermost coroutine of its task (asyncio.run, a test
# harness) or close to it (a process manager's worker awaiting it).
_SERVER_AWAIT_DEPTH = 3
_UVICORN_WRAPPERS = 3


def _app_served_on_this_loop(agent: Any) -> Any:
    """The app a uvicorn server running on this event loop serves, if it serves the agent."""
    for server in _servers_on_this_loop():
        app = _unwrapped(getattr(server.config, "loaded_app", None))
        if app is not None and _serves(app, agent):
            return app
    return None


def _lifespan_state(app: Any) -> Mapping[str, Any]:
    """The state the app's lifespan left in the uvicorn server that serves it on this loop."""
    for server in _servers_on_this_loop():
        if _unwrapped(getattr(server.config, "loaded_app", None)) is app:
            state = getattr(getattr(server, "lifespan", None), "state", None)
            if isinstance(state, dict):
                return state
    return {}


def _servers_on_this_loop() -> Iterator[Any]:
    """The uvicorn servers (objects with a ``config``) whose ``serve()`` runs on this event loop."""
    for task in asyncio.all_tasks():
        awaitable: Any = task.get_coro()
        for _ in range(_SERVER_AWAIT_DEPTH):
            frame = getattr(awaitable, "cr_frame", None)
            if frame is None:
                break
            if "self" in frame.f_code.co_varnames:
                server = frame.f_locals.get("self")
                if getattr(server, "config", None) is not None:
                    yield server
            awaitable = getattr(awaitable, "cr_await", None)


def _unwrapped(app: Any) -> Any:
    """The Starlette app inside uvicorn's wrappers (proxy headers, message logger, ASGI2)."""
    for _ in range(_UVICORN_WRAPPERS + 1):
        if app is None or hasattr(app, "router"):
            return app
        app = getattr(app, "app", None)
    return None


def _serves(app: Any, agent: Any) -> bool:
    router = getattr(app, "router", None)
    for route in getattr(router, "routes", ()):
        endpoint = getattr(route, "endpoint", None)
        try:
            target = inspect.unwrap(endpoint) if endpoint is not None else None
        except ValueError:  # a __wrapped__ cycle
            continue
        if getattr(target, "__self__", None) is agent:
            return True
    return False


def _build_app(agent: Any) -> Any:
    """The agent's app as NeMo Gym's ``run_webserver`` builds it, for agents no app serves yet."""
    setup = getattr(agent, "setup_webserver", None)
    if not callable(setup):
        raise TypeError(
            f"no app serves {type(agent).__name__}'s routes and it has no setup_webserver() to build one",
        )
    app = setup()
    if not _serves(app, agent):
        raise TypeError(
            f"{type(agent).__name__}.setup_webserver() returned an app without the agent's routes",
        )
    add_exception_middleware = getattr(agent, "setup_exception_middleware", None)
    if callable(add_exception_middleware):
        add_exception_middleware(app)
    return app


@dataclass(frozen=True)
class _RouteTap:
    """Sits around the app's router and notes, for in-process requests only, the task the route
    runs in and what it raised. HTTP requests pass through untouched.

    The app's middleware may turn the exception into a 500 answer; the caller still gets it as
    the ``__cause__`` of ``raise_for_status``'s error. The task lets a cancelled caller cancel
    the handler even where a middleware's bare ``except`` swallows the cancellation on its way.
    """

    app: Any

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        exchange = scope.get(_EXCHANGE_KEY)
        if exchange is None:
            await self.app(scope, receive, send)
            return
        exchange.route_task = asyncio.current_task()
        try:
            await self.app(scope, receive, send)
        except BaseException as exc:
            if exchange.error is None:
                exchange.error = exc
            raise


def _tap_routes(app: Any) -> None:
    router = app.router
    # one tap, even from two copies
    if type(router.middleware_stack).__name__ != _RouteTap.__name__:
        router.middleware_stack = _RouteTap(router.middleware_stack)


# --------------------------------------------------------------------------------------------
# The request, as ServerClient, aiohttp and uvicorn put it on the wire and into the scope
# --------------------------------------------------------------------------------------------


def _request_body(json: Any) -> bytes | None:
    """The body ``ServerClient.post`` sends: orjson for a truthy body, aiohttp's ``json.dumps`` else."""
    from pydantic import BaseModel

    if isinstance(json, BaseModel):
        json = json.model_dump(exclude_unset=True)
    if json:
        return _orjson_dumps()(json)
    if json is None:
        return None
    return jsonlib.dumps(json).encode("utf-8")


@functools.cache
def _orjson_dumps() -> Callable[[Any], bytes]:
    try:
        from orjson import dumps
    except ImportError:
        return _dumps_like_orjson
    return dumps


def _dumps_like_orjson(value: Any) -> bytes:
    """orjson's output for plain JSON values, for installs without orjson (NeMo Gym has it)."""
    return jsonlib.dumps(
        _orjson_compatible(value),
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()


def _orjson_compatible(value: Any) -> Any:
    """``value`` with orjson's rules applied: NaN and infinities are null; what it rejects raises."""
    match value:
        case str() | bool() | None:
            return value
        case int():
            if not -(2**63) <= value < 2**64:
                raise TypeError("Integer exceeds 64-bit range")
            return value
        case float():
            return value if math.isfinite(value) else None
        case dict():
            if not all(isinstance(key, str) for key in value):
                raise TypeError("Dict key must be str")
            return {key: _orjson_compatible(item) for key, item in value.items()}
        case list() | tuple():
            return [_orjson_compatible(item) for item in value]
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def _scope(
    agent: Any,
    method: str,
    url_path: str,
    body: bytes | None,
    json: Any,
    cookies: Any,
    headers: _Headers | None,
) -> dict[str, Any]:
    """The ASGI scope uvicorn would build for the aiohttp request of the HTTP self-call."""
    config = getattr(agent, "config", None)
    host, port = getattr(config, "host", None), getattr(config, "port", None)
    origin = f"http://{host}:{port}" if host and port else "http://in-process"
    raw_path, query = _request_target(origin, url_path)
    raw: list[tuple[bytes, bytes]] = []
    if host and port:
        raw.append((b"host", f"{host}:{port}".encode("latin-1")))
    cookie_header = None
    typed = False
    for name, value in _checked(headers) if headers else ():
        lowered = name.lower()
        if lowered == "cookie":
            cookie_header = value
            continue
        # the caller's replaces aiohttp's
        if lowered == "host" and raw and raw[0][0] == b"host":
            raw[0] = (b"host", value.encode())
            continue
        if lowered == "content-type":
            typed = True
            if json:  # ServerClient sets it for a body it sends itself
                value = "application/json"
        raw.append((lowered.encode(), value.encode()))
    if json and not typed:
        raw.append((b"content-type", b"application/json"))
    if cookies:
        if not isinstance(cookies, Mapping):
            cookies = list(cookies)  # read twice below
        if _restricted(cookies):
            cookies = _cookies_sent_to(origin + raw_path, cookies)
        cookie_header = _cookie_header(cookies, cookie_header)
    if cookie_header:
        raw.append((b"cookie", cookie_header.encode()))
    if body is not None and not typed and not json:  # aiohttp's own JSON payload
        raw.append((b"content-type", b"application/json"))
    if method != "GET":
        raw.append((b"content-length", str(len(body or b"")).encode("ascii")))
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": unquote(raw_path),
        "raw_path": raw_path.encode("ascii"),
        "root_path": "",
        "query_string": query.encode("ascii"),
        "headers": raw,
        "client": None,
        "server": (host, port) if host and port else None,
        "state": {},
    }


def _checked(headers: _Headers) -> list[tuple[str, str]]:
    """The caller's headers, refused as aiohttp refuses them (a value that is not a string, a
    control character) by aiohttp's own serialiser; aiohttp then writes them in UTF-8."""
    from multidict import CIMultiDict

    pairs = list(headers.items() if isinstance(headers, Mapping) else headers)
    try:
        from aiohttp.http_writer import _serialize_headers
    # not where aiohttp 3.11 to 3.14 have it: written without the checks
    except ImportError:
        pass
    else:
        _serialize_headers("POST / HTTP/1.1", CIMultiDict(pairs))
    return pairs


def _request_target(origin: str, url_path: str) -> tuple[str, str]:
    """The path and query aiohttp sends for ``origin + url_path``: yarl's escaping (a space in the
    query as ``+``, needless escapes decoded, a stray ``%`` escaped), without the fragment."""
    from yarl import URL

    try:
        url = URL(origin + url_path)
    # such as a path without its leading slash, which meets the port
    except ValueError as error:
        from aiohttp import InvalidUrlClientError

        raise InvalidUrlClientError(origin + url_path) from error
    return url.raw_path, url.raw_query_string


def _restricted(cookies: Any) -> bool:
    """Whether a cookie carries an attribute that may keep aiohttp from sending it (a domain, a
    path below ``/``, ``Secure``, an expiry other than a lifetime in seconds, which the session
    cookie has), as cookies from a response's ``Set-Cookie`` may."""
    for morsel in cookies.values() if isinstance(cookies, Mapping) else cookies:
        if not isinstance(morsel, Morsel):
            continue
        max_age = str(morsel["max-age"])
        if (
            morsel["path"] not in ("", "/")
            or morsel["domain"]
            or morsel["secure"]
            or morsel["expires"]
            or (max_age and not (max_age.isdigit() and int(max_age) > 0))
        ):
            return True
    return False


def _cookies_sent_to(url: str, cookies: Any) -> Any:
    """The cookies aiohttp sends to ``url``: it loads them into a fresh cookie jar with the settings
    of the session's (NeMo Gym's ``DummyCookieJar``) and sends those the jar gives that URL."""
    from aiohttp import CookieJar
    from yarl import URL

    jar = CookieJar()
    if isinstance(cookies, Mapping):
        jar.update_cookies(cookies)
    else:
        pairs = [(i.key, i) if isinstance(i, Morsel) else i for i in cookies]
        jar.update_cookies(pairs)
    return jar.filter_cookies(URL(url))


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
        if isinstance(value, Morsel):
            parts.append(f"{value.key}={value.coded_value}")
        elif isinstance(value, str):
            parts.append(_cookie_pair(name, value))
        else:
            parts.append(_cookie_pair.__wrapped__(name, value))
    return "; ".join(parts)


@functools.lru_cache(maxsize=1024)
def _cookie_pair(name: str, value: Any) -> str:
    """``name=value`` as a Morsel codes it, once per pair: a rollout sends the same cookies each call."""
    morsel: Morsel[str] = Morsel()
    # raises CookieError where aiohttp would
    morsel.set(name, *_ENCODE_COOKIE_VALUE(value))
    return f"{morsel.key}={morsel.coded_value}"


# --------------------------------------------------------------------------------------------
# One call
# --------------------------------------------------------------------------------------------


@dataclass
class _Exchange:
    """One request through the app: the client's side of the ASGI conversation, as uvicorn has it.

    Awaiting it drives the app from the caller's task, each step in ``context`` (a fresh one: the
    app neither sees the caller's context variables nor changes them). There is no scheduling
    hop, and cancelling the caller throws ``CancelledError`` straight into the handler.
    """

    app: Any
    scope: dict[str, Any]
    body: bytes
    context: contextvars.Context = field(default_factory=contextvars.Context)
    error: BaseException | None = None
    status: int | None = None
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)
    body_sent: bool = False
    complete: asyncio.Event | None = None
    cancelled: bool = False
    route_task: asyncio.Task[Any] | None = None

    def __await__(self) -> Generator[Any, Any, InProcessResponse]:
        coro = self._run()
        run, send, throw = self.context.run, coro.send, coro.throw
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                yielded = run(send, value) if error is None else run(throw, error)
            except StopIteration as stop:
                return stop.value
            try:
                value, error = (yield yielded), None
            # cancellation and close() belong to the handler
            except BaseException as exc:
                value, error = None, exc
                if isinstance(exc, asyncio.CancelledError):
                    self.cancelled = True
                    if self.route_task not in (None, asyncio.current_task()):
                        self.route_task.cancel()

    async def _run(self) -> InProcessResponse:
        self.scope[_EXCHANGE_KEY] = self
        try:
            await self.app(self.scope, self.receive, self.send)
        except BaseException as exc:
            if self.cancelled and not isinstance(exc, asyncio.CancelledError):
                raise asyncio.CancelledError from exc  # the caller's cancellation, whatever the app made of it
            if self.cancelled or isinstance(exc, GeneratorExit):
                raise
            self.error = self.error or exc
            _SERVER_LOG.error("Exception in ASGI application\n", exc_info=exc)
            self._answer_server_error()
        else:
            if self.status is None:
                _SERVER_LOG.error("ASGI callable returned without starting response.")
                self._answer_server_error()
        finally:
            del self.scope[_EXCHANGE_KEY]
        if self.cancelled:  # the app swallowed the caller's cancellation
            raise asyncio.CancelledError
        return InProcessResponse(
            self.status or 500,
            self.headers,
            b"".join(self.chunks),
            self.scope,
            self.error,
        )

    def _answer_server_error(self) -> None:
        if self.status is None:
            self.status, self.headers, self.chunks = (
                500,
                list(_SERVER_ERROR_HEADERS),
                [_SERVER_ERROR_BODY],
            )

    async def receive(self) -> dict[str, Any]:
        """The body, then (once the response is complete) the client's disconnect."""
        if not self.body_sent:
            self.body_sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        if self.complete is None:
            self.complete = asyncio.Event()
        await self.complete.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Mapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = list(message.get("headers", ()))
        elif message["type"] == "http.response.body":
            self.chunks.append(bytes(message.get("body", b"")))
            if not message.get("more_body", False) and self.complete is not None:
                self.complete.set()


# --------------------------------------------------------------------------------------------
# The response
# --------------------------------------------------------------------------------------------


class InProcessResponse:
    """The parts of ``aiohttp.ClientResponse`` that agent code uses after a self-call.

    Body reads follow aiohttp, so code behaves as it did over HTTP: ``.content`` is a one-shot
    stream and ``read()`` caches what is left of it; ``release()``, and ``raise_for_status()``
    on an error outside ``async with``, drop an unread body (later reads raise
    ``ClientConnectionError``, as NeMo Gym's ``raise_for_status`` callers would see over HTTP).
    """

    history: tuple[InProcessResponse, ...] = ()

    def __init__(
        self,
        status: int,
        raw_headers: list[tuple[bytes, bytes]],
        body: bytes,
        request_scope: Mapping[str, Any],
        error: BaseException | None = None,
    ) -> None:
        self.status = status
        self.reason = _reason(status)
        self.content = _Content(body)
        self._raw_headers = raw_headers
        self._scope = request_scope
        self._error = error
        self._body: bytes | None = None
        self._headers: Any = None
        self._cookies: SimpleCookie | None = None
        self._released = False
        self._in_context = False

    def __repr__(self) -> str:
        return f"<InProcessResponse({self._url()}) [{self.status} {self.reason}]>"

    @property
    def method(self) -> str:
        """``POST``, or ``GET`` after a redirect that aiohttp follows with a GET."""
        return self._scope["method"]

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
            raw = self._raw_headers
            values = [_header_text(v) for name, v in raw if name == b"set-cookie"]
            self._cookies = _parse_set_cookies(values)
        return self._cookies

    @property
    def content_type(self) -> str:
        content_type = self.headers.get("Content-Type", "application/octet-stream")
        return content_type.partition(";")[0].strip().lower()

    @property
    def charset(self) -> str | None:
        for param in self.headers.get("Content-Type", "").split(";")[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "charset":
                return value.strip().strip('"')
        return None

    def get_encoding(self) -> str:
        """The declared charset if Python knows it, else UTF-8 (JSON's, and aiohttp's fallback)."""
        charset = self.charset
        if charset:
            try:
                return codecs.lookup(charset).name
            except (LookupError, ValueError):
                pass
        return "utf-8"

    @property
    def url(self) -> Any:
        """The URL the HTTP self-call would have used, as a ``yarl.URL``."""
        from yarl import URL

        return URL(self._url())

    real_url = url

    @property
    def request_info(self) -> Any:
        from aiohttp import RequestInfo

        return RequestInfo(
            self.url,
            self.method,
            _multidict(self._scope["headers"]),
            self.url,
        )

    @property
    def closed(self) -> bool:
        return self._released or self.content.at_eof()

    def _url(self) -> str:
        server, query = (
            self._scope["server"],
            self._scope["query_string"].decode("latin-1"),
        )
        origin = f"http://{server[0]}:{server[1]}" if server else "http://in-process"
        path = self._scope["raw_path"].decode("latin-1")
        return origin + path + (f"?{query}" if query else "")

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
        return body.decode(encoding or self.get_encoding(), errors)

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
        return loads(stripped.decode(encoding or self.get_encoding()))

    def raise_for_status(self) -> None:
        """Raise ``aiohttp.ClientResponseError`` for a status >= 400, chained to what the route raised."""
        if self.ok:
            return
        from aiohttp import ClientResponseError

        if not self._in_context:
            self.release()
        raise ClientResponseError(
            self.request_info,
            self.history,
            status=self.status,
            message=self.reason,
            headers=self.headers,
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


@functools.cache
def _reason(status: int) -> str:
    """The reason phrase uvicorn sends, which aiohttp exposes as ``reason``."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _multidict(raw: list[tuple[bytes, bytes]]) -> Any:
    """Headers as aiohttp's parser gives them: well-known names in their canonical spelling."""
    from multidict import CIMultiDict, CIMultiDictProxy

    known = _known_header_names()
    pairs = ((known.get(n) or _header_text(n), _header_text(v)) for n, v in raw)
    return CIMultiDictProxy(CIMultiDict(pairs))


def _header_text(raw: bytes) -> str:
    """Header bytes as aiohttp's parser reads them: UTF-8, an invalid byte kept as a surrogate escape."""
    return raw.decode("utf-8", "surrogateescape")


@functools.cache
def _known_header_names() -> dict[bytes, Any]:
    from aiohttp import hdrs
    from multidict import istr

    names = [name for name in vars(hdrs).values() if isinstance(name, istr)]
    return {str(name).lower().encode("latin-1"): name for name in names}


def _parse_set_cookies(values: list[str]) -> SimpleCookie:
    """Parse ``Set-Cookie`` values as aiohttp parses them (callers may mutate what they get)."""
    cookies = SimpleCookie()
    for value in values:
        for name, morsel in _parse_set_cookie(value):
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

"""Call an agent's own ``/v1/responses`` route in-process instead of over HTTP.

``await responses_in_process(self, url_path=P, json=J, cookies=C)`` replaces
``await self.server_client.post(server_name=self.config.name, url_path=P, json=J, cookies=C)``:
the request goes through the agent's own FastAPI app by its ASGI interface (its middleware,
handlers, routes and serialisation), and the caller gets what it used of the aiohttp response.
The app is the one ``setup_webserver()`` recorded (``self._webserver_app = app``). The handler sees
what the HTTP request would bring (the body ``ServerClient`` sends, the cookies aiohttp sends to the
agent's URL, ``Host``, the caller's headers, the path as aiohttp escapes it) and runs in a task of
its own from an empty context, as under uvicorn; cancelling the caller does not cancel it, as when
an HTTP client goes away. Different, as there is no socket: no ``Date``/``Server`` headers,
compression, chunking, proxy headers or header size limit; ``client`` is None and the lifespan
``state`` empty; a streamed body is read whole; a redirect is returned, not followed; header names
read back as the app wrote them; ``Set-Cookie`` is parsed by ``http.cookies``.
"""

from __future__ import annotations

import asyncio
import codecs
import contextvars
import functools
import json as jsonlib
import logging
import re
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from http import HTTPStatus
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import unquote

import aiohttp
import orjson
from multidict import CIMultiDict, CIMultiDictProxy
from pydantic import BaseModel
from yarl import URL

__all__ = ["APP_ATTRIBUTE", "InProcessResponse", "responses_in_process"]

# Where ``setup_webserver()`` records the app it built, on the agent.
APP_ATTRIBUTE = "_webserver_app"
# uvicorn logs an exception that escapes the app here, and answers as below.
_SERVER_LOG = logging.getLogger("uvicorn.error")
_SERVER_ERROR_HEADERS = (
    (b"content-type", b"text/plain; charset=utf-8"),
    (b"content-length", b"21"),
    (b"connection", b"close"),
)
_SERVER_ERROR = (500, _SERVER_ERROR_HEADERS, b"Internal Server Error")
# the phrases uvicorn sends
_REASONS = {status.value: status.phrase for status in HTTPStatus}
_JSON_MEDIA_TYPE = re.compile(r"^application/(?:[\w.+-]+?\+)?json")
# RFC 9110's, as aiohttp 3.14 refuses
_FORBIDDEN_IN_HEADERS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_FORBIDDEN = "a control character, forbidden in headers"

Headers = Mapping[str, str] | Iterable[tuple[str, str]]
RawHeaders = Sequence[tuple[bytes, bytes]]
Answer = tuple[int, RawHeaders, bytes]  # status, headers, body


async def responses_in_process(
    agent: Any,
    *,
    url_path: str,
    json: Any = None,
    cookies: Any = None,
    headers: Headers | None = None,
) -> InProcessResponse:
    """POST ``url_path`` to the agent's own app in-process, as ``ServerClient.post`` would over HTTP.

    ``url_path`` is ``/v1/responses`` or one of its ``/ng-rollout/{rollout_id}/`` twins, with an
    optional query; ``json`` a pydantic model or JSON-able data; ``cookies`` a mapping, a cookie
    jar or ``(name, value)`` pairs; ``headers`` extra request headers.
    """
    app = getattr(agent, APP_ATTRIBUTE, None)
    if app is None:
        raise RuntimeError(
            f"{type(agent).__name__} has no app to call in-process: its setup_webserver() records "
            f"the app it builds as self.{APP_ATTRIBUTE}; build the app before a self-call"
        )
    origin = f"http://{agent.config.host}:{agent.config.port}"
    try:
        url = URL(origin + url_path).with_fragment(None)
    except ValueError as error:  # a path without its leading slash runs into the port
        raise aiohttp.InvalidUrlClientError(origin + url_path) from error
    if isinstance(json, BaseModel):
        json = json.model_dump(exclude_unset=True)
    if json is None:
        body = b""
    elif json:  # as ServerClient serialises it
        body = orjson.dumps(json)
    else:  # as aiohttp serialises a falsy value
        body = jsonlib.dumps(json).encode()
    request_headers = _headers(url, json, body, cookies, headers)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": unquote(url.raw_path),
        "raw_path": url.raw_path.encode("ascii"),
        "root_path": "",
        "query_string": url.raw_query_string.encode("ascii"),
        "headers": request_headers,
        "client": None,
        "server": (url.host, url.port),
        "state": {},
    }
    exchange = _Exchange(app, scope, body)
    # A task of its own, as uvicorn gives each request, created in (a copy of) an empty context.
    contextvars.Context().run(asyncio.get_running_loop().create_task, exchange.run())
    info = aiohttp.RequestInfo(url, "POST", _multidict(request_headers), url)
    return InProcessResponse(await exchange.answered, info)


def _headers(url: URL, json: Any, body: bytes, cookies: Any, extra: Any) -> RawHeaders:
    """The headers the HTTP self-call puts on the wire, in aiohttp's order, encoded as it does."""
    raw = [(b"host", f"{url.host}:{url.port}".encode())]
    cookie_header, typed = None, False
    given = extra or ()
    if isinstance(given, Mapping):
        given = given.items()
    for name, value in given:
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError(f"header {name!r}: {value!r}: names and values are strings")
        if _FORBIDDEN_IN_HEADERS.search(name + value):
            raise ValueError(f"header {name!r}: {_FORBIDDEN}")
        lowered = name.lower()
        if lowered == "cookie":
            cookie_header = value
        elif lowered == "host":  # the caller's replaces aiohttp's
            raw[0] = (b"host", value.encode())
        elif lowered == "content-type":
            typed = True  # ServerClient sets its own for a body it serialises
            value = "application/json" if json else value
            raw.append((b"content-type", value.encode()))
        else:
            raw.append((lowered.encode(), value.encode()))
    if json and not typed:
        raw.append((b"content-type", b"application/json"))
    if cookies:
        cookie_header = _cookie_header(url, cookies, cookie_header)
    if cookie_header:
        raw.append((b"cookie", cookie_header.encode()))
    # a falsy body aiohttp serialises itself
    if json is not None and not json and not typed:
        raw.append((b"content-type", b"application/json"))
    raw.append((b"content-length", str(len(body)).encode()))
    return raw


def _cookie_header(url: URL, cookies: Any, existing: str | None) -> str:
    """The ``Cookie`` header aiohttp sends: the cookies a fresh jar gives the URL (no expired,
    foreign-domain, other-path or secure ones), after those of a ``Cookie`` header, by name."""
    jar = aiohttp.CookieJar()
    jar.update_cookies(cookies)
    sent = SimpleCookie(existing or "")
    sent.update(jar.filter_cookies(url))
    return sent.output(header="", sep=";").strip()


class _Exchange:
    """One request through the app, seen from the server's side of the ASGI conversation.

    ``answered`` resolves with the complete response. If the caller stops waiting (cancelled),
    the app runs on: it is told the client has gone and what it sends is dropped, as by uvicorn.
    """

    def __init__(self, app: Any, scope: dict[str, Any], body: bytes) -> None:
        self.app, self.scope, self.body = app, scope, body
        loop = asyncio.get_running_loop()
        self.answered: asyncio.Future[Answer] = loop.create_future()
        self.status: int | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []
        self.body_sent = False

    async def run(self) -> None:
        """Call the app and answer the caller; what escapes the app is logged, as by uvicorn."""
        try:
            await self.app(self.scope, self.receive, self.send)
        except BaseException as exc:
            _SERVER_LOG.error("Exception in ASGI application\n", exc_info=exc)
        else:
            if self.status is None and not self.answered.done():
                _SERVER_LOG.error("ASGI callable returned without starting response.")
        if self.answered.done():
            return
        if self.status is None:  # uvicorn's answer
            self.answered.set_result(_SERVER_ERROR)
        else:  # started, never finished: uvicorn closes the connection
            error = aiohttp.ClientPayloadError("Response payload is not completed")
            self.answered.set_exception(error)

    async def receive(self) -> dict[str, Any]:
        """The body, then, once the response is complete or the caller has gone, a disconnect."""
        if not self.body_sent:
            self.body_sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        if not self.answered.done():
            # which, cancelled, leaves the future be
            await asyncio.wait((self.answered,))
        return {"type": "http.disconnect"}

    async def send(self, message: Mapping[str, Any]) -> None:
        if self.answered.done():  # the caller has gone, or the response is complete
            return
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = list(message.get("headers", ()))
        elif message["type"] == "http.response.body":
            self.chunks.append(bytes(message.get("body", b"")))
            if not message.get("more_body", False) and self.status is not None:
                body = b"".join(self.chunks)
                self.answered.set_result((self.status, self.headers, body))


class InProcessResponse:
    """What agent code uses of ``aiohttp.ClientResponse``, behaving as aiohttp's does.

    ``.content`` is a one-shot stream and ``read()`` caches what is left of it; ``release()``, and
    ``raise_for_status()`` on an error outside ``async with``, drop an unread body (later reads raise
    ``ClientConnectionError``, as NeMo Gym's ``raise_for_status`` callers see over HTTP).
    """

    def __init__(self, answer: Answer, request_info: aiohttp.RequestInfo) -> None:
        status, raw_headers, body = answer
        self.status = status
        self.reason = _REASONS.get(status, "")
        self.url = request_info.url
        self.headers = _multidict(raw_headers)
        self.cookies = SimpleCookie()
        for value in self.headers.getall("set-cookie", ()):
            self.cookies.load(value)
        self.content = _Content(body)
        self.request_info = request_info
        self._body: bytes | None = None
        self._released = False
        self._in_context = False

    def __repr__(self) -> str:
        return f"<InProcessResponse({self.url}) [{self.status} {self.reason}]>"

    @property
    def ok(self) -> bool:
        return self.status < 400

    async def read(self) -> bytes:
        if self._body is None:
            self._body = await self.content.read()
        elif self._released:
            raise aiohttp.ClientConnectionError("Connection closed")
        return self._body

    async def text(self, encoding: str | None = None, errors: str = "strict") -> str:
        body = await self.read() if self._body is None else self._body
        return body.decode(encoding or self._encoding(), errors)

    async def json(
        self,
        *,
        encoding: str | None = None,
        loads: Callable[[str], Any] = jsonlib.loads,
        content_type: str | None = "application/json",
    ) -> Any:
        """The body as JSON; another media type raises ``ContentTypeError`` unless ``content_type=None``."""
        body = await self.read() if self._body is None else self._body
        ctype = self.headers.get("Content-Type", "").lower()
        if content_type == "application/json":
            expected = bool(_JSON_MEDIA_TYPE.match(ctype))
        else:
            expected = not content_type or content_type in ctype
        if not expected:
            message = f"Attempt to decode JSON with unexpected mimetype: {ctype}"
            raise self._error(aiohttp.ContentTypeError, message)
        stripped = body.strip()
        if not stripped:
            return None
        return loads(stripped.decode(encoding or self._encoding()))

    def _encoding(self) -> str:
        """The declared charset if Python knows it, else UTF-8 (JSON's, and aiohttp's fallback)."""
        for param in self.headers.get("Content-Type", "").split(";")[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "charset":
                try:
                    return codecs.lookup(value.strip().strip('"')).name
                except LookupError:
                    break
        return "utf-8"

    def raise_for_status(self) -> None:
        if not self.ok:
            if not self._in_context:
                self.release()
            raise self._error(aiohttp.ClientResponseError, self.reason)

    def _error(self, kind: type, message: str) -> aiohttp.ClientResponseError:
        info, headers = self.request_info, self.headers
        return kind(info, (), status=self.status, message=message, headers=headers)

    def release(self) -> _Done:
        """Drop what is left of the body; the result may be awaited or not, as aiohttp's."""
        if not self._released:
            self.content.error = aiohttp.ClientConnectionError("Connection closed")
            self._released = True
        return _Done()

    async def __aenter__(self) -> InProcessResponse:
        self._in_context = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._in_context = False
        self.release()


class _Content:
    """The body as a one-shot stream, read as ``aiohttp.StreamReader.read`` reads it."""

    def __init__(self, data: bytes) -> None:
        self.data, self.position = data, 0
        self.error: Exception | None = None

    async def read(self, n: int = -1) -> bytes:
        if self.error is not None:
            raise self.error
        end = len(self.data) if n < 0 else min(len(self.data), self.position + n)
        chunk, self.position = self.data[self.position : end], end
        return chunk


class _Done:
    """An awaitable that is already done, as aiohttp's ``release()`` returns."""

    def __await__(self) -> Generator[None, None, None]:
        return iter(())


def _multidict(raw: RawHeaders) -> CIMultiDictProxy[str]:
    """Headers as aiohttp reads them: UTF-8, an invalid byte kept as a surrogate escape."""
    text = functools.partial(bytes.decode, encoding="utf-8", errors="surrogateescape")
    pairs = CIMultiDict((text(name), text(value)) for name, value in raw)
    return CIMultiDictProxy(pairs)

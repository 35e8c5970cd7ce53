"""The direct-handler-call anchor of gym_e2e.py, written over the vendored helper in a third copy.

`gym_e2e.py` copies the migrated tree once more and puts this file in place of its
`nemo_gym/inprocess.py`: the migrated call sites stay as `fix` wrote them, and each self-call
becomes a plain call of the agent's own `responses` method, as a hand migration makes it (upstream
pull request #1439): no app, middleware, session, validation of the body when it already is the
handler's model, or serialisation besides the one read of the answer the agent's code makes
(`get_response_json` reads bytes). A failure in the handler reaches the caller as the exception
itself, not as a 500 answer. It is the floor under any in-process call that keeps the app's stack,
not a helper anyone should ship.
"""

from __future__ import annotations

import re
from http.cookies import Morsel, SimpleCookie
from typing import Any

import orjson
from fastapi import Response
from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming
from starlette.requests import Request

# The rollout-prefixed twins carry the rollout id as a path parameter, as their routes declare it.
_TWIN = re.compile(r"^/ng-rollout/(?P<rollout_id>[^/]+)/")


async def responses_in_process(
    agent: Any, *, url_path: str, json: Any = None, cookies: Any = None, headers: Any = None
) -> DirectResponse:
    """`agent.responses(request, response, body)`, with the request the route would have built."""
    jar = SimpleCookie()
    for name, value in (cookies or {}).items():
        jar[name] = value.value if isinstance(value, Morsel) else value
    raw_headers = [(b"cookie", jar.output(header="", sep=";").strip().encode())] if jar else []
    twin = _TWIN.match(url_path)
    request = Request(
        {
            "type": "http",
            "method": "POST",
            "path": url_path,
            "query_string": b"",
            "headers": raw_headers,
            "path_params": twin.groupdict() if twin else {},
        }
    )
    if not isinstance(json, NeMoGymResponseCreateParamsNonStreaming):
        json = NeMoGymResponseCreateParamsNonStreaming.model_validate(json)
    response = Response()
    result = await agent.responses(request, response, json)
    return DirectResponse(orjson.dumps(result.model_dump(mode="json")), response)


class DirectResponse:
    """What the migrated agents read of the helper's answer: a 200 with the handler's cookies."""

    status = 200
    ok = True

    def __init__(self, body: bytes, response: Response) -> None:
        self.body = body
        self.cookies = SimpleCookie()
        for name, value in response.raw_headers:
            if name == b"set-cookie":
                self.cookies.load(value.decode())
        self.content = self

    async def read(self) -> bytes:
        return self.body

    async def json(self, **_: Any) -> Any:
        return orjson.loads(self.body)

    def raise_for_status(self) -> None:
        pass

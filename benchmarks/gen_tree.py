"""Generate a NeMo Gym-shaped tree of a given size, with a known list of agent self-calls.

The tree is made of original templates (no upstream code): agent servers under
``responses_api_agents/<impl>/`` whose self-calls cycle through the forms real trees use (plain
literal, one-line, route wrappers, ``config = self.config`` alias, helper method behind
``asyncio.wait_for``, a url variable shared by two calls, loops with ``try``, a base class in
``app.py`` inherited by sibling modules, a post to the agent's own ``/run``), clean agents that
call in-process or post only to their model server, resources and model servers (with the
precision traps of model servers), and filler: ordinary modules, tests, scripts and YAML that
make up the bulk of a real tree and never mention agents. ``expected.json`` at the root lists
every generated self-call as ``[code, path, line]``, so a scan of the tree can be checked exactly.

The same ``--files`` and ``--seed`` give byte-identical trees.

    python benchmarks/gen_tree.py OUT --files 1600 --seed 0 --git
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

EXPECTED_FILE = "expected.json"

# Self-call forms, in the order agents take them (agent i has form i % len); each one yields
# findings except the last two, which are clean agents.
FORMS = (
    "literal",
    "one_line",
    "run_wrapper",
    "request_wrapper",
    "config_alias",
    "helper_method",
    "shared_path",
    "loop_try",
    "inherited",
    "own_run_route",
    "in_process",
    "model_only",
)
# Files per tree: agents and servers scale with the size, as in a real tree (about 40 agent
# implementations, 110 resources servers and 8 model servers per 1,600 files).
FILES_PER_AGENT = 40
FILES_PER_RESOURCES_SERVER = 16
FILES_PER_MODEL_SERVER = 200
YAML_PER_PY = 1 / 3

_MARK = re.compile(r"\s*#<<(SCA\d{3})>>")


def words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


ADJECTIVES = words(
    """
    adaptive atomic bounded careful chained compact curious eager exact fast frugal greedy guided
    layered lazy nested patient precise quiet rapid reflective robust scoped sober steady strict
    swift terse thorough tidy verbose wise
    """
)
NOUNS = words(
    """
    algebra audit browser calendar chess circuit code compiler contract database debate diagram
    essay finance geometry grammar graph inventory kernel ledger logic maze physics planner poetry
    proof puzzle recipe retrieval schedule search sheet sql story sudoku terminal theorem trivia
    vision weather
    """
)
VERBS = words(
    """
    build check collect compute convert count decode encode extract filter format gather load merge
    normalize parse prepare render resolve sample score select split summarize update validate write
    """
)
THINGS = words(
    """
    answer batch chunk column document entry example field label message metric record reward row
    sample score segment step task token trace turn value window
    """
)
STDLIB = words(
    """
    collections csv functools hashlib itertools json logging math os random re statistics string
    textwrap time
    """
)


def camel(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


def render(template: str, **values: object) -> str:
    return Template(template).substitute(values)


# ------------------------------------------------------------------------------------------
# Framework stand-ins
# ------------------------------------------------------------------------------------------

SERVER_UTILS = '''\
"""Server plumbing shared by every server kind (benchmark stand-in)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class ServerRef(BaseModel):
    type: str
    name: str


class ResourcesServerRef(ServerRef):
    type: str = "resources_servers"


class ModelServerRef(ServerRef):
    type: str = "responses_api_models"


class BaseServerConfig(BaseModel):
    name: str
    host: str = "127.0.0.1"
    port: int = 0


class ServerClient:
    """Posts JSON to another server, addressed by its instance name."""

    def __init__(self, addresses: dict[str, str]) -> None:
        self.addresses = addresses

    @classmethod
    def load_from_global_config(cls) -> ServerClient:
        return cls({})

    async def post(self, server_name: str, url_path: str, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def get(self, server_name: str, url_path: str, **kwargs: Any) -> Any:
        raise NotImplementedError


class BaseServer:
    config: BaseServerConfig
    server_client: ServerClient

    @classmethod
    def run_webserver(cls) -> None:
        raise NotImplementedError


class SimpleServer(BaseServer):
    def setup_webserver(self) -> Any:
        raise NotImplementedError


def raise_for_status(response: Any) -> None:
    if response.status >= 400:
        raise RuntimeError(f"server answered {response.status}")
'''

AGENT_BASE = '''\
"""Agent server base classes (benchmark stand-in)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from nemo_gym.server_utils import BaseServer, BaseServerConfig, SimpleServer

ROLLOUT_PREFIX = "ng-rollout"


class BaseResponsesAPIAgentConfig(BaseServerConfig):
    pass


class BaseResponsesAPIAgent(BaseServer):
    def url_path_for_run(self, url_path: str, body: Any) -> str:
        rollout_id = getattr(body, "rollout_id", None)
        return f"/{ROLLOUT_PREFIX}/{rollout_id}{url_path}" if rollout_id else url_path

    def url_path_for_request(self, url_path: str, request: Request | None) -> str:
        rollout_id = request.path_params.get("rollout_id") if request else None
        return f"/{ROLLOUT_PREFIX}/{rollout_id}{url_path}" if rollout_id else url_path


class SimpleResponsesAPIAgent(BaseResponsesAPIAgent, SimpleServer):
    def setup_webserver(self) -> FastAPI:
        app = FastAPI()
        app.post("/v1/responses")(self.responses)
        app.post("/ng-rollout/{rollout_id}/v1/responses")(self.responses)
        app.post("/run")(self.run)
        app.post("/aggregate_metrics")(self.aggregate_metrics)
        return app

    async def responses(self, request: Request, body: Any) -> Any:
        raise NotImplementedError

    async def run(self, request: Request, body: Any) -> Any:
        raise NotImplementedError

    async def aggregate_metrics(self, body: Any) -> Any:
        return {}
'''

RESOURCES_BASE = '''\
"""Resources server base class (benchmark stand-in)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from nemo_gym.server_utils import BaseServerConfig, SimpleServer


class BaseResourcesServerConfig(BaseServerConfig):
    pass


class SimpleResourcesServer(SimpleServer):
    def setup_webserver(self) -> FastAPI:
        app = FastAPI()
        app.post("/seed_session")(self.seed_session)
        app.post("/verify")(self.verify)
        return app

    async def seed_session(self, body: Any) -> Any:
        return {}

    async def verify(self, body: Any) -> Any:
        raise NotImplementedError
'''

MODEL_BASE = '''\
"""Model server base class (benchmark stand-in): model servers also serve /v1/responses."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from nemo_gym.server_utils import BaseServerConfig, SimpleServer


class BaseResponsesAPIModelConfig(BaseServerConfig):
    pass


class SimpleResponsesAPIModel(SimpleServer):
    def setup_webserver(self) -> FastAPI:
        app = FastAPI()
        app.post("/v1/responses")(self.responses)
        app.post("/v1/chat/completions")(self.chat_completions)
        return app

    async def responses(self, body: Any) -> Any:
        raise NotImplementedError

    async def chat_completions(self, body: Any) -> Any:
        raise NotImplementedError
'''

PYPROJECT = """\
[project]
name = "generated-gym"
version = "0.0.0"
requires-python = ">=3.10"

[tool.ruff]
line-length = 120
"""


# ------------------------------------------------------------------------------------------
# Agent templates; `#<<SCA001>>` marks the line where a self-call expression starts (the mark
# is removed and the line recorded)
# ------------------------------------------------------------------------------------------

AGENT_HEAD = '''\
"""$title agent: $purpose."""

from __future__ import annotations

${stdlib}from typing import Any

from fastapi import Request
from pydantic import BaseModel

from nemo_gym.base_responses_api_agent import BaseResponsesAPIAgentConfig, SimpleResponsesAPIAgent
from nemo_gym.server_utils import ModelServerRef, ResourcesServerRef, raise_for_status

LOGGER = logging.getLogger(__name__)
MAX_OUTPUT_ITEMS = $max_items


class ${name}Config(BaseResponsesAPIAgentConfig):
    resources_server: ResourcesServerRef
    model_server: ModelServerRef
    max_turns: int = $turns
    timeout_s: float = $timeout


class ${name}Verdict(BaseModel):
    reward: float = 0.0
    turns: int = 0
    output: list[dict[str, Any]] = []
'''

AGENT_CLASS_HEAD = '''

class $cls($base):
    """$doc"""

    config: ${name}Config

    def _model_input(self, body: dict[str, Any]) -> dict[str, Any]:
        params = dict(body.get("responses_create_params", {}))
        params.setdefault("max_output_tokens", $max_tokens)
        return params

    async def _verify(self, body: dict[str, Any], response: dict[str, Any], cookies: Any) -> dict[str, Any]:
        verdict = await self.server_client.post(
            server_name=self.config.resources_server.name,
            url_path="/verify",
            json={**body, "response": response},
            cookies=cookies,
        )
        raise_for_status(verdict)
        return await verdict.json()
'''

RESPONSES_MODEL = """
    async def responses(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        model_response = await self.server_client.post(
            server_name=self.config.model_server.name,
            url_path="/v1/responses",
            json=self._model_input(body),
            cookies=request.cookies,
        )
        raise_for_status(model_response)
        output = await model_response.json()
        output["output"] = output.get("output", [])[:MAX_OUTPUT_ITEMS]
        return output
"""

RESPONSES_MODEL_TWICE = """
    async def responses(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        model_path = "/v1/responses"
        draft = await self.server_client.post(
            server_name=self.config.model_server.name, url_path=model_path, json=self._model_input(body)
        )
        raise_for_status(draft)
        final = await self.server_client.post(
            server_name=self.config.model_server.name,
            url_path=model_path,
            json={**self._model_input(body), "previous": await draft.json()},
        )
        raise_for_status(final)
        return await final.json()
"""

RUN = {
    "literal": """
    async def run(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        response = await self.server_client.post(  #<<SCA001>>
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body,
            cookies=request.cookies,
        )
        raise_for_status(response)
        return await self._verify(body, await response.json(), response.cookies)
""",
    "one_line": """
    async def run(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        LOGGER.debug("episode for %s", self.config.name)
        response = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)  #<<SCA001>>
        return await self._verify(body, await response.json(), response.cookies)
""",
    "run_wrapper": """
    async def run(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        response = await self.server_client.post(  #<<SCA001>>
            server_name=self.config.name,
            url_path=self.url_path_for_run("/v1/responses", body),
            json=body,
            cookies=request.cookies,
        )
        raise_for_status(response)
        return await self._verify(body, await response.json(), response.cookies)
""",
    "request_wrapper": """
    async def run(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        episode = await self._episode(request, body)
        return await self._verify(body, episode, request.cookies)

    async def _episode(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        response = await self.server_client.post(  #<<SCA001>>
            server_name=self.config.name, url_path=self.url_path_for_request("/v1/responses", request), json=body
        )
        raise_for_status(response)
        return await response.json()
""",
    "config_alias": """
    async def run(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        config = self.config
        LOGGER.info("running %s against %s", config.name, config.model_server.name)
        response = await self.server_client.post(  #<<SCA001>>
            server_name=config.name,
            url_path="/v1/responses",
            json=body,
            cookies=request.cookies,
        )
        raise_for_status(response)
        return await self._verify(body, await response.json(), response.cookies)
""",
    "helper_method": """
    async def run(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return await asyncio.wait_for(self._run_once(body, request.cookies), timeout=self.config.timeout_s)
        except TimeoutError:
            LOGGER.warning("episode timed out after %ss", self.config.timeout_s)
            return ${name}Verdict().model_dump()

    async def _run_once(self, body: dict[str, Any], cookies: Any) -> dict[str, Any]:
        response = await self.server_client.post(  #<<SCA001>>
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body,
            cookies=cookies,
        )
        raise_for_status(response)
        return await self._verify(body, await response.json(), response.cookies)
""",
    "shared_path": """
    async def run(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        own_path = self.url_path_for_run("/v1/responses", body)
        first = await self.server_client.post(  #<<SCA001>>
            server_name=self.config.name, url_path=own_path, json=body, cookies=request.cookies
        )
        raise_for_status(first)
        follow_up = {**body, "previous": await first.json()}
        second = await self.server_client.post(  #<<SCA001>>
            server_name=self.config.name, url_path=own_path, json=follow_up, cookies=first.cookies
        )
        raise_for_status(second)
        return await self._verify(body, await second.json(), second.cookies)
""",
    "loop_try": """
    async def run(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        cookies = request.cookies
        result: dict[str, Any] = {}
        for turn in range(self.config.max_turns):
            try:
                response = await self.server_client.post(  #<<SCA001>>
                    server_name=self.config.name,
                    url_path="/v1/responses",
                    json={**body, "turn": turn, "previous": result},
                    cookies=cookies,
                )
                raise_for_status(response)
            except RuntimeError:
                LOGGER.warning("turn %d failed", turn)
                continue
            result = await response.json()
            cookies = response.cookies
            if result.get("done"):
                break
        return await self._verify(body, result, cookies)
""",
    "inherited": """
    def build_prompt(self, body: dict[str, Any]) -> str:
        return str(body.get("question", ""))

    async def run(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        body = {**body, "prompt": self.build_prompt(body)}
        response = await self.server_client.post(  #<<SCA001>>
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body,
            cookies=request.cookies,
        )
        raise_for_status(response)
        return await self._verify(body, await response.json(), response.cookies)
""",
    "own_run_route": """
    async def run(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        episode = await self.responses(request, body)
        return await self._verify(body, episode, request.cookies)

    async def run_batch(self, request: Request, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results = []
        for body in bodies:
            response = await self.server_client.post(  #<<SCA002>>
                server_name=self.config.name, url_path="/run", json=body, cookies=request.cookies
            )
            results.append(await response.json())
        return results
""",
    "in_process": '''
    async def run(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        """Calls its handler in-process, not through
        `self.server_client.post(server_name=self.config.name, url_path="/v1/responses")`."""
        episode = await self.responses(request, body)
        return await self._verify(body, episode, request.cookies)
''',
    "model_only": """
    async def run(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        response = await self.server_client.post(
            server_name=self.config.model_server.name,
            url_path="/v1/responses",
            json=self._model_input(body),
            cookies=request.cookies,
        )
        raise_for_status(response)
        return await self._verify(body, await response.json(), response.cookies)
""",
}

AGENT_TAIL = """

if __name__ == "__main__":
    $cls.run_webserver()
"""

INHERITED_SUBCLASS = '''

class $cls($base):
    """Uses the adapter's run() unchanged."""
'''

SIBLING_PLAIN = '''\
"""$title variant that only changes the prompt; run() is the adapter's."""

from typing import Any

from app import $base


class $cls($base):
    def build_prompt(self, body: dict[str, Any]) -> str:
        return "$word: " + str(body.get("question", ""))


if __name__ == "__main__":
    $cls.run_webserver()
'''

SIBLING_OVERRIDE = '''\
"""$title variant with a run() of its own: drafts, then asks itself for a critique."""

from typing import Any

from app import $base as Base
from fastapi import Request


class $cls(Base):
    async def run(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        draft = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)  #<<SCA001>>
        return {"draft": await draft.json(), "prompt": self.build_prompt(body)}


if __name__ == "__main__":
    $cls.run_webserver()
'''

AGENT_CLIENT = '''\
"""Sends a few example tasks to a running $title agent (run by hand, outside any server)."""

import asyncio
import json

from nemo_gym.server_utils import ServerClient

TASKS = [{"question": "$word $n"}, {"question": "$word $m"}]


async def main() -> None:
    server_client = ServerClient.load_from_global_config()
    for task in TASKS:
        response = await server_client.post(server_name="$instance", url_path="/v1/responses", json=task)
        print(json.dumps(await response.json(), indent=2))


if __name__ == "__main__":
    asyncio.run(main())
'''

AGENT_TEST = '''\
"""Tests for the $title agent, with its server client mocked."""

from unittest.mock import AsyncMock, MagicMock

import pytest

from responses_api_agents.$impl.app import $cls


@pytest.fixture
def agent() -> $cls:
    agent = $cls.__new__($cls)
    agent.config = MagicMock(name="config")
    agent.server_client = MagicMock(post=AsyncMock())
    return agent


async def test_run_posts_one_episode(agent: $cls) -> None:
    request = MagicMock(cookies={})
    await agent.run(request, {"question": "$word"})
    agent.server_client.post.assert_any_call(
        server_name=agent.config.name, url_path="/v1/responses", json={"question": "$word"}, cookies={}
    )
'''


# ------------------------------------------------------------------------------------------
# Resources and model servers
# ------------------------------------------------------------------------------------------

RESOURCES_APP = '''\
"""$title resources server: seeds sessions and scores answers$judge_doc."""

from __future__ import annotations

from typing import Any

from nemo_gym.base_resources_server import BaseResourcesServerConfig, SimpleResourcesServer
from nemo_gym.server_utils import ModelServerRef, raise_for_status

PASS_THRESHOLD = $threshold


class ${name}Config(BaseResourcesServerConfig):
    judge_model_server: ModelServerRef | None = None
    strict: bool = $strict


class $cls(SimpleResourcesServer):
    config: ${name}Config

    async def seed_session(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"task": body.get("task", {}), "attempts": 0}

    async def verify(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = str(body.get("response", {}).get("output_text", "")).strip()
        expected = str(body.get("expected_answer", "")).strip()
        reward = 1.0 if answer == expected else 0.0
        if reward < PASS_THRESHOLD and self.config.judge_model_server is not None:
            reward = await self._judge(answer, expected)
        return {**body, "reward": reward}

    async def _judge(self, answer: str, expected: str) -> float:
        verdict = await self.server_client.post(
            server_name=self.config.judge_model_server.name,
            url_path="/v1/responses",
            json={"input": f"Is {answer!r} the same as {expected!r}? Answer yes or no."},
        )
        raise_for_status(verdict)
        text = (await verdict.json()).get("output_text", "")
        return 1.0 if text.strip().lower().startswith("yes") else 0.0


if __name__ == "__main__":
    $cls.run_webserver()
'''

MODEL_APP = '''\
"""$title model server: forwards /v1/responses to a pool of inference actors."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from nemo_gym.base_responses_api_model import BaseResponsesAPIModelConfig, SimpleResponsesAPIModel

DEFAULT_REPLICAS = $replicas


class ${name}Config(BaseResponsesAPIModelConfig):
    model: str = "$model"
    replicas: int = DEFAULT_REPLICAS


def spawn_actors(model_server_name: str, replicas: int) -> list[dict[str, Any]]:
    return [{"owner": model_server_name, "replica": index} for index in range(replicas)]


def placement_group(server_name: str, bundles: int) -> dict[str, Any]:
    return {"name": f"{server_name}-placement", "bundles": [{"GPU": 1}] * bundles}


class $cls(SimpleResponsesAPIModel):
    config: ${name}Config

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/v1/responses")(self.responses)
        self.actors = spawn_actors(model_server_name=self.config.name, replicas=self.config.replicas)
        self.placement = placement_group(server_name=self.config.name, bundles=self.config.replicas)
        return app

    async def responses(self, body: dict[str, Any]) -> dict[str, Any]:
        actor = self.actors[hash(str(body)) % len(self.actors)]
        return {"output_text": "", "actor": actor["replica"], "model": self.config.model}

    async def chat_completions(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self.responses(body)


if __name__ == "__main__":
    $cls.run_webserver()
'''


# ------------------------------------------------------------------------------------------
# Filler: ordinary modules that make up the bulk of a tree
# ------------------------------------------------------------------------------------------


# Function bodies: {arg} is the parameter, {key} a dict key, {num} a small number.
BODIES = (
    """results: list[str] = []
for item in {arg}:
    value = item.get("{key}", {num})
    if value is None:
        continue
    results.append(str(value).strip())
return results""",
    """total = 0.0
count = 0
for item in {arg}:
    try:
        total += float(item["{key}"])
    except (KeyError, TypeError, ValueError):
        continue
    count += 1
return [f"{{total / count:.{num}f}}"] if count else []""",
    """seen: set[str] = set()
ordered = []
for item in sorted({arg}, key=lambda entry: str(entry.get("{key}", ""))):
    marker = json.dumps(item, sort_keys=True)
    if marker in seen:
        continue
    seen.add(marker)
    ordered.append(marker[:{num}])
return ordered""",
    """groups: dict[str, list[dict[str, Any]]] = {{}}
for item in {arg}:
    groups.setdefault(str(item.get("{key}", "other")), []).append(item)
lines = [f"{{key}}: {{len(members)}}" for key, members in sorted(groups.items())]
if len(lines) > {num}:
    lines = lines[:{num}] + ["..."]
return lines""",
    """if not {arg}:
    return []
widths = [len(str(item.get("{key}", ""))) for item in {arg}]
limit = max(widths) + {num}
return [str(item.get("{key}", "")).ljust(limit) for item in {arg}]""",
    """digests = []
for item in {arg}:
    payload = json.dumps(item, sort_keys=True).encode()
    digests.append(hashlib.sha256(payload).hexdigest()[:{num}])
return digests""",
    """pattern = re.compile(r"[^a-z0-9]+")
return [pattern.sub("_", str(item.get("{key}", "")).lower())[:{num}] for item in {arg}]""",
    """values = [float(item.get("{key}", 0)) for item in {arg}]
if len(values) < 2:
    return []
return [f"mean={{statistics.mean(values):.3f}}", f"stdev={{statistics.stdev(values):.3f}}", "n={num}"]""",
    """counts = collections.Counter(str(item.get("{key}")) for item in {arg})
return [f"{{name}}={{count}}" for name, count in counts.most_common({num})]""",
    """batches = []
iterator = iter({arg})
while batch := list(itertools.islice(iterator, {num})):
    batches.append(",".join(str(item.get("{key}", "")) for item in batch))
return batches""",
    """return [textwrap.shorten(str(item.get("{key}", "")), width={num} + 10) for item in {arg}]""",
    """started = time.monotonic()
kept = [str(item["{key}"]) for item in {arg} if item.get("{key}") is not None]
LOGGER.debug("kept %d of %d in %.3fs", len(kept), len({arg}), time.monotonic() - started)
return kept[:{num}]""",
    """return [f"{{math.log1p(abs(float(item.get('{key}', 0)))):.{num}f}}" for item in {arg}]""",
)
_STDLIB_USE = re.compile(r"\b(" + "|".join(STDLIB) + r")\.")


def stdlib_imports(code: str, always: tuple[str, ...] = ()) -> str:
    """`import x` lines for the standard modules the code uses, sorted as isort would."""
    names = sorted(set(_STDLIB_USE.findall(code)) | set(always))
    return "".join(f"import {name}\n" for name in names)


class Filler:
    """Valid, lint-clean, varied Python and YAML of realistic size, from a seeded random source."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self._taken: set[str] = set()

    def begin(self) -> None:
        """Start a new module: names must be unique within one module only."""
        self._taken.clear()

    def _unique(self, make: Callable[[], str]) -> str:
        name = make()
        while name in self._taken:
            name = make() + str(self.rng.randint(2, 99))
        self._taken.add(name)
        return name

    def name(self) -> str:
        return self._unique(lambda: f"{self.rng.choice(VERBS)}_{self.rng.choice(THINGS)}")

    def klass(self) -> str:
        rng = self.rng
        suffixes = ("Builder", "Cache", "Loader", "Parser", "Scorer", "Store", "Tracker", "Writer")
        return self._unique(
            lambda: camel(rng.choice(NOUNS)) + camel(rng.choice(THINGS)) + rng.choice(suffixes)
        )

    def sentence(self) -> str:
        rng = self.rng
        return (
            f"{rng.choice(VERBS).capitalize()} each {rng.choice(THINGS)} of the {rng.choice(NOUNS)} "
            f"{rng.choice(THINGS)}s and keep the {rng.choice(ADJECTIVES)} ones"
        )

    def function(self, indent: str = "", method: bool = False) -> str:
        rng = self.rng
        name = self.name()
        arg = rng.choice(THINGS) + "s"
        body = rng.choice(BODIES).format(arg=arg, key=rng.choice(THINGS), num=rng.randint(2, 9))
        first = "self, " if method else ""
        lines = [
            f"def {name}({first}{arg}: list[dict[str, Any]]) -> list[str]:",
            f'    """{self.sentence()}."""',
            *(f"    {line}" for line in body.splitlines()),
        ]
        return "".join(f"{indent}{line}\n" for line in lines)

    def dataclass(self) -> str:
        rng = self.rng
        lines = [f"@dataclass\nclass {self.klass()}Options:\n", f'    """{self.sentence()}."""\n\n']
        for index in range(rng.randint(2, 7)):
            kind = rng.choice(("int", "float", "str", "bool"))
            default = {
                "int": str(rng.randint(1, 512)),
                "float": f"{rng.random():.3f}",
                "str": f'"{rng.choice(NOUNS)}"',
                "bool": "False",
            }[kind]
            lines.append(f"    {rng.choice(THINGS)}_{index}: {kind} = {default}\n")
        return "".join(lines)

    def klass_block(self) -> str:
        rng = self.rng
        methods = "\n".join(self.function("    ", method=True) for _ in range(rng.randint(2, 6)))
        return (
            f"class {self.klass()}:\n"
            f'    """{self.sentence()}.\n\n    {self.sentence()}; {self.sentence().lower()}.\n    """\n\n'
            f"    def __init__(self, root: Path, limit: int = {rng.randint(8, 4096)}) -> None:\n"
            f"        self.root = root\n        self.limit = limit\n"
            f"        self._seen: dict[str, int] = {{}}\n\n"
            f"{methods}"
        )

    def constants(self) -> str:
        rng = self.rng
        kinds = ("LIMIT", "SIZE", "RETRIES", "WIDTH")
        return "".join(
            f"{rng.choice(THINGS).upper()}_{rng.choice(kinds)}_{index} = {rng.randint(1, 9999)}\n"
            for index in range(rng.randint(2, 6))
        )

    def module(self, target_bytes: int) -> str:
        """A module of about `target_bytes`: constants, functions, classes and dataclasses."""
        rng = self.rng
        self.begin()
        parts = [self.constants()]
        size = len(parts[0]) + 400
        while size < target_bytes:
            part = rng.choice((self.function, self.function, self.klass_block, self.dataclass))()
            parts.append(part)
            size += len(part) + 2
        body = "\n\n\n".join(part.rstrip("\n") for part in parts[1:])
        used = "".join(parts)
        typing = [
            line
            for line, used in (
                ("from dataclasses import dataclass", "@dataclass" in used),
                ("from pathlib import Path", "Path" in used),
                ("from typing import Any", "Any" in used),
            )
            if used
        ]
        head = (
            f'"""{self.sentence()}.\n\n{self.sentence()}, then {self.sentence().lower()}.\n"""\n\n'
            "from __future__ import annotations\n\n"
            + stdlib_imports(used, always=("logging",))
            + "".join(f"{line}\n" for line in typing)
            + "\nLOGGER = logging.getLogger(__name__)\n\n"
            + parts[0]
        )
        return f"{head}\n\n{body}\n" if body else head

    def test_module(self, target_bytes: int, subject: str) -> str:
        rng = self.rng
        self.begin()
        parts = [f'"""Tests for {subject}."""\n\nimport json\n\nimport pytest\n']
        size = len(parts[0])
        while size < target_bytes:
            thing, num = rng.choice(THINGS), rng.randint(1, 99)
            case = (
                f'\n\n@pytest.mark.parametrize("count", [{num}, {num + 1}, {num + 2}])\n'
                f"def test_{self.name()}(count: int) -> None:\n"
                f'    """{self.sentence()}."""\n'
                f'    items = [{{"{thing}": value}} for value in range(count)]\n'
                f"    encoded = json.dumps(items)\n"
                f"    assert len(json.loads(encoded)) == count\n"
                f'    assert all("{thing}" in item for item in items)\n'
            )
            parts.append(case)
            size += len(case)
        return "".join(parts)

    def size(self) -> int:
        """A file size drawn like a real tree's: median near 5 KB, mean near 9 KB, a long tail."""
        return int(min(150_000, max(400, self.rng.lognormvariate(math.log(5_000), 1.2))))

    def yaml(self) -> str:
        rng = self.rng
        lines = [f"# {self.sentence()}\n"]
        for section in rng.sample(THINGS, rng.randint(2, 5)):
            lines.append(f"{section}:\n")
            keys = {f"{rng.choice(VERBS)}_{rng.choice(THINGS)}" for _ in range(rng.randint(2, 8))}
            for key in sorted(keys):
                value = rng.choice(
                    (str(rng.randint(0, 10_000)), f"{rng.random():.4f}", rng.choice(NOUNS), "true")
                )
                lines.append(f"  {key}: {value}\n")
        return "".join(lines)


# ------------------------------------------------------------------------------------------
# The tree
# ------------------------------------------------------------------------------------------


@dataclass
class Tree:
    files: dict[str, str] = field(default_factory=dict)
    expected: list[list[object]] = field(default_factory=list)

    def add(self, path: str, text: str) -> None:
        if path in self.files:
            raise ValueError(f"generated twice: {path}")
        lines = text.splitlines(keepends=True)
        for number, line in enumerate(lines, start=1):
            mark = _MARK.search(line)
            if mark:
                self.expected.append([mark.group(1), path, number])
                lines[number - 1] = line[: mark.start()] + line[mark.end() :]
        self.files[path] = "".join(lines)

    @property
    def py_count(self) -> int:
        return sum(path.endswith(".py") for path in self.files)


@dataclass(frozen=True)
class Agent:
    impl: str
    name: str
    form: str

    @property
    def folder(self) -> str:
        return f"responses_api_agents/{self.impl}"


def _unique_snake(rng: random.Random, used: set[str], vocabulary: tuple[str, ...], suffix: str) -> str:
    stem = f"{rng.choice(ADJECTIVES)}_{rng.choice(vocabulary)}"
    name, number = f"{stem}_{suffix}", 1
    while name in used:
        number += 1
        name = f"{stem}{number}_{suffix}"
    used.add(name)
    return name


def _agent_files(tree: Tree, agent: Agent, rng: random.Random, filler: Filler, rs_instance: str) -> None:
    title = agent.impl.removesuffix("_agent").replace("_", " ").capitalize()
    values = dict(
        title=title,
        name=agent.name,
        purpose=filler.sentence().lower(),
        max_items=rng.randint(8, 256),
        turns=rng.randint(2, 12),
        timeout=rng.choice((30.0, 60.0, 120.0, 600.0)),
        max_tokens=rng.choice((1024, 4096, 8192, 16384)),
    )
    filler.begin()
    helpers = "\n\n".join(filler.function() for _ in range(rng.randint(1, 4)))
    main_cls = f"{agent.name}Agent"
    if agent.form == "inherited":
        base_cls = f"{agent.name}AdapterBase"
        doc = "Adapter: subclasses supply the prompt."
        classes = (
            render(AGENT_CLASS_HEAD, cls=base_cls, base="SimpleResponsesAPIAgent", doc=doc, **values)
            + render(RESPONSES_MODEL, **values)
            + render(RUN["inherited"], **values)
            + render(INHERITED_SUBCLASS, cls=main_cls, base=base_cls)
        )
    else:
        responses = RESPONSES_MODEL_TWICE if agent.form == "shared_path" else RESPONSES_MODEL
        doc = filler.sentence() + "."
        classes = (
            render(AGENT_CLASS_HEAD, cls=main_cls, base="SimpleResponsesAPIAgent", doc=doc, **values)
            + render(responses, **values)
            + render(RUN[agent.form], **values)
        )
    stdlib = stdlib_imports(
        helpers, always=("asyncio", "logging") if agent.form == "helper_method" else ("logging",)
    )
    app = (
        render(AGENT_HEAD, stdlib=stdlib, **values)
        + "\n\n"
        + helpers
        + "\n"
        + classes
        + render(AGENT_TAIL, cls=main_cls)
    )
    tree.add(f"{agent.folder}/app.py", app)
    instances = [(agent.impl, "app.py")]
    if agent.form == "inherited":
        plain, override = f"{agent.name}PlannerAgent", f"{agent.name}CriticAgent"
        word = rng.choice(NOUNS)
        tree.add(
            f"{agent.folder}/planner_agent.py",
            render(SIBLING_PLAIN, title=title, base=base_cls, cls=plain, word=word),
        )
        tree.add(
            f"{agent.folder}/critic_agent.py",
            render(SIBLING_OVERRIDE, title=title, base=base_cls, cls=override),
        )
        instances += [
            (f"{agent.impl}_planner", "planner_agent.py"),
            (f"{agent.impl}_critic", "critic_agent.py"),
        ]
    for instance, entrypoint in instances:
        tree.add(
            f"{agent.folder}/configs/{instance}.yaml",
            f"{instance}:\n  responses_api_agents:\n    {agent.impl}:\n      entrypoint: {entrypoint}\n"
            f"      resources_server:\n        type: resources_servers\n        name: {rs_instance}\n"
            f"      model_server:\n        type: responses_api_models\n        name: policy_model\n"
            f"      max_turns: {values['turns']}\n"
            f"{instance}_long:\n  _inherit_from: {instance}\n  timeout_s: ${{oc.env:EPISODE_TIMEOUT,???}}\n",
        )


def _agent_extra(tree: Tree, agent: Agent, count: int, rng: random.Random, filler: Filler) -> None:
    """The n-th extra file of an agent folder: its test, its client script, then helper modules."""
    title = agent.impl.removesuffix("_agent").replace("_", " ").capitalize()
    cls = f"{agent.name}AdapterBase" if agent.form == "inherited" else f"{agent.name}Agent"
    word = rng.choice(NOUNS)
    if count == 0:
        text = render(AGENT_TEST, title=title, impl=agent.impl, cls=cls, word=word)
        tree.add(f"{agent.folder}/tests/test_app.py", text)
    elif count == 1:
        text = render(
            AGENT_CLIENT,
            title=title,
            word=word,
            n=rng.randint(1, 99),
            m=rng.randint(1, 99),
            instance=agent.impl,
        )
        tree.add(f"{agent.folder}/client.py", text)
    else:
        tree.add(f"{agent.folder}/{filler.name()}_{count}.py", filler.module(filler.size()))


def build(files: int, seed: int = 0) -> Tree:
    """The whole tree in memory: exactly `files` .py files."""
    rng = random.Random(seed)
    filler = Filler(rng)
    tree = Tree()
    tree.add("pyproject.toml", PYPROJECT)
    tree.add("nemo_gym/__init__.py", '"""NeMo Gym-shaped package generated for benchmarks."""\n')
    tree.add("nemo_gym/server_utils.py", SERVER_UTILS)
    tree.add("nemo_gym/base_responses_api_agent.py", AGENT_BASE)
    tree.add("nemo_gym/base_resources_server.py", RESOURCES_BASE)
    tree.add("nemo_gym/base_responses_api_model.py", MODEL_BASE)

    used: set[str] = set()
    n_agents = max(len(FORMS), files // FILES_PER_AGENT)
    agents = []
    for index in range(n_agents):
        impl = _unique_snake(rng, used, NOUNS, "agent")
        agents.append(Agent(impl, camel(impl.removesuffix("_agent")), FORMS[index % len(FORMS)]))
    resources = [
        _unique_snake(rng, used, NOUNS, "env") for _ in range(max(2, files // FILES_PER_RESOURCES_SERVER))
    ]
    models = [
        _unique_snake(rng, used, ("vllm", "openai", "azure", "local", "sglang"), "model")
        for _ in range(max(1, files // FILES_PER_MODEL_SERVER))
    ]

    for agent in agents:
        _agent_files(tree, agent, rng, filler, rs_instance=rng.choice(resources))
    for rs in resources:
        title = rs.replace("_", " ").capitalize()
        judged = rng.random() < 0.3
        tree.add(
            f"resources_servers/{rs}/app.py",
            render(
                RESOURCES_APP,
                title=title,
                name=camel(rs),
                cls=camel(rs) + "ResourcesServer",
                threshold=rng.choice((0.5, 0.8, 1.0)),
                strict=rng.choice((True, False)),
                judge_doc=", with a judge model when the answer is not an exact match" if judged else "",
            ),
        )
        agent = rng.choice(agents)
        judge = (
            "      judge_model_server:\n        type: responses_api_models\n        name: judge_model\n"
            if judged
            else ""
        )
        tree.add(
            f"resources_servers/{rs}/configs/{rs}.yaml",
            f"{rs}:\n  resources_servers:\n    {rs}:\n      entrypoint: app.py\n{judge}"
            f"{rs}_{agent.impl}:\n  responses_api_agents:\n    {agent.impl}:\n      entrypoint: app.py\n"
            f"      resources_server:\n        type: resources_servers\n        name: {rs}\n"
            f"      model_server:\n        type: responses_api_models\n        name: policy_model\n",
        )
    for model in models:
        title = model.replace("_", " ").capitalize()
        tree.add(
            f"responses_api_models/{model}/app.py",
            render(
                MODEL_APP,
                title=title,
                name=camel(model),
                cls=camel(model) + "Server",
                replicas=rng.randint(1, 8),
                model=f"{rng.choice(NOUNS)}-{rng.randint(1, 70)}b",
            ),
        )
        tree.add(
            f"responses_api_models/{model}/configs/{model}.yaml",
            f"policy_model:\n  responses_api_models:\n    {model}:\n      entrypoint: app.py\n"
            f"      model: ${{policy_model_name}}\n",
        )

    core = tree.py_count
    if core > files:
        raise ValueError(f"--files {files} is too small: the agents and servers alone take {core} .py files")
    _fill(tree, files - core, agents, resources, used, rng, filler)
    _fill_yaml(tree, int(files * YAML_PER_PY), resources, rng, filler)
    tree.expected.sort(key=lambda entry: (entry[1], entry[2], entry[0]))
    return tree


def _fill(
    tree: Tree,
    count: int,
    agents: list[Agent],
    resources: list[str],
    used: set[str],
    rng: random.Random,
    filler: Filler,
) -> None:
    """Spread `count` filler .py files over the tree the way a real tree spreads its bulk."""
    extras = dict.fromkeys(agents, 0)
    packages = [f"nemo_gym/{word}" for word in rng.sample(NOUNS, min(6, count))]
    for package in packages:
        tree.add(f"{package}/__init__.py", f'"""{filler.sentence()}."""\n')
    count -= len(packages)
    benchmarks = [
        f"benchmarks/{_unique_snake(rng, used, NOUNS, 'bench')}" for _ in range(max(1, count // 25))
    ]
    serial = 0
    while count > 0:
        serial += 1
        where = rng.random()
        if where < 0.12:
            agent = rng.choice(agents)
            _agent_extra(tree, agent, extras[agent], rng, filler)
            extras[agent] += 1
        elif where < 0.52:
            rs = rng.choice(resources)
            if rng.random() < 0.4:
                path = f"resources_servers/{rs}/tests/test_{filler.name()}_{serial}.py"
                tree.add(path, filler.test_module(filler.size(), rs.replace("_", " ")))
            else:
                tree.add(f"resources_servers/{rs}/{filler.name()}_{serial}.py", filler.module(filler.size()))
        elif where < 0.70:
            kind = rng.choice(("prepare", "convert", "metrics", "download"))
            tree.add(f"{rng.choice(benchmarks)}/{kind}_{serial}.py", filler.module(filler.size()))
        elif where < 0.85:
            tree.add(f"{rng.choice(packages)}/{filler.name()}_{serial}.py", filler.module(filler.size()))
        elif where < 0.96:
            name = filler.name()
            tree.add(
                f"tests/unit/test_{name}_{serial}.py",
                filler.test_module(filler.size(), name.replace("_", " ")),
            )
        else:
            tree.add(f"scripts/{filler.name()}_{serial}.py", filler.module(filler.size()))
        count -= 1


def _fill_yaml(tree: Tree, target: int, resources: list[str], rng: random.Random, filler: Filler) -> None:
    count = sum(path.endswith(".yaml") for path in tree.files)
    serial = 0
    while count < target:
        serial += 1
        if rng.random() < 0.3:
            rs = rng.choice(resources)
            tree.add(
                f"benchmarks/{rs}_{serial}/config.yaml",
                f"config_paths:\n  - resources_servers/{rs}/configs/{rs}.yaml\n" + filler.yaml(),
            )
        else:
            tree.add(f"data/{rng.choice(NOUNS)}_{serial}.yaml", filler.yaml())
        count += 1


def write(tree: Tree, out: Path, git: bool = False) -> None:
    """Write the tree and its expected.json; `git` makes it a one-commit git checkout."""
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty")
    for path, text in tree.files.items():
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    rows = ",\n".join(f"  {json.dumps(entry)}" for entry in tree.expected)
    (out / EXPECTED_FILE).write_text(f"[\n{rows}\n]\n", encoding="utf-8")
    if git:
        identity = [
            "-c",
            "user.name=gen-tree",
            "-c",
            "user.email=gen-tree@example.invalid",
            "-c",
            "commit.gpgsign=false",
        ]
        for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "generated tree"]):
            subprocess.run(["git", *identity, *command], cwd=out, check=True)


def generate(out: Path, files: int, seed: int = 0, git: bool = False) -> list[list[object]]:
    """Generate a tree of `files` .py files into the empty or new folder `out`; the expected findings."""
    tree = build(files, seed)
    write(tree, out, git)
    return tree.expected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to create (must be empty or new)")
    parser.add_argument("--files", type=int, default=1600, help="number of .py files (default 1600)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--git", action="store_true", help="make the tree a git checkout with one commit")
    args = parser.parse_args(argv)
    try:
        expected = generate(args.out, args.files, args.seed, args.git)
    except (ValueError, FileExistsError) as exc:
        print(f"gen_tree: {exc}", file=sys.stderr)
        return 2
    print(
        f"wrote {args.files} .py files to {args.out}; {len(expected)} expected self-calls in {EXPECTED_FILE}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

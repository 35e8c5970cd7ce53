"""The newer call form, migrated by `fix`, runs against a real app: a self-call made by the agent's
retry wrapper (NeMo Gym's base defines it) through a lambda, its optional headers passed as a
conditional `**` expansion.

The agent below has no server client at all: after `fix` its self-call must go in-process,
through the helper `fix` wrote into the project, into the agent's own FastAPI app served by
uvicorn; the retry wrapper sends it again when the handler refuses it (409)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BASE = """\
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel


class AgentConfig(BaseModel):
    name: str
    host: str = "127.0.0.1"  # where the server runs, as NeMo Gym's configs say
    port: int = 8000


class SimpleResponsesAPIAgent(BaseModel):
    config: AgentConfig
    server_client: Any = None

    async def retry_checkpoint_refusal(self, send):
        \"\"\"Sends again while the server refuses because a checkpoint is being taken.\"\"\"
        for _ in range(3):
            response = await send()
            if response.status != 409:
                break
        return response

    def setup_webserver(self) -> FastAPI:
        app = FastAPI()
        app.post("/v1/responses")(self.responses)
        app.post("/run")(self.run)
        return app
"""
AGENT = """\
from fastapi import Body, Request
from fastapi.responses import JSONResponse

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class EchoAgent(SimpleResponsesAPIAgent):
    calls: int = 0

    async def responses(self, request: Request, body: dict = Body()):
        self.calls += 1
        if self.calls % 2:
            return JSONResponse({"detail": "checkpoint in progress"}, status_code=409)
        return {"input": body["input"], "checkpoint": request.headers.get("x-ng-checkpoint"), "calls": self.calls}

    async def run(self, request: Request, body: dict = Body()) -> dict:
        checkpoint = request.headers.get("x-ng-checkpoint")
        headers = {"x-ng-checkpoint": checkpoint} if checkpoint else None
        response = await self.retry_checkpoint_refusal(
            lambda: self.server_client.post(
                server_name=self.config.name,
                url_path="/v1/responses",
                json=body,
                **({"headers": headers} if headers is not None else {}),
            )
        )
        return await response.json()
"""
SERVE = """\
import asyncio, json, sys

import aiohttp, uvicorn

sys.modules["selfcall_audit"] = None  # the migrated repo runs without the tool
from nemo_gym.base_responses_api_agent import AgentConfig
from responses_api_agents.echo.app import EchoAgent


async def main():
    agent = EchoAgent(config=AgentConfig(name="echo"))
    server = uvicorn.Server(uvicorn.Config(agent.setup_webserver(), host="127.0.0.1", port=0, log_level="critical"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}/run"
    async with aiohttp.ClientSession() as session:
        async with session.post(url, json={"input": "hi"}, headers={"x-ng-checkpoint": "c1"}) as first:
            headed = await first.json()
        async with session.post(url, json={"input": "again"}) as second:
            plain = await second.json()
    server.should_exit = True
    await task
    print(json.dumps([headed, plain]))


asyncio.run(main())
"""


@pytest.mark.slow
def test_the_migrated_retry_lambda_with_optional_headers_runs_in_process(tmp_path: Path, cli) -> None:
    root = tmp_path / "repo"
    (root / "nemo_gym").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "toy"\n')
    (root / "nemo_gym" / "__init__.py").write_text("")
    (root / "nemo_gym" / "base_responses_api_agent.py").write_text(BASE)
    app = root / "responses_api_agents" / "echo" / "app.py"
    app.parent.mkdir(parents=True)
    app.write_text(AGENT)

    fixed = cli("fix", "--no-cache", root)

    assert fixed.exit_code == 0, fixed.stdout
    migrated = app.read_text()
    assert "lambda: responses_in_process(\n                self,\n" in migrated
    assert '**({"headers": headers} if headers is not None else {}),' in migrated
    assert "server_client" not in migrated.split("class EchoAgent")[1]

    served = subprocess.run(
        [sys.executable, "-c", SERVE], cwd=root, capture_output=True, text=True, timeout=60
    )

    assert served.returncode == 0, served.stderr
    headed, plain = json.loads(served.stdout)
    assert headed == {"input": "hi", "checkpoint": "c1", "calls": 2}  # refused once, sent again
    assert plain == {"input": "again", "checkpoint": None, "calls": 4}  # no header: the `**` passed none

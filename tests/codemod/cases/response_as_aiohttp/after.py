"""Responses used as aiohttp's are: the in-process helper's serves every use here."""

from fastapi import Request
from selfcall_audit.inprocess import responses_in_process

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class CarefulAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await responses_in_process(
            self,
            url_path="/v1/responses",
            json=body.responses_create_params,
            cookies=request.cookies,
        )
        if not response.ok:
            detail = await response.text()
            response.release()
            raise RuntimeError(f"{response.status} {response.reason} at {response.url}: {detail}")
        response.raise_for_status()
        trace = response.headers.get("x-trace-id")
        raw = await response.content.read()
        parsed = await response.json()
        return {"trace": trace, "cookies": dict(response.cookies), "size": len(raw), "output": parsed}


class ChainedAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        return await (
            await responses_in_process(
                self,
                url_path="/v1/responses",
                json=body.responses_create_params,
            )
        ).json()

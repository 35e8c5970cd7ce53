"""The name of a self-call's response bound again: a use counts where the response can reach it."""

from fastapi import Request
from selfcall_audit.inprocess import responses_in_process

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class BodyAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await responses_in_process(
            self,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        response = await response.json()
        return response.get("output")


class CheckedFirstAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = await self.server_client.get(server_name=self.config.resources_server.name, url_path="/health")
        if response.status_code != 200:
            raise RuntimeError(response.text)
        response = await responses_in_process(
            self,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        return await response.json()


class RetryAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        response = None
        for _ in range(3):
            if response is not None and response.status_code == 200:
                break
            response = await self.server_client.post(
                server_name=self.config.name,
                url_path="/v1/responses",
                json=body.responses_create_params,
            )
        return await response.json()


class BranchAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> dict:
        if body.responses_create_params:
            response = await self.server_client.post(
                server_name=self.config.name,
                url_path="/v1/responses",
                json=body.responses_create_params,
            )
        else:
            response = await self.server_client.get(server_name=self.config.resources_server.name, url_path="/")
        return response.json()


class RestoredAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> int:
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        first = response

        def restore() -> None:
            nonlocal response
            response = first

        response = None
        restore()
        return response.status_code


KEPT = []
last = None


def restore_last() -> None:
    global last
    last = KEPT[-1]


class SharedAgent(SimpleResponsesAPIAgent):
    async def run(self, request: Request, body: BaseRunRequest) -> int:
        global last
        last = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=body.responses_create_params,
        )
        KEPT.append(last)
        last = None
        restore_last()
        return last.status_code

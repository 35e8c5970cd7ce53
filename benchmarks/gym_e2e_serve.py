"""One NeMo Gym server for `gym_e2e.py`, run under NeMo Gym's own Python with its tree on sys.path.

    python gym_e2e_serve.py agent|resources|model PORT [TARGET]

The server is built as NeMo Gym's `run_webserver` builds it (config from NEMO_GYM_CONFIG_DICT and
NEMO_GYM_CONFIG_PATH, `setup_webserver`, liveness, exception middleware, validation handler) but
without Ray and without a head server: every server address is in the config already. TARGET is
`module:Class` of the server (agents, resources). `model` is a mock Responses API model, and
`bench:ProofChecker` a stand-in verifier for the proof refinement agent (NeMo Gym's own proof
verifiers need a Lean sandbox or a judge model).

An outer ASGI wrapper (not part of the app) counts the requests the server receives, and answers
`/_bench/stats`, `/_bench/reset`, `/_bench/observability` and `/_bench/modules` for the benchmark:
the last gives the files the agent's code was imported from (its module, `nemo_gym`, and the module
of the `responses_in_process` it calls, if any), so that the benchmark can refuse to report on
code from another tree than the one it meant to serve. The mock model is
a bare aiohttp server (the cheapest HTTP server at hand), so that the machine's time goes to the
NeMo Gym servers. GYM_E2E_CPUS (e.g. `0` or `1,2,3`) pins the process to those CPUs before it
starts serving.
"""

import asyncio
import contextlib
import hashlib
import importlib
import json
import os
import re
import sys
import threading
import time

import uvicorn
from fastapi import Request


class Stats:
    """Requests received, CPU time, and the peak number of open sockets of this process.

    The peak is sampled every 100 ms by counting the process's descriptors (no per-descriptor
    look-up): the descriptors that are not sockets are counted once, at reset, and taken off.
    Listing 1,300 descriptors takes about 1 ms, and the agent with the HTTP self-call holds more
    of them: sampled every 10 ms, that took 2 to 9% of a CPU in the agent's process, more in the
    baseline's. The sampling thread's own CPU time is taken off the process's, so that the CPU
    time reported is the server's work alone, whatever the number of sockets it holds.
    """

    def __init__(self, app, server=None, modules=None):
        self.app, self.server, self.modules = app, server, modules or {}
        self.lock = threading.Lock()
        self.reset()
        threading.Thread(target=self._sample, daemon=True).start()

    def reset(self) -> None:
        with self.lock:
            self.requests = 0
            self.self_calls = 0
            sockets = _sockets()
            self.other_descriptors = len(os.listdir("/proc/self/fd")) - sockets
            self.peak_sockets = sockets
            self.cpu = time.process_time()
            self.sampling_cpu = 0.0

    def _sample(self) -> None:
        while True:
            started = time.thread_time()
            count = len(os.listdir("/proc/self/fd")) - self.other_descriptors
            with self.lock:
                self.peak_sockets = max(self.peak_sockets, count)
                self.sampling_cpu += time.thread_time() - started
            time.sleep(0.1)

    def count(self, path: str) -> None:
        with self.lock:
            self.requests += 1
            self.self_calls += path.endswith("/v1/responses") and self.server is not None

    def snapshot(self) -> bytes:
        return json.dumps(
            {
                "requests": self.requests,
                "self_calls": self.self_calls,
                "peak_sockets": self.peak_sockets,
                "cpu": time.process_time() - self.cpu - self.sampling_cpu,
            }
        ).encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith("/_bench/"):
            return await self._bench(scope, receive, send)
        if scope["type"] == "http":
            self.count(scope["path"])
        await self.app(scope, receive, send)

    async def _bench(self, scope, receive, send):
        path = scope["path"]
        if path == "/_bench/reset":
            self.reset()
        elif path.startswith("/_bench/observability/"):
            self.server.server_client.global_config_dict["observability_enabled"] = path.endswith("/on")
        body = json.dumps(self.modules).encode() if path == "/_bench/modules" else self.snapshot()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


# --------------------------------------------------------------------------------------------
# The mock model: deterministic answers, a 500 for inputs that ask for one
# --------------------------------------------------------------------------------------------


def model_answer(body: dict) -> tuple[int, dict]:
    """The mock model's answer: the counter's tool calls, then a message; 500 if asked to fail."""
    items = body.get("input")
    items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
    text = " ".join(str(i.get("content", "")) for i in items if i.get("role") == "user")
    if "FAIL500" in text:
        return 500, {"error": "the mock model failed"}
    digest = hashlib.blake2b(json.dumps(body, sort_keys=True).encode(), digest_size=8).hexdigest()
    step = sum(1 for i in items if i.get("type") == "function_call_output")
    adds = [int(n) for n in re.findall(r"add (\d+)", text)]
    if body.get("tools") and step < len(adds) + 1:
        name, arguments = (
            ("increment_counter", json.dumps({"count": adds[step]}))
            if step < len(adds)
            else ("get_counter_value", "{}")
        )
        output = [
            {
                "type": "function_call",
                "id": f"fc_{digest}",
                "call_id": f"call_{step}",
                "name": name,
                "arguments": arguments,
                "status": "completed",
            }
        ]
    else:
        output = [
            {
                "type": "message",
                "id": f"msg_{digest}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": f"answer {digest}", "annotations": []}],
            }
        ]
    return 200, {
        "id": f"resp_{digest}",
        "created_at": 0.0,
        "model": "mock",
        "object": "response",
        "output": output,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
    }


def serve_mock_model(port: int) -> None:
    """The mock model on a bare aiohttp server: POST .../v1/responses, GET / and /_bench/*."""
    from aiohttp import web

    stats = Stats(None)

    async def handle(request: web.BaseRequest) -> web.Response:
        path = request.path
        if path.startswith("/_bench/"):
            if path == "/_bench/reset":
                stats.reset()
            return web.Response(body=stats.snapshot(), content_type="application/json")
        stats.count(path)
        if request.method == "GET":
            return web.json_response({"status": "ok"})
        if not path.endswith("/v1/responses"):
            return web.json_response({"detail": "Not Found"}, status=404)
        status, answer = model_answer(await request.json())
        return web.json_response(answer, status=status)

    async def run() -> None:
        runner = web.ServerRunner(web.Server(handle), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        await asyncio.Event().wait()

    asyncio.run(run())


# --------------------------------------------------------------------------------------------
# NeMo Gym servers
# --------------------------------------------------------------------------------------------


def proof_checker_class():
    """A verifier for proof_refinement_agent: the first attempt needs a correction, the second passes."""
    from nemo_gym.base_resources_server import (
        BaseResourcesServerConfig,
        BaseVerifyResponse,
        SimpleResourcesServer,
    )
    from pydantic import ConfigDict
    from responses_api_agents.proof_refinement_agent.app import ProofRefinementVerifyRequest

    class ProofCheckerConfig(BaseResourcesServerConfig):
        pass

    class Verified(BaseVerifyResponse):
        model_config = ConfigDict(extra="allow")

    class ProofChecker(SimpleResourcesServer):
        config: ProofCheckerConfig

        async def verify(self, request: Request, body: ProofRefinementVerifyRequest) -> Verified:
            first = body.turn_index == 0
            extra = {"needs_correction": first, "proof_status": "failed" if first else "proved"}
            if first:
                extra["correction_prompt"] = "The proof has a gap; correct it."
            return Verified(**body.model_dump(), reward=0.0 if first else 1.0, **extra)

    return ProofChecker


def gym_server(target: str):
    """The server instance and its app, as `SimpleServer.run_webserver` builds them, minus Ray."""
    from fastapi.exception_handlers import request_validation_exception_handler
    from fastapi.exceptions import RequestValidationError
    from nemo_gym.config_types import BaseServerConfig
    from nemo_gym.global_config import get_global_config_dict
    from nemo_gym.server_utils import ServerClient

    if target == "bench:ProofChecker":
        cls = proof_checker_class()
    else:
        module, _, name = target.partition(":")
        cls = getattr(importlib.import_module(module), name)
    global_config_dict = get_global_config_dict()
    head = global_config_dict["head_server"]
    server_client = ServerClient(
        head_server_config=BaseServerConfig(host=head["host"], port=head["port"]),
        global_config_dict=global_config_dict,
    )
    server = cls(config=cls.load_config_from_global_config(), server_client=server_client)
    app = server.setup_webserver()
    server.setup_liveness(app)
    server.setup_exception_middleware(app)

    @app.exception_handler(RequestValidationError)
    async def validation_exception_handler(request: Request, exc):
        return await request_validation_exception_handler(request, exc)

    return server, app


def imported_files(target: str) -> dict[str, str | None]:
    """The files the server's module, `nemo_gym` and the agent's in-process helper were loaded from."""
    module = sys.modules[target.partition(":")[0]]
    helper = getattr(module, "responses_in_process", None)
    return {
        "agent": module.__file__,
        "nemo_gym": sys.modules["nemo_gym"].__file__,
        "helper": None if helper is None else sys.modules[helper.__module__].__file__,
    }


def main() -> None:
    role, port = sys.argv[1], int(sys.argv[2])
    if cpus := os.environ.get("GYM_E2E_CPUS"):
        os.sched_setaffinity(0, {int(cpu) for cpu in cpus.split(",")})
    if role == "model":
        serve_mock_model(port)
        return
    server, app = gym_server(sys.argv[3])
    agent = role == "agent"
    wrapped = Stats(app, server if agent else None, imported_files(sys.argv[3]) if agent else None)
    uvicorn.run(
        wrapped, host="127.0.0.1", port=port, access_log=False, log_level="warning", timeout_keep_alive=30
    )


if __name__ == "__main__":
    main()

"""Agent self-call over HTTP versus ``responses_in_process``, measured side by side.

Setup, all on 127.0.0.1: a mock model server (aiohttp.web, own process) and an agent server
(FastAPI under uvicorn, own process) shaped like a NeMo Gym simple agent: session middleware,
exception middleware, ``/v1/responses`` and its rollout twins, and ``/run``. ``/run`` self-calls
its own ``/v1/responses`` once per rollout (with the rollout-prefixed path and the caller's
cookies) and that handler calls the model ``--model-calls`` times. The only difference between
the two variants is the self-call expression: ``server_client.post(...)`` (aiohttp, orjson body,
no cookie jar, as NeMo Gym's ServerClient) or ``responses_in_process(self, ...)``. This process
drives ``/run`` with a closed loop of N concurrent clients, alternating rounds of the two
variants against the same servers, and sums the rounds of each variant.

Reported per concurrency and variant:

- rollouts/s: completed ``/run`` calls per second of round time; p50/p99: their latency;
- self-call overhead per call: inside ``run()`` the agent times the self-call expression plus
  reading its result (``raise_for_status`` and ``get_response_json``, as NeMo Gym agents do),
  and subtracts the time the handler body itself took (measured inside the handler, from entry
  to return); what remains is the cost of the call mechanism (client, sockets, middleware,
  (de)serialisation, validation, scheduling). The mean is reported (and used for the ratio),
  and the median, which is steadier on a busy machine;
- sockets per self-call: TCP connections the agent's aiohttp client opened to the agent's own
  address (an aiohttp ``TraceConfig`` ``on_connection_create_end`` hook) during the measured
  rounds, divided by self-calls; with keep-alive that is near 0 for HTTP too once the pool is
  warm, so "sockets in use" adds the most distinct client connections that brought requests to
  the agent's ``/v1/responses`` routes in one round (seen by a plain ASGI wrapper): for HTTP
  about one per concurrent rollout, two file descriptors each;
- CPU: CPU seconds the agent process used per rollout (``time.process_time`` deltas);
- failures: ``/run`` calls that did not answer 200.

The last line is, for concurrency 64: ``rollouts_per_s_ratio=R overhead_ratio=O
self_call_sockets=N`` with R = helper/HTTP rollouts/s, O = helper/HTTP overhead per call and N =
sockets the helper variant opened per self-call. ``--quick`` takes about a minute.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path
from typing import Any
from uuid import uuid4

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

MODES = ("http", "inprocess")
LEVELS = (1, 64, 256)


# ------------------------------------------------------------------------------------------
# Mock model server
# ------------------------------------------------------------------------------------------


def serve_model() -> None:
    """A cheap Responses-API mock: one assistant message per call, plus an affinity cookie."""
    from aiohttp import web

    answer = json.dumps(
        {
            "id": "resp_mock",
            "object": "response",
            "output": [{"type": "message", "role": "assistant", "content": "4"}],
            "usage": {"input_tokens": 12, "output_tokens": 1, "total_tokens": 13},
        }
    ).encode()

    async def responses(request: web.Request) -> web.Response:
        await request.read()
        response = web.Response(body=answer, content_type="application/json")
        response.set_cookie("model_affinity", "replica-0")
        return response

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/responses", responses)
        app.router.add_post("/ng-rollout/{rollout_id}/v1/responses", responses)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        print(f"READY {runner.addresses[0][1]}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


# ------------------------------------------------------------------------------------------
# Agent server
# ------------------------------------------------------------------------------------------


def serve_agent(model_url: str, model_calls: int) -> None:
    """A NeMo Gym-shaped simple agent whose ``run`` self-calls one way or the other."""
    import aiohttp
    import uvicorn
    from fastapi import Body, FastAPI, Request, Response
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, ConfigDict
    from starlette.middleware.sessions import SessionMiddleware

    from selfcall_audit.inprocess import responses_in_process

    try:
        from orjson import dumps as dumps_json
    except ImportError:  # NeMo Gym uses orjson; the stdlib is only slower

        def dumps_json(value: Any) -> bytes:
            return json.dumps(value, separators=(",", ":")).encode()

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        input: str | list[dict[str, Any]]
        model: str | None = None
        metadata: dict[str, str] | None = None

    class AgentResponse(BaseModel):
        model_config = ConfigDict(extra="allow")
        id: str
        object: str = "response"
        output: list[dict[str, Any]]
        usage: dict[str, Any] | None = None

    class RunRequest(BaseModel):
        responses_create_params: Params
        rollout_id: str
        mode: str

    class Config(BaseModel):
        name: str = "bench_agent"
        host: str = "127.0.0.1"
        port: int = 0

    stats: dict[str, Any] = {"self_calls": 0, "overhead": 0.0, "sockets_to_self": 0}
    self_call_connections: set[Any] = set()
    overheads: list[float] = []
    handler_seconds: dict[str, float] = {}
    client: dict[str, aiohttp.ClientSession] = {}

    async def note_target(session: Any, context: Any, params: Any) -> None:
        context.port = params.url.port

    async def count_connection(session: Any, context: Any, params: Any) -> None:
        if context.port == agent.config.port:
            stats["sockets_to_self"] += 1

    def http_client() -> aiohttp.ClientSession:
        if "session" not in client:
            trace = aiohttp.TraceConfig()
            trace.on_request_start.append(note_target)
            trace.on_connection_create_end.append(count_connection)
            connector = aiohttp.TCPConnector(limit=100 * 1024, limit_per_host=1024, keepalive_timeout=15)
            client["session"] = aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trace_configs=[trace]
            )
        return client["session"]

    async def post(url: str, payload: Any, cookies: Any) -> aiohttp.ClientResponse:
        """NeMo Gym's ServerClient.post: model dumped with exclude_unset, orjson body, no jar."""
        if isinstance(payload, BaseModel):
            payload = payload.model_dump(exclude_unset=True)
        headers = {"Content-Type": "application/json"}
        return await http_client().post(url, data=dumps_json(payload), headers=headers, cookies=cookies)

    async def raise_for_status(response: Any) -> None:
        if not response.ok:
            content = await response.content.read()
            try:
                response.raise_for_status()
            except aiohttp.ClientResponseError as error:
                error.response_content = content
                raise

    async def get_response_json(response: Any) -> Any:
        return json.loads(await response.read())

    class BenchAgent(BaseModel):
        config: Config = Config()

        def get_session_middleware_key(self) -> str:
            return f"{type(self).__name__}___{self.config.name}"

        async def responses(
            self,
            request: Request,
            response: Response,
            body: Params = Body(),  # noqa: B008 - the FastAPI signature of NeMo Gym agents
        ) -> AgentResponse:
            started = time.perf_counter()
            rollout_id = request.path_params.get("rollout_id")
            model_path = f"/ng-rollout/{rollout_id}/v1/responses" if rollout_id else "/v1/responses"
            cookies: Any = None
            for _ in range(model_calls):
                model_response = await post(model_url + model_path, body, cookies)
                await raise_for_status(model_response)
                result = await get_response_json(model_response)
                cookies = model_response.cookies
            for name, value in (*request.cookies.items(), *cookies.items()):
                response.set_cookie(name, value)
            answer = AgentResponse.model_validate(result)
            handler_seconds[body.metadata["bench_id"]] = time.perf_counter() - started
            return answer

        async def run(self, request: Request, body: RunRequest) -> dict:
            bench_id = uuid4().hex
            params = body.responses_create_params.model_copy(update={"metadata": {"bench_id": bench_id}})
            url_path = f"/ng-rollout/{body.rollout_id}/v1/responses"
            started = time.perf_counter()
            if body.mode == "http":
                own_url = f"http://{self.config.host}:{self.config.port}{url_path}"
                response = await post(own_url, params, request.cookies)
            else:
                response = await responses_in_process(
                    self, url_path=url_path, json=params, cookies=request.cookies
                )
            await raise_for_status(response)
            result = await get_response_json(response)
            elapsed = time.perf_counter() - started
            overhead = elapsed - handler_seconds.pop(bench_id)
            stats["self_calls"] += 1
            stats["overhead"] += overhead
            overheads.append(overhead)
            return {"answer": result["output"][0]["content"], "cookies": sorted(response.cookies)}

    agent = BenchAgent()
    app = FastAPI()

    @app.middleware("http")
    async def assign_session_id(request: Request, call_next: Any) -> Any:
        request.session["session_id"] = request.session.get("session_id", str(uuid4()))
        return await call_next(request)

    key = agent.get_session_middleware_key()
    app.add_middleware(SessionMiddleware, secret_key=key, session_cookie=key)
    app.post("/v1/responses")(agent.responses)
    app.post("/ng-rollout/{rollout_id}/v1/responses")(agent.responses)
    app.post("/ng-rollout/{rollout_id}/training-token-capture/v1/responses")(agent.responses)
    app.post("/run")(agent.run)

    @app.get("/bench/stats")
    async def bench_stats() -> dict:
        """Counters so far; the per-round samples (connections, overheads) start over."""
        used, samples = len(self_call_connections), list(overheads)
        self_call_connections.clear()
        overheads.clear()
        return {**stats, "cpu": time.process_time(), "self_call_connections": used, "overheads": samples}

    async def counting_app(scope: dict, receive: Any, send: Any) -> None:
        """Plain ASGI (no middleware cost): which connections bring requests to /v1/responses."""
        if scope["type"] == "http" and scope["path"].endswith("/v1/responses"):
            self_call_connections.add(scope["client"])
        await app(scope, receive, send)

    @app.middleware("http")
    async def answer_errors(request: Request, call_next: Any) -> Any:
        try:
            return await call_next(request)
        except Exception as error:
            return JSONResponse(content=repr(error), status_code=500)

    async def main() -> None:
        config = uvicorn.Config(
            counting_app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            access_log=False,
            backlog=4096,
            timeout_keep_alive=30,
        )
        server = uvicorn.Server(config)
        serving = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        agent.config.port = server.servers[0].sockets[0].getsockname()[1]
        print(f"READY {agent.config.port} http={config.http_protocol_class.__name__}", flush=True)
        await serving

    asyncio.run(main())


# ------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------


def start(*args: str) -> tuple[subprocess.Popen[str], list[str]]:
    process = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline().split()
    if not line or line[0] != "READY":
        process.kill()
        raise SystemExit(f"server {args} failed to start")
    return process, line[1:]


async def run_round(url: str, mode: str, concurrency: int, seconds: float) -> dict[str, Any]:
    """Drive /run with ``concurrency`` closed-loop clients for ``seconds``."""
    import aiohttp

    latencies: list[float] = []
    failures = 0
    body = {"responses_create_params": {"input": "What is 2 + 2?", "model": "mock"}, "mode": mode}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar()) as session:

        async def stats() -> dict[str, Any]:
            async with session.get(f"{url}/bench/stats") as response:
                return await response.json()

        async def worker(index: int, deadline: float) -> None:
            nonlocal failures
            turn = 0
            while time.perf_counter() < deadline:
                turn += 1
                payload = {**body, "rollout_id": f"w{index}-r{turn}"}
                started = time.perf_counter()
                try:
                    async with session.post(f"{url}/run", json=payload, cookies={"caller": "c"}) as response:
                        await response.read()
                        ok = response.status == 200
                except aiohttp.ClientError:
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - started)
                else:
                    failures += 1

        before = await stats()
        started = time.perf_counter()
        await asyncio.gather(*(worker(i, started + seconds) for i in range(concurrency)))
        elapsed = time.perf_counter() - started
        after = await stats()
    return {
        "rollouts": len(latencies),
        "seconds": elapsed,
        "latencies": latencies,
        "failures": failures,
        **{key: after[key] - before[key] for key in ("cpu", "self_calls", "overhead", "sockets_to_self")},
        "self_call_connections": after["self_call_connections"],
        "overheads": after["overheads"],
    }


def summarize(rounds: list[dict[str, Any]]) -> dict[str, float]:
    rollouts = sum(r["rollouts"] for r in rounds)
    self_calls = sum(r["self_calls"] for r in rounds) or 1
    latencies = sorted(latency for r in rounds for latency in r["latencies"]) or [0.0]
    return {
        "rollouts_per_s": rollouts / sum(r["seconds"] for r in rounds),
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "overhead_us": 1e6 * sum(r["overhead"] for r in rounds) / self_calls,
        "overhead_p50_us": 1e6 * statistics.median([o for r in rounds for o in r["overheads"]] or [0.0]),
        "sockets_per_call": sum(r["sockets_to_self"] for r in rounds) / self_calls,
        "sockets_in_use": max(r["self_call_connections"] for r in rounds),
        "cpu_ms_per_rollout": 1000 * sum(r["cpu"] for r in rounds) / max(rollouts, 1),
        "failures": sum(r["failures"] for r in rounds),
    }


async def drive(url: str, levels: tuple[int, ...], rounds: int, seconds: float) -> dict[int, dict[str, dict]]:
    results: dict[int, dict[str, dict]] = {}
    for concurrency in levels:
        await run_round(url, "http", concurrency, min(1.0, seconds))  # warm up connections and caches
        await run_round(url, "inprocess", concurrency, min(1.0, seconds))
        per_mode: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
        for index in range(rounds):
            for mode in MODES if index % 2 == 0 else MODES[::-1]:
                per_mode[mode].append(await run_round(url, mode, concurrency, seconds))
        results[concurrency] = {mode: summarize(per_mode[mode]) for mode in MODES}
        print_level(concurrency, results[concurrency])
    return results


def print_level(concurrency: int, result: dict[str, dict[str, float]]) -> None:
    columns = ("rollouts/s", "p50 ms", "p99 ms", "overhead/call us", "p50 overhead us", "sockets/call")
    columns += ("sockets in use",)
    print(f"\nconcurrency {concurrency}")
    print(
        f"{'variant':<10}" + "".join(f"{column:>18}" for column in (*columns, "cpu ms/rollout", "failures"))
    )
    for mode in MODES:
        r = result[mode]
        values = (
            f"{r['rollouts_per_s']:.1f}",
            f"{r['p50_ms']:.2f}",
            f"{r['p99_ms']:.2f}",
            f"{r['overhead_us']:.1f}",
            f"{r['overhead_p50_us']:.1f}",
            f"{r['sockets_per_call']:.4f}",
            f"{r['sockets_in_use']:d}",
            f"{r['cpu_ms_per_rollout']:.3f}",
            f"{r['failures']:d}",
        )
        print(f"{mode:<10}" + "".join(f"{value:>18}" for value in values))
    http, helper = result["http"], result["inprocess"]
    print(
        f"helper/http: rollouts/s x{helper['rollouts_per_s'] / http['rollouts_per_s']:.2f}, "
        f"overhead per call x{helper['overhead_us'] / http['overhead_us']:.4f}, "
        f"cpu per rollout x{helper['cpu_ms_per_rollout'] / http['cpu_ms_per_rollout']:.2f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="short rounds; about a minute in total")
    parser.add_argument("--rounds", type=int, help="rounds per variant and concurrency (default 4, quick 2)")
    parser.add_argument("--seconds", type=float, help="seconds per round (default 8, quick 3.5)")
    parser.add_argument("--model-calls", type=int, default=1, help="model calls per rollout (default 1)")
    parser.add_argument("--serve", choices=("model", "agent"), help=argparse.SUPPRESS)
    parser.add_argument("--model-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve == "model":
        return serve_model()
    if args.serve == "agent":
        return serve_agent(args.model_url, args.model_calls)

    rounds = args.rounds or (2 if args.quick else 4)
    seconds = args.seconds or (3.5 if args.quick else 8.0)
    model, (model_port,) = start("--serve", "model")
    agent, (agent_port, http_impl) = start(
        "--serve",
        "agent",
        "--model-url",
        f"http://127.0.0.1:{model_port}",
        "--model-calls",
        str(args.model_calls),
    )
    try:
        print(
            f"python {sys.version.split()[0]}, uvicorn {http_impl}, {os.cpu_count()} CPUs, "
            f"{rounds} alternating rounds of {seconds:.1f}s per variant, "
            f"{args.model_calls} model call(s) per rollout"
        )
        results = asyncio.run(drive(f"http://127.0.0.1:{agent_port}", LEVELS, rounds, seconds))
    finally:
        for process in (agent, model):
            process.terminate()
            with suppress(subprocess.TimeoutExpired):
                process.wait(5)
    http, helper = results[64]["http"], results[64]["inprocess"]
    print(
        f"rollouts_per_s_ratio={helper['rollouts_per_s'] / http['rollouts_per_s']:.2f} "
        f"overhead_ratio={helper['overhead_us'] / http['overhead_us']:.4f} "
        f"self_call_sockets={helper['sockets_per_call']:g}"
    )


if __name__ == "__main__":
    main()

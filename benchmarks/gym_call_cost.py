"""What one self-call of NeMo Gym's real simple_agent costs its process, by the way it is made.

    python benchmarks/gym_call_cost.py --gym PATH --gym-python PY [--calls N] [--rounds R]

Serves the simple_agent of the NeMo Gym checkout at PATH under PY (NeMo Gym's Python; the app
built as in gym_e2e_serve.py, served by uvicorn in this process, pinned to one CPU), beside the
mock model of gym_e2e on the other CPUs, and posts the same request to its `/v1/responses` (one
user message: the handler makes one model call) four ways, in alternating rounds:

- `http`: `server_client.post(...)`, the HTTP self-call;
- `inprocess`: `responses_in_process(...)`, selfcall-audit's helper (this checkout's copy);
- `asgi`: the app called with a hand-made ASGI scope, what the helper is at its cheapest;
- `direct`: `agent.responses(request, response, body)`, the method alone, as a hand migration
  calls it: no middleware, session, validation or serialisation.

It prints the CPU time per call of this process for each (median and every round), so the gap
between `inprocess` and `direct` is what parity with the HTTP self-call costs, and the gap between
`http` and `inprocess` what the helper saves. The checkout is only read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
HELPER = HERE.parent / "selfcall_audit" / "inprocess.py"
BODY = {"input": [{"role": "user", "content": "hello there"}]}
WARM_UP = 30


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gym", type=Path, required=True, help="a NeMo Gym checkout (left unchanged)")
    parser.add_argument("--gym-python", required=True, help="NeMo Gym's Python (its venv's bin/python)")
    parser.add_argument("--calls", type=int, default=300, help="calls per way and round (300)")
    parser.add_argument("--rounds", type=int, default=14, help="rounds (14)")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not (args.gym / "responses_api_agents" / "simple_agent").is_dir():
        parser.error(f"{args.gym} is not a NeMo Gym checkout (no responses_api_agents/simple_agent/)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the servers on the way out
    if args.inside:
        asyncio.run(measure(args.calls, args.rounds))
        return 0
    with tempfile.TemporaryDirectory(prefix="gym_call_cost.") as scratch:
        (Path(scratch) / "inprocess.py").write_bytes(HELPER.read_bytes())
        env = os.environ | {
            "PYTHONPATH": os.pathsep.join([str(args.gym.resolve()), scratch, str(HERE)]),
            "PYTHONDONTWRITEBYTECODE": "1",  # the checkout is only read
        }
        command = [args.gym_python, str(Path(__file__).resolve()), "--inside", "--gym", str(args.gym)]
        command += ["--gym-python", args.gym_python]
        command += ["--calls", str(args.calls), "--rounds", str(args.rounds)]
        inside = subprocess.Popen(command, env=env, cwd=args.gym)
        try:
            return inside.wait()
        finally:
            if inside.poll() is None:
                inside.terminate()
                inside.wait()


async def measure(calls: int, rounds: int) -> None:
    """Runs under NeMo Gym's Python, with the checkout, the helper and gym_e2e on sys.path."""
    import gym_e2e
    import uvicorn
    from inprocess import responses_in_process

    setup = gym_e2e.AGENTS[0]
    cpus = sorted(os.sched_getaffinity(0))
    agent_cpu, model_cpus = cpus[0], cpus[1:] or cpus
    ports = {role: gym_e2e.free_port() for role in ("head", "model", "resources", "agent")}
    os.environ |= {"NEMO_GYM_CONFIG_DICT": json.dumps(gym_e2e.gym_config(setup, ports))}
    model = subprocess.Popen(
        [sys.executable, str(HERE / "gym_e2e_serve.py"), "model", str(ports["model"])],
        env=os.environ
        | {"GYM_E2E_CPUS": ",".join(map(str, model_cpus)), "NEMO_GYM_CONFIG_PATH": "policy_model"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def stop(*_: object) -> None:
        """Ends at once: asyncio.run would wait forever for the requests a signal cut short."""
        model.terminate()
        os._exit(128 + signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    os.sched_setaffinity(0, {agent_cpu})
    os.environ["NEMO_GYM_CONFIG_PATH"] = "bench_agent"
    import gym_e2e_serve

    agent, app = gym_e2e_serve.gym_server(setup.target)
    agent._webserver_app = app  # recorded by setup_webserver() in a checkout `fix` migrated
    config = uvicorn.Config(
        app, host=gym_e2e.HOST, port=ports["agent"], log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        await wait_for_model(f"http://{gym_e2e.HOST}:{ports['model']}/", model)
        while not server.started:
            await asyncio.sleep(0.05)
        ways = calls_of(agent, app, responses_in_process)
        for way in ways.values():
            for _ in range(WARM_UP):
                await way()
        cpu: dict[str, list[float]] = {name: [] for name in ways}
        for round_index in range(rounds):
            order = list(ways) if round_index % 2 == 0 else list(reversed(ways))
            for name in order:
                started = time.process_time()
                for _ in range(calls):
                    await ways[name]()
                cpu[name].append((time.process_time() - started) / calls * 1e3)
        where = f"agent on CPU {agent_cpu}, model on {','.join(map(str, model_cpus))}"
        print(f"CPU ms per self-call of simple_agent, {rounds} rounds of {calls} calls ({where}):")
        for name, values in cpu.items():
            print(
                f"{name:<10} median {statistics.median(values):.3f}  rounds {' '.join(f'{v:.3f}' for v in values)}"
            )
        print(" ".join(f"{name}_ms={statistics.median(values):.3f}" for name, values in cpu.items()))
    finally:
        server.should_exit = True
        await serving
        model.terminate()
        model.wait()


async def wait_for_model(url: str, model: subprocess.Popen) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        for _ in range(300):
            if model.poll() is not None:
                raise SystemExit("the mock model exited at start-up")
            try:
                async with session.get(url) as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                await asyncio.sleep(0.1)
    raise SystemExit("the mock model did not start in 30 s")


def calls_of(agent, app, responses_in_process) -> dict:
    """The four ways to make the self-call, each returning the response's JSON."""
    import orjson
    from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming
    from starlette.requests import Request
    from starlette.responses import Response

    async def http() -> object:
        response = await agent.server_client.post(
            server_name=agent.config.name, url_path="/v1/responses", json=BODY
        )
        response.raise_for_status()
        return await response.json()

    async def inprocess() -> object:
        response = await responses_in_process(agent, url_path="/v1/responses", json=BODY)
        response.raise_for_status()
        return await response.json()

    async def asgi() -> object:
        body = orjson.dumps(BODY)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/responses",
            "raw_path": b"/v1/responses",
            "root_path": "",
            "query_string": b"",
            "headers": headers,
            "client": None,
            "server": None,
            "state": {},
        }
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        chunks: list[bytes] = []

        async def receive() -> dict:
            if messages:
                return messages.pop()
            await asyncio.Event().wait()  # no disconnect: the call ends with the response
            raise AssertionError

        async def send(message: dict) -> None:
            if message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await app(scope, receive, send)
        return orjson.loads(b"".join(chunks))

    async def direct() -> object:
        request = Request(
            {"type": "http", "method": "POST", "path": "/v1/responses", "headers": [], "session": {}}
        )
        params = NeMoGymResponseCreateParamsNonStreaming.model_validate(BODY)
        return (await agent.responses(request, Response(), params)).model_dump(mode="json")

    return {"http": http, "inprocess": inprocess, "asgi": asgi, "direct": direct}


if __name__ == "__main__":
    sys.exit(main())

"""The in-process helper on the real NeMo Gym agents, side by side with the HTTP self-call.

    python benchmarks/gym_e2e.py --gym PATH --gym-python PY [--quick] [--rounds N] [--concurrency 1,64 [--rows 64,256]]

Copies the NeMo Gym checkout at PATH, migrates the copy with `selfcall-audit fix` (default
settings: the helper is vendored into the copy), copies the migrated tree once more with the
direct-handler-call anchor (gym_e2e_direct.py) in place of the helper, then for `simple_agent` and
`proof_refinement_agent` serves, each in its own process under PY (NeMo Gym's Python, no Ray, no
head server; see gym_e2e_serve.py), on 127.0.0.1:

- a mock Responses API model (deterministic; answers 500 to inputs that ask for it) on a bare
  aiohttp server, so that it costs little,
- the agent's resources server: NeMo Gym's stateful counter (sessions, tool calls) for
  simple_agent; a stand-in verifier asking for one correction for proof_refinement_agent,
- the original agent (baseline: the HTTP self-call), the migrated one (candidate: the helper) and
  the anchor (direct: the agent's `responses` method called directly, the floor).

Each agent process reports the files its code was imported from (the agent's module, `nemo_gym`,
and the module of the `responses_in_process` it calls); they are printed, and the benchmark stops
before measuring if any comes from another tree than the copy that process was given (an editable
install of another NeMo Gym checkout, or `nemo_gym`'s own `sys.path` handling, can put it first).

The load is the agent's as production has it: there the model runs elsewhere and every NeMo Gym
server has a core of its own, so the agent's single process is what saturates and what the
self-call costs. Here the agent under test runs alone on one CPU, capped at half of it (a cgroup
CPU quota, where one can be written: as root), and the model, the resources server and this client
share the others (on a 2-core machine: one each side; nothing is pinned on a single CPU). The cap
is there because those three together cost about as much CPU per rollout as the agent: uncapped,
both sides saturate together and the rate follows whichever of them the machine's other jobs slow
down. The agents are pinned and capped the same way and only one is driven at a time: each round
posts the same rows to `/run` of the baseline, the candidate and the anchor, in chunks of two
waves of the concurrency (at least 16 rows), each chunk to the three in turn, in an order reversed
from one chunk to the next (so baseline and candidate alternate), after an uncounted warm-up of
each, at concurrency 1, 64 and 256 (`--concurrency`), with model-call capture (observability) off
and on; one row in 32 makes the model answer 500 (4 rounds, `--rounds`; `--quick`: fewer rows,
2 rounds at concurrency 256, and capture on at concurrency 64 only). Jobs outside the
benchmark still share the machine: the load average is printed at the start and the end.

It measures rollouts/s, p50/p99 latency, the requests the servers received (loopback), the agent's
peak open sockets, its CPU time per rollout (less its socket sampler's; and the candidate/baseline
ratio of it), the share of the wall time the agent was on a CPU ("agent busy": near its cap, the
agent is what bounds the rate), the CPU time per rollout of everything else (model, resources, client), checks every row
(status 200 and reward 1, or the failure row's 500), and that both agents answered each row
identically. Ratios are candidate / baseline (throughput: higher is better; latency and CPU:
lower); the anchor's CPU per rollout is shown beside them, and the rounds in which the candidate
used less CPU per rollout than the baseline are counted. The last lines, one per agent and
concurrency (capture off; failures, sockets, loopback requests, identity and the per-round CPU
comparison over both capture modes):

    agent=<name> concurrency=<c> rollouts_per_s_ratio=R p50_ratio=X p99_ratio=Y failures=F self_call_sockets=S outputs_identical=0|1 cpu_per_rollout_ratio=C loopback_requests=L cpu_below_baseline_rounds=K/N direct_cpu_per_rollout_ratio=D direct_outputs_identical=0|1

`self_call_sockets` counts the candidate's requests to its own `/v1/responses`, `loopback_requests`
every request the candidate agent received besides the rollouts' own `POST /run`. The anchor's
outputs are compared on the rows answered 200: a failed rollout's 500 text is wrapped once less,
since the handler's exception reaches `run()` itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

HERE = Path(__file__).resolve().parent
SERVE = HERE / "gym_e2e_serve.py"
DIRECT = HERE / "gym_e2e_direct.py"
VARIANTS = ("baseline", "candidate", "direct")
HELPER_MODULE = Path("nemo_gym", "inprocess.py")  # where fix vendors the helper, by default
HELPER_IMPORT = b"from nemo_gym.inprocess import responses_in_process"
HOST = "127.0.0.1"
CONCURRENCIES = (1, 64, 256)
FAIL_EVERY = 32  # one row in 32 makes the mock model answer 500
WARM_UP = 32  # rows each agent answers, uncounted, before each concurrency's rounds
# A round posts its rows in chunks of this many waves of the concurrency (at least CHUNK_ROWS rows),
# each to the three variants in turn, the order reversed from one chunk to the next: the machine's
# other jobs, which come and go within seconds, then weigh on the three alike in every round.
CHUNK_WAVES = 2
CHUNK_ROWS = 16  # at concurrency 1, about 2 s of one agent: baseline and candidate stay that close
REQUEST_TIMEOUT = 120.0
START_TIMEOUT = 180.0
AGENT_CPU_SHARE = 0.5  # of one CPU, for the agent under test (see Placement)
CPU_CAP_PERIOD_US = 100_000
COUNTER_TOOLS = [
    {
        "type": "function",
        "name": "increment_counter",
        "description": "",
        "parameters": {
            "type": "object",
            "properties": {"count": {"type": "integer", "description": ""}},
            "required": ["count"],
            "additionalProperties": False,
        },
        "strict": True,
    },
    {
        "type": "function",
        "name": "get_counter_value",
        "description": "",
        "parameters": {"type": "object", "properties": {}, "required": [], "additionalProperties": False},
        "strict": True,
    },
]
# Values that differ between two runs of the same row whatever the transport.
_VOLATILE_KEYS = re.compile(r"(^|_)(at|ms|seconds|time|timestamp|duration|latency)$")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@dataclass(frozen=True)
class AgentSetup:
    name: str
    target: str  # module:Class of the agent
    resources: str  # module:Class of its resources server
    config: dict  # the agent's settings besides address and server references

    def row(self, index: int) -> dict:
        fail = "FAIL500 " if index % FAIL_EVERY == FAIL_EVERY - 1 else ""
        marks = {"_ng_task_index": index, "_ng_rollout_index": 0}
        if self.name == "simple_agent":
            a, b, start = index % 5 + 1, index % 3 + 2, index % 7
            text = f"{fail}add {a} then add {b} then get the count"
            params = {"input": [{"role": "user", "content": text}], "tools": COUNTER_TOOLS}
            return {
                "responses_create_params": params,
                "initial_count": start,
                "expected_count": start + a + b,
            } | marks
        return {
            "responses_create_params": {"input": [{"role": "user", "content": f"{fail}Prove lemma {index}."}]}
        } | marks


AGENTS = (
    AgentSetup(
        "simple_agent",
        "responses_api_agents.simple_agent.app:SimpleAgent",
        "resources_servers.example_session_state_mgmt.app:StatefulCounterResourcesServer",
        {},
    ),
    AgentSetup(
        "proof_refinement_agent",
        "responses_api_agents.proof_refinement_agent.app:ProofRefinementAgent",
        "bench:ProofChecker",
        {"max_correction_turns": 2, "include_all_attempts": True},
    ),
)


# --------------------------------------------------------------------------------------------
# Servers
# --------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def gym_config(setup: AgentSetup, ports: dict[str, int]) -> dict:
    """NeMo Gym's global config for one agent process: every server's address, no head server."""

    def address(port: int) -> dict:
        return {"entrypoint": "app.py", "host": HOST, "port": port}

    return {
        "head_server": {"host": HOST, "port": ports["head"]},
        "observability_enabled": False,
        "policy_model": {"responses_api_models": {"mock_model": address(ports["model"])}},
        "bench_resources": {
            "resources_servers": {"bench": address(ports["resources"]) | {"domain": "agent"}}
        },
        "bench_agent": {
            "responses_api_agents": {
                setup.name: address(ports["agent"])
                | {
                    "resources_server": {"type": "resources_servers", "name": "bench_resources"},
                    "model_server": {"type": "responses_api_models", "name": "policy_model"},
                }
                | setup.config
            }
        },
    }


@dataclass(frozen=True)
class Placement:
    """Which CPUs the agent under test gets, which the rest (model, resources, this client), and
    what share of its CPU the agent may use.

    In production the model runs elsewhere and each NeMo Gym server has a core of its own; the
    agent's single process is what saturates. Here the agents get one CPU to themselves (only one
    of them is driven at a time) and everything else shares the others; with a single CPU nothing
    is pinned. Where a cgroup CPU controller can be written, each agent is also capped at `share`
    of its CPU, so that it alone bounds the rate (the rest costs about as much CPU per rollout).
    """

    agent: frozenset[int]
    rest: frozenset[int]
    share: float | None

    @classmethod
    def of_this_machine(cls) -> Placement:
        cpus = sorted(os.sched_getaffinity(0))
        probe = CpuCap.create(f"gym_e2e.{os.getpid()}.probe", AGENT_CPU_SHARE)
        share = None if probe is None else AGENT_CPU_SHARE
        if probe is not None:
            probe.remove()
        if len(cpus) < 2:
            return cls(frozenset(cpus), frozenset(cpus), share)
        return cls(frozenset(cpus[:1]), frozenset(cpus[1:]), share)

    def env(self, role: str) -> dict[str, str]:
        return {"GYM_E2E_CPUS": ",".join(map(str, sorted(self.agent if role == "agent" else self.rest)))}

    def describe(self) -> str:
        cap = (
            "the agent not capped (no cgroup CPU controller can be written: not root?)"
            if self.share is None
            else f"the agent capped at {self.share:.0%} of a CPU"
        )
        if self.agent == self.rest:
            return f"one CPU ({min(self.agent)}): nothing pinned; {cap}"
        return (
            f"agent on CPU {','.join(map(str, sorted(self.agent)))}; model, resources and client on "
            f"{','.join(map(str, sorted(self.rest)))}; {cap}"
        )


@dataclass(frozen=True)
class CpuCap:
    """A cgroup of its own for one process, with a CPU quota: v1's `cpu.cfs_quota_us` or v2's `cpu.max`."""

    folder: Path

    @classmethod
    def create(cls, name: str, share: float, root: Path = Path("/sys/fs/cgroup")) -> CpuCap | None:
        """The cgroup, or None where no CPU controller can be written (not root, a container)."""
        quota = int(share * CPU_CAP_PERIOD_US)
        v1, v2 = root / "cpu", root
        try:
            if (v1 / "cpu.cfs_quota_us").is_file():
                folder = v1 / name
                folder.mkdir()
                (folder / "cpu.cfs_period_us").write_text(str(CPU_CAP_PERIOD_US))
                (folder / "cpu.cfs_quota_us").write_text(str(quota))
            elif "cpu" in (v2 / "cgroup.controllers").read_text().split():
                (v2 / "cgroup.subtree_control").write_text("+cpu")
                folder = v2 / name
                folder.mkdir()
                (folder / "cpu.max").write_text(f"{quota} {CPU_CAP_PERIOD_US}")
            else:
                return None
        except OSError:
            return None
        return cls(folder)

    def add(self, pid: int) -> None:
        (self.folder / "cgroup.procs").write_text(str(pid))

    def remove(self) -> None:
        """Once its processes have ended."""
        with contextlib.suppress(OSError):
            self.folder.rmdir()


@dataclass
class Servers:
    """The processes of one agent's run; stopped (by their own ids) whatever happens."""

    python: str
    logs: Path
    placement: Placement
    processes: list[subprocess.Popen] = field(default_factory=list)
    caps: list[CpuCap] = field(default_factory=list)

    def start(self, tree: Path, role: str, port: int, target: str, config: dict, instance: str) -> str:
        env = (
            os.environ
            | {
                "PYTHONPATH": str(tree),
                "NEMO_GYM_CONFIG_DICT": json.dumps(config),
                "NEMO_GYM_CONFIG_PATH": instance,
            }
            | self.placement.env(role)
        )
        log = open(self.logs / f"{role}-{port}.log", "wb")  # noqa: SIM115 - closed with the process
        process = subprocess.Popen(
            [self.python, str(SERVE), role, str(port), target], cwd=tree, env=env, stdout=log, stderr=log
        )
        self.processes.append(process)
        log.close()
        if role == "agent" and self.placement.share is not None:
            cap = CpuCap.create(f"gym_e2e.{os.getpid()}.{port}", self.placement.share)
            if cap is None:
                raise SystemExit("could not cap the agent's CPU, though the probe at start-up could")
            self.caps.append(cap)
            cap.add(process.pid)
        return f"http://{HOST}:{port}"

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for cap in self.caps:
            cap.remove()


async def wait_until_up(session: aiohttp.ClientSession, urls: list[str], servers: Servers) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    for url in urls:
        while True:
            if any(p.poll() is not None for p in servers.processes):
                raise SystemExit(f"a server exited at start-up; see the logs in {servers.logs}")
            try:
                async with session.get(f"{url}/_bench/stats") as response:
                    if response.status == 200:
                        break
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"{url} did not start in {START_TIMEOUT:.0f}s; see {servers.logs}")
            await asyncio.sleep(0.2)


# --------------------------------------------------------------------------------------------
# Load
# --------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One variant's pass over the rows at one concurrency."""

    seconds: float
    latencies: list[float]
    outputs: list[tuple[int, object]]
    failures: int
    stats: dict[str, dict]  # per server: requests, self_calls, peak_sockets, cpu


def merged(runs: list[Run]) -> Run:
    """One round's chunks of a variant as one pass: times, rollouts, requests and CPU added up."""
    stats = {
        role: {
            key: (max if key == "peak_sockets" else sum)(r.stats[role][key] for r in runs)
            for key in runs[0].stats[role]
        }
        for role in runs[0].stats
    }
    return Run(
        sum(r.seconds for r in runs),
        [x for r in runs for x in r.latencies],
        [x for r in runs for x in r.outputs],
        sum(r.failures for r in runs),
        stats,
    )


def normalised(value: object) -> object:
    """The output without what differs between two runs of the same row (times, random ids)."""
    if isinstance(value, dict):
        return {k: normalised(v) for k, v in value.items() if not _VOLATILE_KEYS.search(k)}
    if isinstance(value, (list, tuple)):
        return [normalised(v) for v in value]
    if isinstance(value, str):
        return _UUID.sub("<uuid>", value)
    return value


def correct(row: dict, status: int, body: object) -> bool:
    content = json.dumps(row["responses_create_params"]["input"])
    if "FAIL500" in content:
        return status == 500
    return status == 200 and isinstance(body, dict) and body.get("reward") == 1.0


async def one_pass(
    session: aiohttp.ClientSession, urls: dict[str, str], rows: list[dict], concurrency: int
) -> Run:
    for url in urls.values():
        async with session.post(f"{url}/_bench/reset") as response:
            await response.read()
    gate = asyncio.Semaphore(concurrency)
    latencies = [0.0] * len(rows)
    outputs: list[tuple[int, object]] = [(0, None)] * len(rows)

    async def rollout(index: int, row: dict) -> None:
        async with gate:
            started = time.perf_counter()
            try:
                async with session.post(f"{urls['agent']}/run", json=row) as response:
                    data = await response.read()
                    status = response.status
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                status, data = -1, repr(exc).encode()
            latencies[index] = time.perf_counter() - started
            try:
                body = json.loads(data)
            except ValueError:
                body = data.decode("utf-8", "replace")
            outputs[index] = (status, body)

    started, client_cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(rollout(i, row) for i, row in enumerate(rows)))
    seconds = time.perf_counter() - started
    stats = {"client": {"requests": 0, "cpu": time.process_time() - client_cpu}}
    for role, url in urls.items():
        async with session.get(f"{url}/_bench/stats") as response:
            stats[role] = await response.json()
    wrong = [(row, out) for row, out in zip(rows, outputs) if not correct(row, *out)]
    if wrong:
        print(f"  {len(wrong)} wrong answers; the first: {str(wrong[0][1])[:600]}", file=sys.stderr)
    return Run(seconds, latencies, outputs, len(wrong), stats)


@dataclass
class Tally:
    """Both variants' passes at one concurrency and capture mode, over the rounds."""

    runs: dict[str, list[Run]] = field(default_factory=lambda: {v: [] for v in VARIANTS})
    identical: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(VARIANTS[1:], True))

    def rate(self, variant: str) -> float:
        runs = self.runs[variant]
        return sum(len(r.latencies) for r in runs) / sum(r.seconds for r in runs)

    def percentile(self, variant: str, q: float) -> float:
        values = sorted(x for r in self.runs[variant] for x in r.latencies)
        return values[min(len(values) - 1, int(q * len(values)))]

    def per_rollout(self, variant: str, role: str, key: str) -> float:
        runs = self.runs[variant]
        return sum(r.stats[role][key] for r in runs) / sum(len(r.latencies) for r in runs)

    def busy(self, variant: str, role: str) -> float:
        """The share of the wall time the process was on a CPU."""
        runs = self.runs[variant]
        return sum(r.stats[role]["cpu"] for r in runs) / sum(r.seconds for r in runs)

    def loopback(self, variant: str) -> float:
        """Requests the servers received per rollout, besides the rollout's own POST /run."""
        runs = self.runs[variant]
        total = sum(s["requests"] for r in runs for s in r.stats.values())
        rollouts = sum(len(r.latencies) for r in runs)
        return (total - rollouts) / rollouts

    def failures(self) -> int:
        return sum(r.failures for runs in self.runs.values() for r in runs)

    def loopback_requests(self, variant: str) -> int:
        """Requests the agent received besides the rollouts' own POST /run."""
        runs = self.runs[variant]
        return sum(r.stats["agent"]["requests"] - len(r.latencies) for r in runs)

    def cpu_below_baseline(self) -> tuple[int, int]:
        """In how many rounds the candidate used less agent CPU per rollout than the baseline."""
        pairs = list(zip(self.runs["baseline"], self.runs["candidate"]))
        below = sum(
            c.stats["agent"]["cpu"] / len(c.latencies) < b.stats["agent"]["cpu"] / len(b.latencies)
            for b, c in pairs
        )
        return below, len(pairs)

    def self_calls(self, variant: str) -> int:
        return sum(r.stats["agent"]["self_calls"] for r in self.runs[variant])

    def peak_sockets(self, variant: str) -> int:
        return max(r.stats["agent"]["peak_sockets"] for r in self.runs[variant])


def same_outputs(agent: str, done: dict[str, Run], variant: str) -> bool:
    """Whether the variant answered every row as the baseline did; the first difference is printed.

    The anchor is compared on the rows the baseline answered 200 only: where the model fails, the
    handler's exception reaches `run()` itself instead of a 500 answer to read, so the failed
    rollout's 500 text is wrapped once less (the status is checked with every other row's).
    """
    pairs = zip(done["baseline"].outputs, done[variant].outputs)
    same = [normalised(a) == normalised(b) or (variant == "direct" and a[0] != 200) for a, b in pairs]
    if not all(same):
        first = same.index(False)
        print(
            f"  {agent}: {variant} answers row {first} differently ({same.count(False)} rows):\n"
            f"    baseline  {str(done['baseline'].outputs[first])[:600]}\n"
            f"    {variant:<9} {str(done[variant].outputs[first])[:600]}",
            file=sys.stderr,
        )
    return all(same)


def check_modules(setup: AgentSetup, variant: str, tree: Path, files: dict[str, str | None]) -> None:
    """Print the files the agent process imported; stop unless they are the tree's own."""
    module = setup.target.partition(":")[0]
    expected = {
        "agent": tree / Path(*module.split(".")).with_suffix(".py"),
        "nemo_gym": tree / "nemo_gym" / "__init__.py",
        "helper": None if variant == "baseline" else tree / HELPER_MODULE,
    }
    for key, path in expected.items():
        found = files.get(key)
        print(f"  {setup.name} {variant}: {key} imported from {found}", flush=True)
        if (None if found is None else Path(found).resolve()) != (None if path is None else path.resolve()):
            raise SystemExit(
                f"{setup.name} ({variant}): {key} was imported from {found}, not from {path}: the process "
                "ran code from another tree than the one under test (an editable install of another "
                "NeMo Gym checkout on its path?); nothing was measured"
            )


async def bench_agent(
    setup: AgentSetup,
    trees: dict[str, Path],
    python: str,
    logs: Path,
    sizes: dict[int, int],
    rounds: dict[int, int],
    captured: tuple[int, ...],
    placement: Placement,
) -> dict[tuple[bool, int], Tally]:
    ports = {role: free_port() for role in ("head", "model", "resources", *VARIANTS)}
    servers = Servers(python, logs, placement)
    try:
        shared = gym_config(setup, ports | {"agent": ports["baseline"]})
        original = trees["baseline"]
        model = servers.start(original, "model", ports["model"], "", shared, "policy_model")
        resources = servers.start(
            original, "resources", ports["resources"], setup.resources, shared, "bench_resources"
        )
        agents = {
            variant: servers.start(
                tree,
                "agent",
                ports[variant],
                setup.target,
                gym_config(setup, ports | {"agent": ports[variant]}),
                "bench_agent",
            )
            for variant, tree in trees.items()
        }
        connector = aiohttp.TCPConnector(limit=max(sizes) + 8)
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            await wait_until_up(session, [model, resources, *agents.values()], servers)
            for variant, url in agents.items():
                async with session.get(f"{url}/_bench/modules") as response:
                    check_modules(setup, variant, trees[variant], await response.json())
            tallies: dict[tuple[bool, int], Tally] = {}
            for capture in (False, True):
                for url in agents.values():
                    async with session.post(
                        f"{url}/_bench/observability/{'on' if capture else 'off'}"
                    ) as response:
                        await response.read()
                for concurrency, count in sizes.items():
                    if capture and concurrency not in captured:
                        continue
                    rows = [setup.row(i) for i in range(count)]
                    tally = tallies[(capture, concurrency)] = Tally()
                    for variant in VARIANTS:  # warm-up, not counted
                        urls = {"agent": agents[variant], "model": model, "resources": resources}
                        await one_pass(session, urls, rows[:WARM_UP], concurrency)
                    size = max(CHUNK_ROWS, CHUNK_WAVES * concurrency)
                    for round_index in range(rounds[concurrency]):
                        parts: dict[str, list[Run]] = {variant: [] for variant in VARIANTS}
                        for start in range(0, len(rows), size):
                            turn = round_index + start // size
                            done = {}
                            for variant in VARIANTS if turn % 2 == 0 else VARIANTS[::-1]:
                                urls = {"agent": agents[variant], "model": model, "resources": resources}
                                done[variant] = await one_pass(
                                    session, urls, rows[start : start + size], concurrency
                                )
                                parts[variant].append(done[variant])
                            for variant in ("candidate", "direct"):
                                tally.identical[variant] &= same_outputs(setup.name, done, variant)
                        for variant in VARIANTS:
                            tally.runs[variant].append(merged(parts[variant]))
                    print(row_line(setup.name, capture, concurrency, tally), flush=True)
                    print(rounds_line(tally), flush=True)
            return tallies
    finally:
        servers.stop()


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


HEADER = (
    f"{'agent':<24}{'capture':>8}{'conc':>6}{'rollouts/s b→c':>18}{'ratio':>7}{'p50 ms b→c':>16}"
    f"{'p99 ms b→c':>18}{'loopback/rollout':>18}{'sockets':>10}{'cpu ms/rollout':>17}{'ratio':>7}"
    f"{'agent busy':>12}{'rest ms/rollout':>17}{'fail':>6}{'same':>6}"
    f"{'direct rollouts/s':>19}{'direct cpu ms':>15}{'same':>6}"
)


def row_line(agent: str, capture: bool, concurrency: int, t: Tally) -> str:
    b, c = "baseline", "candidate"
    cpu_b, cpu_c = (t.per_rollout(v, "agent", "cpu") * 1e3 for v in (b, c))
    busy_b, busy_c = t.busy(b, "agent"), t.busy(c, "agent")
    rest_b, rest_c = (
        sum(t.per_rollout(v, role, "cpu") for role in ("model", "resources", "client")) * 1e3 for v in (b, c)
    )
    return (
        f"{agent:<24}{'on' if capture else 'off':>8}{concurrency:>6}"
        f"{f'{t.rate(b):.1f}→{t.rate(c):.1f}':>18}{t.rate(c) / t.rate(b):>7.3f}"
        f"{f'{t.percentile(b, 0.5) * 1e3:.1f}→{t.percentile(c, 0.5) * 1e3:.1f}':>16}"
        f"{f'{t.percentile(b, 0.99) * 1e3:.1f}→{t.percentile(c, 0.99) * 1e3:.1f}':>18}"
        f"{f'{t.loopback(b):.1f}→{t.loopback(c):.1f}':>18}"
        f"{f'{t.peak_sockets(b)}→{t.peak_sockets(c)}':>10}"
        f"{f'{cpu_b:.2f}→{cpu_c:.2f}':>17}{cpu_c / cpu_b:>7.3f}"
        f"{f'{busy_b:.0%}→{busy_c:.0%}':>12}"
        f"{f'{rest_b:.2f}→{rest_c:.2f}':>17}"
        f"{t.failures():>6}{int(t.identical['candidate']):>6}"
        f"{t.rate('direct'):>19.1f}{t.per_rollout('direct', 'agent', 'cpu') * 1e3:>15.2f}"
        f"{int(t.identical['direct']):>6}"
    )


def rounds_line(t: Tally) -> str:
    """The agent's CPU time per rollout in each round, baseline / candidate / anchor."""
    rounds = zip(*(t.runs[v] for v in VARIANTS))
    cells = [
        "/".join(f"{r.stats['agent']['cpu'] / len(r.latencies) * 1e3:.2f}" for r in runs) for runs in rounds
    ]
    return f"  cpu ms/rollout per round (baseline/candidate/direct): {'  '.join(cells)}"


def summary_line(agent: str, concurrency: int, tallies: dict[tuple[bool, int], Tally]) -> str:
    off = tallies[(False, concurrency)]
    both = [tallies[key] for key in ((False, concurrency), (True, concurrency)) if key in tallies]

    def cpu(variant: str) -> float:
        return off.per_rollout(variant, "agent", "cpu")

    return (
        f"agent={agent} concurrency={concurrency} "
        f"rollouts_per_s_ratio={off.rate('candidate') / off.rate('baseline'):.3f} "
        f"p50_ratio={off.percentile('candidate', 0.5) / off.percentile('baseline', 0.5):.3f} "
        f"p99_ratio={off.percentile('candidate', 0.99) / off.percentile('baseline', 0.99):.3f} "
        f"failures={sum(t.failures() for t in both)} "
        f"self_call_sockets={sum(t.self_calls('candidate') for t in both)} "
        f"outputs_identical={int(all(t.identical['candidate'] for t in both))} "
        f"cpu_per_rollout_ratio={cpu('candidate') / cpu('baseline'):.3f} "
        f"loopback_requests={sum(t.loopback_requests('candidate') for t in both)} "
        f"cpu_below_baseline_rounds={sum(t.cpu_below_baseline()[0] for t in both)}/"
        f"{sum(t.cpu_below_baseline()[1] for t in both)} "
        f"direct_cpu_per_rollout_ratio={cpu('direct') / cpu('baseline'):.3f} "
        f"direct_outputs_identical={int(all(t.identical['direct'] for t in both))}"
    )


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def copies(gym: Path, work: Path) -> dict[str, Path]:
    """Three copies of the checkout: as it is (baseline); migrated by `selfcall-audit fix` with
    default settings (candidate); and the migrated one with the direct-call anchor in place of the
    vendored helper (direct). The checkout itself is never written to."""
    trees = {v: work / f"gym-{v}" for v in VARIANTS}
    for variant in ("baseline", "candidate"):
        shutil.copytree(
            gym, trees[variant], symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__", ".venv")
        )
    migrated = trees["candidate"]
    done = subprocess.run(
        [sys.executable, "-m", "selfcall_audit", "fix", "--no-cache", "-q", str(migrated)],
        capture_output=True,
        text=True,
    )
    if done.returncode == 2:
        raise SystemExit(f"selfcall-audit fix failed:\n{done.stderr}")
    for setup in AGENTS:
        app = migrated / "responses_api_agents" / setup.name / "app.py"
        if HELPER_IMPORT not in app.read_bytes():
            raise SystemExit(f"fix did not migrate {app.relative_to(migrated)} to {HELPER_MODULE}")
    shutil.copytree(migrated, trees["direct"], symlinks=True)
    shutil.copyfile(DIRECT, trees["direct"] / HELPER_MODULE)
    return trees


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gym", type=Path, required=True, help="a NeMo Gym checkout (left unchanged)")
    parser.add_argument("--gym-python", required=True, help="NeMo Gym's Python (its venv's bin/python)")
    parser.add_argument("--quick", action="store_true", help="fewer rollouts (about 5 minutes)")
    parser.add_argument("--agents", default=",".join(a.name for a in AGENTS), help="comma-separated subset")
    parser.add_argument("--rounds", type=int, help="rounds per concurrency (default 4)")
    parser.add_argument(
        "--concurrency",
        default=",".join(map(str, CONCURRENCIES)),
        help=f"comma-separated subset of {','.join(map(str, CONCURRENCIES))}",
    )
    parser.add_argument("--rows", help="rows per pass at each of those concurrencies, comma-separated")
    args = parser.parse_args(argv)
    if not (args.gym / "responses_api_agents").is_dir():
        parser.error(f"{args.gym} is not a NeMo Gym checkout (no responses_api_agents/)")
    unknown = set(args.agents.split(",")) - {a.name for a in AGENTS}
    if unknown:
        parser.error(f"unknown agents: {', '.join(sorted(unknown))}")
    if not set(args.concurrency.split(",")) <= {str(c) for c in CONCURRENCIES}:
        parser.error(f"--concurrency takes {','.join(map(str, CONCURRENCIES))} or a subset")
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds takes a positive number")
    if args.rows is not None and (
        len(args.rows.split(",")) != len(args.concurrency.split(","))
        or not all(n.isdigit() and int(n) >= WARM_UP for n in args.rows.split(","))
    ):
        parser.error(f"--rows takes one number of at least {WARM_UP} per concurrency given")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the servers on the way out
    sizes = dict(zip(CONCURRENCIES, (8, 128, 256) if args.quick else (64, 1024, 2048)))
    sizes = {c: n for c, n in sizes.items() if str(c) in args.concurrency.split(",")}
    if args.rows is not None:
        sizes = {int(c): int(n) for c, n in zip(args.concurrency.split(","), args.rows.split(","))}
    rounds = dict.fromkeys(CONCURRENCIES, 4) | ({256: 2} if args.quick else {})
    if args.rounds is not None:
        rounds = dict.fromkeys(CONCURRENCIES, args.rounds)
    captured = (64,) if args.quick else CONCURRENCIES  # the concurrencies also run with capture on
    placement = Placement.of_this_machine()
    with tempfile.TemporaryDirectory(prefix="gym_e2e.") as scratch:
        work = Path(scratch)
        trees = copies(args.gym.resolve(), work)
        logs = work / "logs"
        logs.mkdir()
        os.sched_setaffinity(0, placement.rest)  # this client runs beside the model, not the agent
        print(f"{placement.describe()}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        print(HEADER, flush=True)
        results = {}
        for setup in AGENTS:
            if setup.name in args.agents.split(","):
                results[setup.name] = asyncio.run(
                    bench_agent(setup, trees, args.gym_python, logs, sizes, rounds, captured, placement)
                )
        print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        print()
        for name, tallies in results.items():
            for concurrency in sizes:
                print(summary_line(name, concurrency, tallies))
    return 0


if __name__ == "__main__":
    sys.exit(main())

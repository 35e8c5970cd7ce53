"""What `fix` costs on one large agent file, against a cold scan of the same project.

    python benchmarks/fix_cost.py [--lines 30000] [--calls 800] [--prompt-kb 35] [--repeat 1]

Each case is a generated project (a `nemo_gym` package, so the helper goes to
`nemo_gym/inprocess.py`, and one agent module `app.py`):

    long file      `--lines` lines of ordinary code (functions and methods with loops, branches,
                   handlers, comprehensions), 4 self-calls spread over it
    many calls     `--calls` self-calling methods in one class (about 9 lines each)
    long prompt    one self-call whose line carries a `--prompt-kb` KB string
    scaling        the long file at a quarter, half and all of `--lines`: fix's CPU per 1,000
                   lines should stay about the same

For each, `selfcall-audit scan --no-cache --format json` and `selfcall-audit fix --no-cache --diff`
run as subprocesses from the project's root, and the CPU time (user + system) of each is printed
side by side with their ratio, the lowest of `--repeat` rounds. The diff is checked: every
self-call of the case rewritten (a `+` line per call). Nothing is asserted about times.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HEADER = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from nemo_gym.openai_utils import NeMoGymResponse


"""
FUNCTION = """\
def helper_{i}(items, limit={i}):
    total = 0
    for item in items:
        if item > limit:
            total += item
        else:
            total -= 1
    try:
        values = [x * 2 for x in items if x]
    except ValueError as exc:
        raise RuntimeError(str(exc)) from exc
    with open("data_{i}.txt") as handle:
        text = handle.read()
    return total, values, text


"""
CLASS = """\
class LargeAgent(SimpleResponsesAPIAgent):
    model_name: str = "policy"

"""
METHOD = """\
    def tally_{i}(self, rows):
        seen = {{}}
        for row in rows:
            key = row.get("id", {i})
            while key in seen:
                key = key + 1
            seen[key] = [cell for cell in row.values() if cell is not None]
        return len(seen)

"""
SELF_CALL = """\
    async def respond_{i}(self, body):
        payload = body.model_dump()
        response = await self.server_client.post(
            server_name=self.config.name,
            url_path="/v1/responses",
            json=payload,
        )
        return NeMoGymResponse.model_validate(await response.json())

"""
PROMPT_CALL = """\
    async def respond_long(self, body):
        response = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json={{"input": "{prompt}", "model": body.model}})
        return await response.json()

"""


def long_file(lines: int, calls: int = 4) -> str:
    """About `lines` lines: module functions, then the agent class whose methods hold `calls`
    self-calls spread among ordinary ones."""
    functions = [FUNCTION.format(i=i) for i in range(lines // 2 // FUNCTION.count("\n"))]
    methods = [METHOD.format(i=i) for i in range(lines // 2 // METHOD.count("\n"))]
    step = max(1, len(methods) // (calls + 1))
    for n in range(calls):
        methods.insert((n + 1) * step + n, SELF_CALL.format(i=n))
    return HEADER + "".join(functions) + CLASS + "".join(methods)


def many_calls(calls: int) -> str:
    return HEADER + CLASS + "".join(SELF_CALL.format(i=i) for i in range(calls))


def long_prompt(kilobytes: int) -> str:
    words = ("Answer the question step by step and cite the passage you rely on. " * 2000)[: kilobytes * 1024]
    return HEADER + CLASS + METHOD.format(i=0) + PROMPT_CALL.format(prompt=words) + METHOD.format(i=1)


def project(root: Path, source: str) -> None:
    """A project (its `pyproject.toml`) with a `nemo_gym` package and the agent module `app.py`."""
    package = root / "nemo_gym"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "base_responses_api_agent.py").write_text("class SimpleResponsesAPIAgent:\n    pass\n")
    (package / "openai_utils.py").write_text("class NeMoGymResponse:\n    pass\n")
    (root / "pyproject.toml").write_text('[project]\nname = "large-agent"\n')
    (root / "app.py").write_text(source)


@dataclass(frozen=True)
class Run:
    cpu: float
    stdout: str
    code: int


def cpu_run(command: list[str], cwd: Path) -> Run:
    """The command's CPU time, user and system, with every child it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr[-2000:]}")
    return Run(cpu, done.stdout, done.returncode)


def rewritten_calls(diff: str) -> int:
    """The self-calls the diff of `app.py` takes out."""
    app = diff.split("diff --git", 1)[0]  # the vendored helper's new file comes after
    return sum(1 for line in app.splitlines() if line.startswith("-") and "self.server_client.post(" in line)


def measure(name: str, source: str, calls: int, workdir: Path, sca: str, repeat: int) -> list[str]:
    root = workdir / name.replace(" ", "-")
    project(root, source)
    scan = [sca, "scan", "--no-cache", "--format", "json"]
    fix = [sca, "fix", "--no-cache", "--diff"]
    scans, fixes = [], []
    for _ in range(repeat):
        scans.append(cpu_run(scan, root).cpu)
        result = cpu_run(fix, root)
        fixes.append(result.cpu)
        found = rewritten_calls(result.stdout)
        if found != calls:
            raise RuntimeError(f"{name}: fix rewrote {found} calls, not {calls}")
    shutil.rmtree(root)
    lines = source.count("\n")
    best_scan, best_fix = min(scans), min(fixes)
    return [
        name,
        f"{lines}",
        f"{len(source.encode()) / 1024:.0f}",
        f"{calls}",
        f"{best_scan:.2f}",
        f"{best_fix:.2f}",
        f"{best_fix / best_scan:.1f}x",
        f"{best_fix / lines * 1000 * 1000:.1f}",
    ]


def print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print(
            "  ".join(
                cell.ljust(width) if i == 0 else cell.rjust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            )
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=30_000, help="lines of the long file (default 30000)")
    parser.add_argument(
        "--calls", type=int, default=800, help="self-calls of the many-calls file (default 800)"
    )
    parser.add_argument("--prompt-kb", type=int, default=35, help="KB of the long prompt (default 35)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds per command; the lowest is kept")
    parser.add_argument("--no-scaling", action="store_true", help="leave out the scaling rows")
    args = parser.parse_args(argv)
    sca = shutil.which("selfcall-audit", path=os.path.dirname(sys.executable)) or shutil.which(
        "selfcall-audit"
    )
    if sca is None:
        print("selfcall-audit is not installed: pip install -e .", file=sys.stderr)
        return 2
    cases: list[tuple[str, Callable[[], str], int]] = [
        (f"long file {args.lines}", lambda: long_file(args.lines), 4),
        (f"many calls {args.calls}", lambda: many_calls(args.calls), args.calls),
        (f"long prompt {args.prompt_kb} KB", lambda: long_prompt(args.prompt_kb), 1),
    ]
    if not args.no_scaling:
        cases += [(f"scaling {n}", lambda n=n: long_file(n), 4) for n in (args.lines // 4, args.lines // 2)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="fix-bench-") as temp:
        for name, make, calls in cases:
            rows.append(measure(name, make(), calls, Path(temp), sca, args.repeat))
            print(f"measured {name}", file=sys.stderr)
    print(f"CPU seconds (user + system), lowest of {args.repeat} round(s)")
    print_table(rows, ["case", "lines", "KB", "calls", "scan s", "fix s", "fix/scan", "fix ms/1000 lines"])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Fuzzing `scan` and `fix`: generated and mutated programs never break either command.

Four sources of input: whole programs from the Python grammar (hypothesmith), generated functions
as methods of an agent, agent methods built from the statements self-calls are made of (stored as
UTF-8, with a BOM, with CRLF or as declared Latin-1), and the fixture repos with lines deleted,
duplicated, truncated, swapped or sprinkled with random bytes.

For each, `scan` exits 0 or 1 with nothing on stderr, a file that is valid Python gets no SCA900
entry (only nesting too deep to analyse may excuse one), a good agent next door is always found,
and a warm run from the cache says what the cold run said. `fix` exits 0 or 1, every file it
writes parses, and a second `fix` changes nothing; on the self-call statements it also rewrites
exactly the SCA001 calls that a scan afterwards no longer finds, and keeps the file's encoding.

Bounded for CI: few examples, derandomized (the same examples on every run), no example database.
"""

from __future__ import annotations

import ast
import json
import random
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import hypothesmith
import libcst
import pytest
from cli_support import Ran, run_main
from fixture_annotations import fixture_projects
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
FIXTURE_DIRS = fixture_projects(shapes=False)

APP = "responses_api_agents/x/app.py"
GOOD = "responses_api_agents/good_agent/app.py"
GOOD_SOURCE = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class GoodAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        return await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
"""
AGENT_HEADER = """\
import functools

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent

ROUTE = "/v1/responses"

class FuzzAgent(SimpleResponsesAPIAgent):
    ROUTE = "/v1/" + "responses"

    async def helper(self, name, url, **kwargs):
        return await self.server_client.post(server_name=name, url_path=url, **kwargs)

"""
RUN_METHOD = """\
    async def run(self, body, cookies=None):
        response = await self.server_client.post(
            server_name=self.config.name, url_path="/v1/responses", json=body, cookies=cookies
        )
        return await response.json()
"""
APPENDED_AGENT = "\n\n" + AGENT_HEADER + RUN_METHOD
# An instance whose `peer` is itself: `self.config.peer.name` is its own name there.
CONFIG = """\
fuzz_agent:
  responses_api_agents:
    x:
      entrypoint: app.py
      peer: {type: responses_api_agents, name: fuzz_agent}
      model_server: {type: responses_api_models, name: policy_model}
"""
# Nesting deeper than the analysis follows is the one SCA900 a valid file may get.
EXCUSED = re.compile(r"too deeply nested")

FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def run(*args: object) -> Ran:
    """The CLI in-process; SELFCALL_AUDIT_DEBUG makes an internal error print its traceback."""
    return run_main([str(a) for a in args], env={"SELFCALL_AUDIT_DEBUG": "1"})


@contextmanager
def project(files: dict[str, str | bytes]) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="selfcall-fuzz-") as folder:
        root = Path(folder)
        (root / "pyproject.toml").write_text('[project]\nname = "fuzz"\n')
        for rel, content in {GOOD: GOOD_SOURCE, **files}.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(
                content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
            )
        yield root


def is_python(data: bytes) -> bool:
    try:
        ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def scan_never_breaks(root: Path, valid: set[str] = frozenset()) -> dict:
    """Cold and warm scans agree, exit 0 or 1, stay quiet on stderr; valid files get no SCA900."""
    cold = run("scan", root, "--format", "json")
    assert cold.exit_code in (0, 1), cold.stderr
    assert cold.stderr == "", cold.stderr
    warm = run("scan", root, "--format", "json")
    report, warm_report = json.loads(cold.stdout), json.loads(warm.stdout)
    assert (warm.exit_code, warm_report["findings"], warm_report["errors"]) == (
        cold.exit_code,
        report["findings"],
        report["errors"],
    )
    for error in report["errors"]:
        assert error["code"] == "SCA900" and error["message"], error
        assert error["path"] not in valid or EXCUSED.search(error["message"]), error
    failing = report["findings"] or any(error["severity"] == "error" for error in report["errors"])
    assert cold.exit_code == (1 if failing else 0)  # a Python file that does not parse fails the gate
    return report


def python_files(root: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(root.rglob("*.py"))}


# Where a fixture has no place for a vendored copy, `fix` refuses by design (tests/test_vendor.py).
INSTALLED_HELPER = ("--helper", "selfcall_audit.inprocess:responses_in_process")


def fix_never_breaks(root: Path) -> Ran:
    """`fix` exits 0 or 1; what it writes parses; a second run changes nothing."""
    before = python_files(root)
    first = run("fix", root, "--no-cache", *INSTALLED_HELPER)
    assert first.exit_code in (0, 1), first.output + first.stderr
    assert "Traceback" not in first.stderr and "internal error" not in first.stderr, first.stderr
    after = python_files(root)
    for path, data in after.items():
        if data != before.get(path):
            assert is_python(data), (
                f"fix wrote a file that does not parse: {path}\n{data.decode(errors='replace')}"
            )
    second = run("fix", root, "--no-cache", *INSTALLED_HELPER)
    assert second.exit_code in (0, 1), second.output + second.stderr
    assert python_files(root) == after, "a second fix changed the files again"
    assert "Nothing to rewrite" in second.stdout
    return first


def good_agent_found(report: dict) -> bool:
    return any(f["code"] == "SCA001" and f["path"] == GOOD and f["line"] == 6 for f in report["findings"])


# whole programs from the grammar ----------------------------------------------------------------

# Built on first use: building the grammar's parser takes seconds, which every pytest run would
# otherwise pay while collecting this module, the default run included (these tests are slow).
grammar_programs = st.deferred(hypothesmith.from_grammar)


@pytest.mark.slow
@settings(FUZZ, max_examples=25)
@given(program=grammar_programs)
def test_grammar_programs_never_break_scan(program: str) -> None:
    data = ("# SimpleResponsesAPIAgent: parse me\n" + program).encode("utf-8", "surrogatepass")
    with project({APP: data}) as root:
        report = scan_never_breaks(root, {APP} if is_python(data) else set())
        assert good_agent_found(report)


@pytest.mark.slow
@settings(FUZZ, max_examples=20)
@given(program=grammar_programs)
def test_a_self_call_appended_to_grammar_programs_is_found_and_fixed(program: str) -> None:
    data = (program + APPENDED_AGENT).encode("utf-8", "surrogatepass")
    valid = is_python(data)
    with project({APP: data}) as root:
        report = scan_never_breaks(root, {APP} if valid else set())
        assert good_agent_found(report)
        found = [
            f
            for f in report["findings"]
            if f["path"] == APP and (f["agent"], f["method"]) == ("FuzzAgent", "run")
        ]
        assert len(found) == (1 if valid else 0), report["findings"]
        fix_never_breaks(root)


# generated functions as agent methods -----------------------------------------------------------


def _as_method(function: str) -> str:
    return "".join(f"    {line}" if line.strip() else line for line in function.splitlines(keepends=True))


@pytest.mark.slow
@settings(FUZZ, max_examples=15)
@given(function=st.deferred(lambda: hypothesmith.from_node(libcst.FunctionDef)))
def test_generated_methods_of_an_agent_never_break_scan_or_fix(function: str) -> None:
    data = (AGENT_HEADER + _as_method(function) + "\n" + RUN_METHOD).encode("utf-8", "surrogatepass")
    with project({APP: data}) as root:
        report = scan_never_breaks(root, {APP} if is_python(data) else set())
        assert good_agent_found(report)
        fix_never_breaks(root)


# agent methods made of the statements self-calls are made of -------------------------------------

STATEMENTS = (
    "config = self.config",
    "name = self.config.name",
    "name = config.name",
    "name = 'policy_model'",
    "name = self.config.model_server.name",
    "name = self.config.peer.name",
    "client = self.server_client",
    "post = self.server_client.post",
    "post = client.post",
    "url = '/v1/responses'",
    "url = '/run'",
    "url = ROUTE",
    "url = self.ROUTE",
    "url = self.url_path_for_run('/v1/responses', body)",
    "url = url + ''",
    "url += '?turn=1'",
    "url = f'{url}'",
    "kwargs = {'server_name': self.config.name, 'url_path': url}",
    "send = functools.partial(self.server_client.post, server_name=self.config.name)",
    "response = await self.server_client.post(server_name=self.config.name, url_path='/v1/responses', json=body)",
    "response = await self.server_client.post(server_name=name, url_path=url, json=body, cookies=cookies)",
    "response = await self.server_client.post(\n    server_name=name,\n    url_path=url,\n)",
    "response = await client.post(server_name=name, url_path=url)",
    "response = await post(server_name=self.config.name, url_path=url, json=body)",
    "response = await self.server_client.request(method='POST', server_name=name, url_path=url)",
    "response = await self.server_client.post(**kwargs)",
    "response = await send(url_path=url, json=body)",
    "response = await self.helper(name, url, json=body)",
    "response = await self.server_client.post(server_name=self.config.name, url_path=url)  # noqa: SCA001",
    "results = await asyncio.gather(*[self.server_client.post(server_name=name, url_path=url) for _ in body])",
    "data = await response.json()",
    "cookies = response.cookies",
    "return await self.server_client.post(server_name=self.config.name, url_path='/v1/responses')",
    "del url",
    "pass",
)
BLOCKS = (
    "if body:",
    "for _ in range(2):",
    "while cookies:",
    "try:",
    "with self.lock:",
    "async with self.lock:",
)


def _render(tree: list, indent: int) -> str:
    pad = "    " * indent
    lines = []
    for item in tree:
        if isinstance(item, str):
            lines.append("".join(f"{pad}{line}\n" for line in item.splitlines()))
            continue
        header, body = item
        lines.append(f"{pad}{header}\n{_render(body or ['pass'], indent + 1)}")
        if header == "try:":
            lines.append(f"{pad}except Exception:\n{pad}    response = None\n")
    return "".join(lines)


statement_trees = st.recursive(
    st.lists(st.sampled_from(STATEMENTS), max_size=6),
    lambda children: st.lists(
        st.one_of(st.sampled_from(STATEMENTS), st.tuples(st.sampled_from(BLOCKS), children)), max_size=5
    ),
    max_leaves=20,
)


# How the agent file is stored, and what must still hold of its bytes after `fix`.
ENCODINGS = {
    "utf-8": (lambda text: text.encode(), lambda data: b"\r" not in data),
    "utf-8 with BOM": (
        lambda text: b"\xef\xbb\xbf" + text.encode(),
        lambda data: data.startswith(b"\xef\xbb\xbf"),
    ),
    "CRLF": (
        lambda text: text.replace("\n", "\r\n").encode(),
        lambda data: data.count(b"\n") == data.count(b"\r\n"),
    ),
    "Latin-1, declared": (
        lambda text: ("# -*- coding: latin-1 -*-\n# Caf\xe9\n" + text).encode("latin-1"),
        lambda data: data.startswith(b"# -*- coding: latin-1 -*-\n# Caf\xe9\n"),
    ),
}


@pytest.mark.slow
@settings(FUZZ, max_examples=40)
@given(body=statement_trees, more=statement_trees, encoding=st.sampled_from(sorted(ENCODINGS)))
def test_self_call_vocabulary_never_breaks_scan_or_fix(body: list, more: list, encoding: str) -> None:
    source = (
        "import asyncio\n"
        + AGENT_HEADER
        + "    async def run(self, body, cookies=None):\n"
        + _render(body or ["pass"], 2)
        + "\n    async def responses(self, body, cookies=None):\n"
        + _render(more or ["pass"], 2)
        + "\n\nclass SubAgent(FuzzAgent):\n    async def run(self, body, cookies=None):\n"
        "        return await super().run(body, cookies)\n"
    )
    encode, still_encoded = ENCODINGS[encoding]
    data = encode(source)
    assert is_python(data), source
    with project({APP: data, "responses_api_agents/x/configs/fuzz.yaml": CONFIG}) as root:
        report = scan_never_breaks(root, {APP})
        assert good_agent_found(report)
        before = sum(f["code"] == "SCA001" for f in report["findings"])
        first = fix_never_breaks(root)
        after = json.loads(run("scan", root, "--format", "json", "--no-cache").stdout)
        left = sum(f["code"] == "SCA001" for f in after["findings"])
        rewritten = first.stdout.count("rewrote self-call")
        assert left + rewritten == before, first.stdout
        assert (first.exit_code == 1) == bool(after["findings"]), first.stdout  # SCA002 is left to the user
        assert still_encoded((root / APP).read_bytes()), f"{encoding} lost"


# the fixture repos, mutated ---------------------------------------------------------------------


def _mutate(data: bytes, rng: random.Random) -> bytes:
    lines = data.splitlines(keepends=True) or [b""]
    kind = rng.choice(("delete", "duplicate", "truncate", "bytes", "swap"))
    if kind == "delete":
        del lines[rng.randrange(len(lines))]
    elif kind == "duplicate":
        index = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines) + 1), lines[index])
    elif kind == "truncate":
        return data[: rng.randrange(len(data) + 1)]
    elif kind == "bytes":
        at = rng.randrange(len(data) + 1)
        return data[:at] + rng.randbytes(rng.randint(1, 8)) + data[at:]
    else:
        tokens = list(re.finditer(rb"\w+|[^\w\s]+", data))
        if len(tokens) < 2:
            return data
        first, second = sorted(rng.sample(tokens, 2), key=lambda match: match.start())
        return (
            data[: first.start()]
            + second.group()
            + data[first.end() : second.start()]
            + first.group()
            + data[second.end() :]
        )
    return b"".join(lines)


@pytest.mark.slow
@settings(FUZZ, max_examples=30)
@given(fixture=st.sampled_from(FIXTURE_DIRS), seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 4))
def test_mutated_fixtures_never_break_scan_or_fix(fixture: Path, seed: int, rounds: int) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="selfcall-fuzz-") as folder:
        root = Path(folder) / fixture.name
        shutil.copytree(fixture, root, ignore=shutil.ignore_patterns(".selfcall_audit_cache"))
        candidates = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".yaml", ".yml"))
        for _ in range(rounds):
            target = rng.choice(candidates)
            target.write_bytes(_mutate(target.read_bytes(), rng))
        valid = {
            str(p.relative_to(root)) for p in candidates if p.suffix == ".py" and is_python(p.read_bytes())
        }
        scan_never_breaks(root, valid)
        fix_never_breaks(root)

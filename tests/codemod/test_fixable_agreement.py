"""`scan` and `fix` agree on what is fixable: over a corpus of shapes (every codemod case, the
module bindings of the helper's name, the data-flow shapes of the safety specs and the paths from
a response's binding to its uses), each SCA001
finding `scan` marks fixable is one `fix` rewrites, and each one it does not mark is one `fix`
leaves, for the same reason. `scan` reads the tree around a call with `ast`, `fix` with libcst."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_codemod_cases import APP, CASES, make_project
from test_safety import AGENT, BINDINGS, CALL, FLOW

NOT_REWRITTEN = re.compile(
    r"^(?:.*/)?responses_api_agents/x/app\.py:(\d+):(\d+): SCA001 not rewritten: (.*)$", re.M
)
NOT_FIXABLE = re.compile(r"^ *= not fixable: (.*)$", re.M)

POST = CALL.removeprefix("response = await ")
# the safety specs' shapes in which the analysis, too, reads the name as the agent's own at the call
FLOW_BODIES = {
    "while": "        while names:\n            CALL\n            target = names.pop()",
    "match": "        match body:\n            case {'peer': target}:\n                pass\n        CALL",
    "del": "        if not names:\n            del target\n        CALL",
    "finally-after": "        try:\n            CALL\n        finally:\n            target = None",
    "after-loop": "        for name in names:\n            CALL\n        target = names",
    "other-name": "        if names:\n            body = names\n        CALL",
    "closure": "        async def later():\n            CALL\n            return response\n        target = names\n"
    "        response = await later()",
    "nonlocal": "        def switch():\n            nonlocal target\n            target = names\n        switch()\n        CALL",
}
# the response's binding, reaching the uses after it on some paths or on none: is each call fixable?
RESPONSE_BODIES = {
    "rebound-on-every-path": (
        [True],
        "        CALL\n        if names:\n            response = names\n        else:\n"
        "            response = None\n        response.status_code",
    ),
    "read-before": ([True], "        response = names\n        response.status_code\n        CALL"),
    "rebound-on-one-path": (
        [False],
        "        CALL\n        match names:\n            case [first]:\n                response = first\n"
        "            case _:\n                pass\n        response.status_code",
    ),
    "rebound-in-try": (
        [False],
        "        try:\n            CALL\n            response = await response.json()\n"
        "        except ValueError:\n            response.status_code",
    ),
    "rebound-in-with": (
        [False],
        "        with suppress(KeyError):\n            CALL\n            response = await response.json()\n"
        "        response.status_code",
    ),
    "read-before-in-loop": (
        [False],
        "        while names:\n            response.status_code\n            CALL",
    ),
    "walrus-after": (
        [False],
        "        CALL\n        if (response := names):\n            pass\n        response.status_code",
    ),
    "lambda": (
        [False],
        "        CALL\n        later = lambda: response.status_code\n        response = later",
    ),
    # made before the call, run after it: what a function or lambda reads is read when it runs
    "lambda-made-before": (
        [False],
        "        later = lambda: response.status_code\n        CALL\n        later()",
    ),
    "def-made-before": (
        [False],
        "        def later():\n            return response.status_code\n\n        CALL\n        later()",
    ),
    # unpacked from `asyncio.gather(...)`: each name is the response in its place
    "gathered": (
        [False, True],
        "        response, other = await asyncio.gather(POST, POST, return_exceptions=True)\n"
        "        response.status_code\n        other.status",
    ),
    "gathered-starred-target": (  # the second response goes into a list, where it is not followed
        [False, False],
        "        response, *rest = await asyncio.gather(POST, POST)\n        response.status_code\n"
        "        rest[0].status_code",
    ),
    "gathered-from-a-list": (  # not awaited where it stands: where the response goes is not followed
        [False],
        "        response, = await asyncio.gather(*[POST])\n        await response.json()",
    ),
    # awaited through `asyncio.wait_for` or `asyncio.shield`, which give what the call gives
    "waited-for": (
        [False],
        "        response = await asyncio.wait_for(POST, timeout=5)\n        response.status_code",
    ),
    "shielded-in-gather": (
        [False, True],
        "        response, other = await asyncio.gather(asyncio.shield(POST), POST)\n        response.status_code",
    ),
    # the response itself passed on: followed into NeMo Gym's readers alone
    "passed-to-the-readers": (
        [True],
        "        CALL\n        await raise_for_status(response)\n        await server_utils.get_response_json(response)",
    ),
    "passed-to-a-function": ([False], "        CALL\n        keep(response)"),
    "passed-to-a-method-named-as-a-reader": (
        [False],
        "        CALL\n        await self.raise_for_status(response)",
    ),
    "passed-to-a-reader-with-more": (
        [False],
        "        CALL\n        await get_response_json(response, strict=True)",
    ),
    "passed-by-keyword": ([False], "        CALL\n        await raise_for_status(response=response)"),
    "returned": ([False], "        CALL\n        if names:\n            return response"),
    "stored": ([False], "        CALL\n        self.last = response"),
    "formatted": ([False], "        CALL\n        print(f'{response}')"),
    "yielded-by-a-generator": ([False], "        CALL\n        def later():\n            yield response"),
    # no name holds it: where the awaited response goes
    "awaited-and-dropped": ([True], "        await POST"),
    "read-by-a-reader-from-the-await": ([True], "        await raise_for_status(await POST)"),
    "returned-from-the-await": ([False], "        return await POST"),
    "passed-from-the-await": ([False], "        keep(await POST)"),
    "passed-by-keyword-from-the-await": ([False], "        keep(response=await POST)"),
    "stored-from-the-await": ([False], "        self.last = await POST"),
    "returned-through-wait-for": ([False], "        return await asyncio.wait_for(POST, timeout=5)"),
    "dropped-through-gather": ([True, True], "        await asyncio.gather(POST, asyncio.shield(POST))"),
    "returned-through-gather": ([False, False], "        return await asyncio.gather(POST, POST)"),
    # not awaited where it stands: awaited later, its response is not followed
    "a-task": ([False], "        task = asyncio.ensure_future(POST)\n        await (await task).json()"),
    "a-task-by-keyword": ([False], "        asyncio.create_task(coro=POST)"),
    "returned-unawaited": ([False], "        return POST"),
    "in-a-lambda-run-later": ([False], "        later = lambda: POST\n        await later()"),
    "a-list-gathered": ([False], "        await asyncio.gather(*[POST for _ in names])"),
    "dropped-unawaited": ([True], "        POST"),  # never sent
    "in-a-lambda-dropped": ([True], "        lambda: POST"),
    # a member named by a string: read as the attribute is
    "queried-for-a-member": (
        [True],
        "        CALL\n        getattr(response, 'headers', None)\n        hasattr(response, 'ok')\n"
        "        await getattr(response, 'js' 'on')()",
    ),
    "queried-for-what-it-lacks": ([False], "        CALL\n        getattr(response, 'status_code', 0)"),
    "queried-by-another-name": ([False], "        CALL\n        getattr(response, names)"),
    # made by NeMo Gym's wrappers through a lambda, which give back its response
    "through-a-wrapper": (
        [True],
        "        response = await self.retry_checkpoint_refusal(lambda: POST, request=names)\n"
        "        await raise_for_status(response)\n        getattr(response, 'headers', None)",
    ),
    "through-a-wrapper-read-as-it-lacks": (
        [False],
        "        response = await self.retry_checkpoint_refusal(lambda: POST)\n        response.status_code",
    ),
    "returned-through-a-wrapper": (
        [False],
        "        return await self.checkpointable_external_wait(lambda: POST)",
    ),
    "through-another-wrapper": (
        [False],
        "        response = await retry(lambda: POST)\n        await response.json()",
    ),
    # a wrapper's name on another object than the agent, or a function's: not NeMo Gym's wrapper
    "through-another-objects-wrapper": (
        [False],
        "        response = await self.peer.retry_checkpoint_refusal(lambda: POST)\n        await response.json()",
    ),
    "through-a-function-named-as-a-wrapper": (
        [False],
        "        response = await checkpointable_external_wait(lambda: POST)\n        await response.json()",
    ),
    "through-the-wrapper-of-a-closures-own-first-parameter": (
        [False],
        "        async def attempt(peer):\n"
        "            response = await peer.retry_checkpoint_refusal(lambda: POST)\n"
        "            await response.json()\n"
        "        await attempt(self)",
    ),
    "passed-in-a-lambda": ([False], "        CALL\n        later = lambda: keep(response)"),
    "returned-once-rebound": (
        [True],
        "        CALL\n        response = await response.json()\n        return response",
    ),
    "named-where-no-variable-is": (
        [True],
        "        CALL\n        names.response = keep(response=names)\n"
        "        match names:\n            case Point(response=_):\n                pass",
    ),
}
# what the module imports for the response shapes: NeMo Gym's readers, as its agents import them
RESPONSE_MODULE = (
    "import asyncio\n\nfrom nemo_gym import server_utils\n"
    "from nemo_gym.server_utils import get_response_json, raise_for_status"
)
# the response passed alone to a function named as NeMo Gym's readers: theirs only as the module's
# imports make them (is each call fixable?)
READERS = {
    "aliased": (
        [True],
        "from nemo_gym.server_utils import raise_for_status as check",
        "        CALL\n        await check(response)",
    ),
    "module-aliased": (
        [True],
        "import nemo_gym.server_utils as su",
        "        CALL\n        await su.raise_for_status(response)\n        await su.get_response_json(response)",
    ),
    "dotted": (
        [True],
        "import nemo_gym.server_utils",
        "        CALL\n        await nemo_gym.server_utils.raise_for_status(response)",
    ),
    "not-imported": ([False], "", "        CALL\n        await raise_for_status(response)"),
    "imported-from-elsewhere": (
        [False],
        "from utils import raise_for_status",
        "        CALL\n        await raise_for_status(response)",
    ),
    "defined-by-the-module": (
        [False],
        "from nemo_gym.server_utils import raise_for_status\n\n\n"
        "def raise_for_status(response):\n    return response.status_code",
        "        CALL\n        await raise_for_status(response)",
    ),
    "imported-and-defined-on-failure": (
        [False],
        "try:\n    from nemo_gym.server_utils import raise_for_status\nexcept ImportError:\n"
        "    raise_for_status = print",
        "        CALL\n        await raise_for_status(response)",
    ),
    "rebound-in-the-method": (
        [False],
        "from nemo_gym.server_utils import raise_for_status",
        "        raise_for_status = keep\n        CALL\n        await raise_for_status(response)",
    ),
    "its-module-rebound-in-the-method": (
        [False],
        "from nemo_gym import server_utils",
        "        CALL\n        server_utils = names\n        await server_utils.raise_for_status(response)",
    ),
    "its-module-imported-from-elsewhere": (
        [False],
        "from utils import server_utils",
        "        CALL\n        await server_utils.raise_for_status(response)",
    ),
}
SHAPES: dict[str, bytes | None] = {
    **{f"case-{case.name}": None for case in sorted(CASES.iterdir()) if case.is_dir()},
    **{
        f"binding-{name}": AGENT.format(module=f"{b}\n", before="").encode()
        for name, (b, _) in BINDINGS.items()
    },
    **{
        f"flow-{name}": FLOW.format(module="", body=body.replace("CALL", CALL)).encode()
        for name, body in FLOW_BODIES.items()
    },
    **{
        f"response-{name}": FLOW.format(
            module=RESPONSE_MODULE, body=body.replace("CALL", CALL).replace("POST", POST)
        ).encode()
        for name, (_, body) in RESPONSE_BODIES.items()
    },
    **{
        f"readers-{name}": FLOW.format(
            module=module, body=body.replace("CALL", CALL).replace("POST", POST)
        ).encode()
        for name, (_, module, body) in READERS.items()
    },
}


def _project(root: Path, shape: str) -> Path:
    if shape.startswith("case-"):
        return make_project(root, CASES / shape.removeprefix("case-"))
    return make_project(root, CASES / "plain", before=SHAPES[shape])


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_scan_marks_fixable_exactly_what_fix_rewrites(shape: str, tmp_path: Path, cli) -> None:
    _assert_agree(_project(tmp_path / "repo", shape), cli)


def _assert_agree(root: Path, cli) -> None:
    scanned = json.loads(cli("scan", "--no-cache", "--format", "json", root).stdout)["findings"]
    reasons = NOT_FIXABLE.findall(cli("scan", "--no-cache", "--format", "text", root).stdout)
    fixable = {
        (f["line"], f["column"]): f["fixable"] for f in scanned if f["code"] == "SCA001" and f["path"] == APP
    }

    checked = cli("fix", "--check", "--no-cache", root)

    refused = {
        (int(line), int(column)): reason for line, column, reason in NOT_REWRITTEN.findall(checked.stdout)
    }
    assert fixable, "the shape must hold a self-call"
    assert fixable == {site: site not in refused for site in fixable}
    via_helper = "; rewrite this call by hand to call"  # what fix adds for a call through a helper
    assert sorted(reasons) == sorted(reason.split(via_helper)[0] for reason in refused.values())
    # once written, each call left is named where it now stands, as a scan of the new file finds it
    fixed = cli("fix", "--no-cache", root)
    left = json.loads(cli("scan", "--no-cache", "--format", "json", root).stdout)["findings"]
    assert {(int(line), int(column)) for line, column, _ in NOT_REWRITTEN.findall(fixed.stdout)} == {
        (f["line"], f["column"]) for f in left if f["code"] == "SCA001" and f["path"] == APP
    }


def test_fix_given_another_helper_name_decides_the_name_clash_again(tmp_path: Path, cli) -> None:
    """`scan` judges the helper's name the settings give; `fix --helper` rewrites with its own."""
    root = make_project(tmp_path / "repo", CASES / "name_clash")
    scanned = json.loads(cli("scan", "--no-cache", "--format", "json", root).stdout)["findings"]

    fixed = cli("fix", "--no-cache", "--helper", "selfcall_audit.inprocess:call_in_process", root)

    assert [f["fixable"] for f in scanned] == [False]
    assert NOT_REWRITTEN.findall(fixed.stdout) == []
    assert "await call_in_process(\n            self," in (root / APP).read_text()


@pytest.mark.parametrize("name", sorted(RESPONSE_BODIES))
def test_a_response_use_counts_where_the_binding_reaches_it(name: str, tmp_path: Path, cli) -> None:
    root = _project(tmp_path / "repo", f"response-{name}")

    scanned = json.loads(cli("scan", "--no-cache", "--format", "json", root).stdout)["findings"]

    assert [f["fixable"] for f in scanned if f["code"] == "SCA001"] == RESPONSE_BODIES[name][0]


@pytest.mark.parametrize("name", sorted(READERS))
def test_a_response_passed_to_a_reader_is_followed_where_the_module_imports_nemo_gyms(
    name: str, tmp_path: Path, cli
) -> None:
    root = _project(tmp_path / "repo", f"readers-{name}")

    scanned = json.loads(cli("scan", "--no-cache", "--format", "json", root).stdout)["findings"]

    assert [f["fixable"] for f in scanned if f["code"] == "SCA001"] == READERS[name][0]


# Statements about the response's name; `CALL` is the self-call that binds it, and `status_code` a
# use the helper's response does not serve (one of each is kept: does the binding reach the use?);
# the response passed on goes where it is not followed, but to NeMo Gym's readers.
_SIMPLE = [
    "CALL",
    "CALL",
    "response = names",
    "response = names",
    "response = None",
    "names = [response]",
    "keep(response)",
    "await raise_for_status(response)",
    "await response.json()",
    "response.raise_for_status()",
    "if (response := names): pass",
    "response.status_code",
    "later = lambda: response.status_code",
    "def later(): return response.status_code",
]


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def _blocks(in_loop: bool, depth: int) -> st.SearchStrategy[list[str]]:
    """A block of statements over the response's name, compound ones nested `depth` deep."""
    statement = st.sampled_from([*_SIMPLE, *(["break", "continue"] if in_loop else [])]).map(
        lambda line: [line]
    )
    if depth > 0:

        def inner(loop: bool) -> st.SearchStrategy[list[str]]:
            return _blocks(loop, depth - 1)

        statement = st.one_of(
            statement,
            st.builds(
                lambda a, b: ["if names:", *_indent(a), "else:", *_indent(b)], inner(in_loop), inner(in_loop)
            ),
            st.builds(lambda a: ["while names:", *_indent(a)], inner(True)),
            st.builds(
                lambda name, a: [f"for {name} in names:", *_indent(a)],
                st.sampled_from(["response", "name"]),
                inner(True),
            ),
            st.builds(
                lambda a, b, c: [
                    "try:",
                    *_indent(a),
                    "except ValueError:",
                    *_indent(b),
                    "finally:",
                    *_indent(c),
                ],
                inner(in_loop),
                inner(in_loop),
                inner(False),  # no `break` in `finally`, which newer Pythons warn of
            ),
            st.builds(lambda a: ["with suppress(KeyError):", *_indent(a)], inner(in_loop)),
            st.builds(
                lambda a, b: [
                    "match names:",
                    "    case [first]:",
                    *_indent(_indent(a)),
                    "    case _:",
                    *_indent(_indent(b)),
                ],
                inner(in_loop),
                inner(in_loop),
            ),
        )
    return st.lists(statement, min_size=1, max_size=4).map(
        lambda parts: [line for part in parts for line in part]
    )


# how the self-call binds the response
_BOUND_BY = [
    CALL,
    "response, other = await asyncio.gather(POST, asyncio.sleep(0))",
    "response = await asyncio.wait_for(POST, timeout=5)",
    "response = await self.retry_checkpoint_refusal(lambda: POST)",
    "response = await retry(lambda: POST)",  # not awaited where it stands: never rewritten
]


def _method_body(lines: list[str], bound_by: str) -> str:
    """The lines as the method's body, with one self-call (the first `CALL`, or one at the end)
    and at most one use the helper does not serve (the first)."""
    for word in ("CALL", "status_code"):
        first = next((i for i, line in enumerate(lines) if word in line), None)
        lines = [
            line.split(line.strip())[0] + "pass" if word in line and i != first else line
            for i, line in enumerate(lines)
        ]
    if "CALL" not in "".join(lines):
        lines.append("CALL")
    return "\n".join(_indent(_indent(lines))).replace("CALL", bound_by.replace("POST", POST))


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=_blocks(in_loop=False, depth=2), bound_by=st.sampled_from(_BOUND_BY))
def test_scan_and_fix_agree_on_generated_paths_from_the_response(body: list[str], bound_by: str, cli) -> None:
    source = FLOW.format(module=RESPONSE_MODULE, body=_method_body(body, bound_by))
    compile(source, APP, "exec")  # the generator writes valid Python
    with tempfile.TemporaryDirectory() as folder:
        _assert_agree(make_project(Path(folder) / "repo", CASES / "plain", before=source.encode()), cli)

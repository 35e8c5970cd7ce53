"""The rewrite policy, and how `fix` consumes the analysis' description of a call.

`policy` is the one place that says whether a described self-call can be rewritten; the codemod
checks the call it finds in the file against the description before trusting it.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace

import pytest

from selfcall_audit.analysis import policy
from selfcall_audit.config import DEFAULT_HELPER, load_settings
from selfcall_audit.ftypes import CallArgument, CallDescription, CallReceiver, Finding
from selfcall_audit.inprocess import InProcessResponse
from selfcall_audit.migrate.imports import Helper
from selfcall_audit.migrate.rewrite import rewrite_source
from selfcall_audit.orchestration.project import Project
from selfcall_audit.report import messages

HELPER = Helper.parse(DEFAULT_HELPER)
ON_SELF = CallReceiver("self_attribute", "post", "self.server_client.post")
PLAIN = (
    CallArgument(0, "server_name", "server_name"),
    CallArgument(1, "url_path", "url_path"),
    CallArgument(2, "json", "json"),
)


def described(receiver: CallReceiver = ON_SELF, arguments=PLAIN, **changes) -> CallDescription:
    return CallDescription(receiver=receiver, arguments=arguments, self_name="self", **changes)


@pytest.mark.parametrize(
    ("method", "index", "keyword", "role"),
    [
        ("post", 0, None, "server_name"),
        ("post", 1, None, "url_path"),
        ("post", 2, None, "other"),
        ("request", 2, None, "method"),
        ("post", 0, "method", "other"),
        ("request", 0, "method", "method"),
        ("post", 0, "cookies", "cookies"),
        ("post", 0, "timeout", "other"),
        ("", 0, None, "other"),  # a method it does not know takes nothing by position
    ],
)
def test_each_argument_has_the_role_the_client_gives_it(method: str, index: int, keyword, role: str) -> None:
    assert policy.role_of(method, index, keyword) == role


def test_a_plain_self_call_can_be_rewritten() -> None:
    assert policy.blocker(described()) is None


def test_a_self_call_through_a_method_that_only_forwards_to_the_client_can_be_rewritten() -> None:
    renamed = (
        CallArgument(0, "server_name", "target"),
        CallArgument(1, "url_path", "route"),
        CallArgument(2, "json", "payload"),
    )
    assert policy.blocker(described(CallReceiver("helper", "post", "_send", forwards=True), renamed)) is None


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        (
            described(CallReceiver("partial", "post", "send")),
            "the call goes through functools.partial",
        ),
        (
            described(CallReceiver("helper", "post", "_post_checked")),
            "the call goes through `_post_checked()`, which does more than pass its arguments on: only a method "
            "whose whole body is `return await self.server_client.post(name=name, ...)` is seen through",
        ),
        (
            described(
                CallReceiver("helper", "post", "_ask", forwards=True),
                (
                    CallArgument(0, "other"),
                    CallArgument(1, "url_path", "url_path"),
                    CallArgument(2, "server_name", "to"),
                ),
            ),
            "it passes arguments to `_ask()` by position: name them, as its parameters are named",
        ),
        (
            described(
                CallReceiver("helper", "post", "_post", forwards=True),
                (*PLAIN, CallArgument(3, "other", "timeout")),
            ),
            "`_post()` does not pass `timeout` on to the client as an argument the in-process helper takes "
            "(`url_path`, `json`, `cookies`, `headers`)",
        ),
        (
            described(CallReceiver("helper", "post", "_post", forwards=True, unpassed="headers")),
            "`_post()` sends its own default for `headers`, which the rewritten call would not send",
        ),
        (
            described(CallReceiver("alias", "get", "client.get")),
            "the call is not a `.post(...)` or `.request(...)` of the server client",
        ),
        (described(context="with"), "the response is used as an async context manager"),
        (
            described(context="default"),
            "the call is in a default argument value, evaluated once when the function is defined",
        ),
        (
            described(context="decorator"),
            "the call is in a decorator, evaluated once when the function is defined",
        ),
        (
            described(arguments=(*PLAIN, CallArgument(3, "other", None, "**"))),
            "arguments come from a `**` expansion: rewrite the call by hand",
        ),
        (
            described(arguments=(*PLAIN, CallArgument(3, "other", "timeout"))),
            "the in-process helper takes no `timeout` argument",
        ),
        (
            described(arguments=(*PLAIN, CallArgument(3, "other"))),
            "it passes positional arguments the in-process helper does not take",
        ),
        (described(arguments=PLAIN[1:]), "it does not name both the server and the url path"),
        (
            CallDescription(receiver=ON_SELF, arguments=PLAIN, self_name=None),
            "the call is not inside a method that has `self`",
        ),
    ],
)
def test_each_blocker_has_its_reason(call: CallDescription, reason: str) -> None:
    blocker = policy.blocker(call)

    assert blocker is not None and messages.reason(blocker) == reason


SOURCE = b"""\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        send = self.server_client.post
        await send(self.config.name, "/v1/responses", json=body)
"""
CALL = {"line": 7, "column": 15, "end_line": 7, "end_column": 65}


def finding(call: CallDescription | None) -> Finding:
    return Finding("SCA001", "app.py", agent="EchoAgent", method="run", fixable=True, call=call, **CALL)


BOUND = CallReceiver("bound_method", "post", "send")
POSITIONAL = (
    CallArgument(0, "server_name"),
    CallArgument(1, "url_path"),
    CallArgument(2, "json", "json"),
)


def test_a_described_call_is_rewritten_from_its_description() -> None:
    after, [outcome], removed, _ = rewrite_source(SOURCE, [finding(described(BOUND, POSITIONAL))], HELPER)

    assert outcome.reason is None
    assert removed == [(6, "send")]
    assert after == (
        b"from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent\n"
        b"from selfcall_audit.inprocess import responses_in_process\n"
        b"\n\n"
        b"class EchoAgent(SimpleResponsesAPIAgent):\n"
        b"    async def run(self, body):\n"
        b'        await responses_in_process(self, url_path="/v1/responses", json=body)\n'
    )


def test_the_description_decides_what_the_tree_alone_cannot_tell() -> None:
    """The tree shows a local callee; only the analysis knows it is a functools.partial."""
    partial = described(CallReceiver("partial", "post", "send"), POSITIONAL)

    after, [outcome], _, _ = rewrite_source(SOURCE, [finding(partial)], HELPER)

    assert (after, outcome.reason) == (SOURCE, "the call goes through functools.partial")


def test_a_call_that_is_not_the_described_one_is_left_alone() -> None:
    """A description with another argument list: the file is not what was analysed."""
    other = described(BOUND, POSITIONAL[:2])

    after, [outcome], _, _ = rewrite_source(SOURCE, [finding(other)], HELPER)

    assert after == SOURCE
    assert outcome.reason == "the call is not the one the analysis described; run `selfcall-audit fix` again"


@pytest.mark.parametrize(
    ("index", "analysed"),
    [(0, "self.config.model_server.name"), (1, "'/run'")],
    ids=["server name", "path"],
)
def test_a_call_that_no_longer_says_what_was_analysed_is_left_alone(index: int, analysed: str) -> None:
    """Same arguments, same receiver, but the file now names another server or path."""
    arguments = [
        CallArgument(0, "server_name", text="self.config.name"),
        CallArgument(1, "url_path", text="'/v1/responses'"),
    ]
    arguments[index] = arguments[index]._replace(text=analysed)

    after, [outcome], _, _ = rewrite_source(
        SOURCE, [finding(described(BOUND, (*arguments, POSITIONAL[2])))], HELPER
    )

    assert after == SOURCE
    assert outcome.reason == "the call is not the one the analysis described; run `selfcall-audit fix` again"


def test_the_texts_the_analysis_records_are_those_the_tree_shows(tmp_path: Path) -> None:
    """What `scan` records of the server name and path is what `fix` reads back from the same file."""
    root = tmp_path / "repo"
    (root / "responses_api_agents" / "x").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "toy"\n')
    (root / "responses_api_agents" / "x" / "app.py").write_bytes(SOURCE)

    [found] = Project(root, load_settings(root)).analyze([root]).findings

    assert found.call is not None
    assert [a.text for a in found.call.arguments] == ["self.config.name", "'/v1/responses'", ""]
    after, [outcome], _, _ = rewrite_source(SOURCE, [found._replace(**CALL)], HELPER)
    assert outcome.reason is None and after != SOURCE


def test_without_a_description_the_tree_is_read_with_the_same_rules() -> None:
    with_description = rewrite_source(SOURCE, [finding(described(BOUND, POSITIONAL))], HELPER)
    from_the_tree = rewrite_source(SOURCE, [finding(None)], HELPER)

    assert from_the_tree[0] == with_description[0]
    assert from_the_tree[2] == with_description[2]


def test_where_the_call_stands_is_read_from_the_tree_whatever_the_description_says() -> None:
    line = '        @self.remember(await send(self.config.name, "/v1/responses", json=body))'
    source = SOURCE.replace(
        b'        await send(self.config.name, "/v1/responses", json=body)\n',
        f"\n{line}\n        def cached():\n            pass\n".encode(),
    )
    start, end = line.index("send("), line.index("))") + 1
    where = {"line": 8, "column": start + 1, "end_line": 8, "end_column": end + 1}
    in_a_decorator = Finding(
        "SCA001",
        "app.py",
        agent="EchoAgent",
        method="run",
        call=described(BOUND, POSITIONAL),
        **where,
    )

    after, [outcome], _, _ = rewrite_source(source, [in_a_decorator], HELPER)

    assert after == source
    assert outcome.reason == "the call is in a decorator, evaluated once when the function is defined"


def test_the_response_uses_the_policy_allows_are_those_the_shipped_helpers_response_serves() -> None:
    response = InProcessResponse((200, [], b"{}"), SimpleNamespace(url="http://agent/v1/responses"))
    served = {name for name in dir(response) if not name.startswith("_")}
    assert served == policy.RESPONSE_MEMBERS | policy.RESPONSE_READS
    assert all(
        inspect.iscoroutinefunction(getattr(InProcessResponse, name)) for name in policy.RESPONSE_READS
    )
    assert not any(inspect.iscoroutinefunction(getattr(response, n)) for n in policy.RESPONSE_MEMBERS)


@pytest.mark.parametrize(
    ("uses", "unserved"),
    [
        ([("r", "json", True, True), ("r", "status", False, False), ("r", "content", False, False)], ()),
        ([("r", "json", True, False)], ("r.json()",)),  # httpx's json() is no coroutine
        ([("r", "text", False, False), ("r", "status_code", False, False)], ("r.status_code", "r.text")),
        ([("r", "read", False, False), ("r", "read", True, False)], ("r.read", "r.read()")),
    ],
)
def test_a_response_used_otherwise_than_the_helpers_is_named(uses, unserved) -> None:
    assert policy.unserved(uses) == unserved
    site = policy.Site("responses_in_process", "self", unserved=policy.unserved(uses))
    assert (policy.site_blocker(site) is None) == (not unserved)


@pytest.mark.parametrize(
    ("uses", "passed_on"),
    [
        (
            [
                ("r", "alone", "raise_for_status"),
                ("r", "alone", "server_utils.get_response_json"),
                ("r", "alone", "nemo_gym.server_utils.raise_for_status"),
            ],
            (),
        ),
        # a method or another module's function of that name is not NeMo Gym's, nor a name the
        # module's imports do not give it
        (
            [("r", "alone", "self.raise_for_status"), ("r", "alone", "utils.get_response_json")],
            ("self.raise_for_status(r)", "utils.get_response_json(r)"),
        ),
        ([("r", "alone", "check"), ("r", "alone", "get_response_json")], ("check(r)",)),
        (
            [("r", "alone", "keep"), ("r", "argument", "get_response_json")],
            ("get_response_json(...)", "keep(r)"),
        ),
        ([("r", "argument", "raise_for_status"), ("r", "alone", None)], ("r", "raise_for_status(...)")),
        ([("r", "return", None), ("r", "yield", None), ("r", "value", None)], ("r", "return r", "yield r")),
    ],
)
def test_a_response_passed_on_is_followed_into_nemo_gyms_readers_alone(uses, passed_on) -> None:
    readers = (
        "get_response_json",
        "nemo_gym.server_utils.raise_for_status",
        "raise_for_status",
        "server_utils.get_response_json",
    )
    assert policy.passed_on(uses, readers) == passed_on
    site = policy.Site("responses_in_process", "self", passed_on=policy.passed_on(uses, readers))
    assert policy.site_blocker(site) == (
        policy.Blocker("response_passed_on", names=passed_on) if passed_on else None
    )


@pytest.mark.parametrize(
    ("imports", "bound", "spelled"),
    [
        # as NeMo Gym's agents import them
        ([("raise_for_status", "nemo_gym.server_utils", "raise_for_status", 0)], (), ("raise_for_status",)),
        ([("check", "nemo_gym.server_utils", "raise_for_status", 0)], (), ("check",)),
        (
            [("su", "nemo_gym", "server_utils", 0)],
            (),
            ("su.get_response_json", "su.raise_for_status"),
        ),
        (
            [("su", "nemo_gym.server_utils", None, 0)],
            (),
            ("su.get_response_json", "su.raise_for_status"),
        ),
        (
            [("nemo_gym", "nemo_gym", None, 0)],  # `import nemo_gym.server_utils`
            (),
            ("nemo_gym.server_utils.get_response_json", "nemo_gym.server_utils.raise_for_status"),
        ),
        # a name also imported from elsewhere, or bound by the module itself, calls what it holds then
        (
            [
                ("raise_for_status", "nemo_gym.server_utils", "raise_for_status", 0),
                ("raise_for_status", "compat", "raise_for_status", 0),
            ],
            (),
            (),
        ),
        ([("raise_for_status", "nemo_gym.server_utils", "raise_for_status", 0)], ("raise_for_status",), ()),
        # not the readers, nor their module
        ([("raise_for_status", "utils", "raise_for_status", 0)], (), ()),
        ([("raise_for_status", "server_utils", "raise_for_status", 1)], (), ()),
        ([("json", "nemo_gym.server_utils", "json", 0)], (), ()),
        ([("server_utils", "utils", "server_utils", 0)], (), ()),
    ],
)
def test_nemo_gyms_readers_are_known_by_the_modules_imports(imports, bound, spelled) -> None:
    assert policy.reader_spellings(imports, bound) == spelled


def test_the_reach_of_a_response_is_asked_only_when_a_use_would_block_the_rewrite() -> None:
    """Uses read from every node first; the nodes the binding does not reach are left out only
    when something blocks, since working them out takes a flow through the method."""
    nodes = ["r.status", "r.status_code"]  # stand-ins for a method's nodes

    def read(some: list[str]) -> policy.ResponseUse:
        return None, tuple(n for n in some if n.endswith("_code")), ()

    def never() -> frozenset[int]:
        raise AssertionError("the reach was asked for")

    assert policy.judge_uses(nodes[:1], read, never) == (None, (), ())
    assert policy.judge_uses(nodes, read, lambda: frozenset({id(nodes[1])})) == (None, (), ())
    assert policy.judge_uses(nodes, read, lambda: frozenset()) == (None, ("r.status_code",), ())

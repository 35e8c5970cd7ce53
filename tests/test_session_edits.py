"""What `api.Session` keeps of a file between two edits of its buffer (the language server's
`didChange`) is reused only where what it was worked out from is unchanged: each edit below
changes the answer, and the answer must change with it, whichever part the edit touches; and
what is reused adds to the file's facts what walking it added (an import, a class, an attribute).

A file's functions are kept from its second version on (its first is extracted as any file is):
each sequence below has a version that reuses them."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_sources import JUDGE_CONFIG

from selfcall_audit import api
from selfcall_audit.analysis import around, facts
from selfcall_audit.analysis import extract as extraction
from selfcall_audit.analysis.kept_functions import Functions
from selfcall_audit.config import load_settings

APP = "responses_api_agents/judge/app.py"
AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent

CRITIC = "judge"


class JudgeAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        response = await self.server_client.post(  # SCA001, fixable
            server_name=CRITIC, url_path="/v1/responses", json=body
        )
        return await response.json()

    async def other(self, body):
        return body
"""
SELF_REBOUND = AGENT.replace("        response =", "        self = self\n        response =")  # line 8
# after the call (line 11): a line the call's description does not carry
SELF_REBOUND_LATER = AGENT.replace("        return await", "        self = response\n        return await")
GLOBAL_REBOUND = AGENT + '\n\ndef reset():\n    global CRITIC  # line 18\n    CRITIC = "judge"\n'
HELPER_NAME_TAKEN = AGENT + "\nresponses_in_process = None  # line 16\n"
OTHER_METHOD_EDITED = AGENT.replace("return body", "return [body]")
# the response passed to NeMo Gym's reader, then the same module but for the import that gives it
READ = AGENT.replace(
    'CRITIC = "judge"', 'from nemo_gym.server_utils import raise_for_status\nCRITIC = "judge"'
).replace(
    "        return await response.json()",
    "        await raise_for_status(response)\n        return await response.json()",
)
READ_UNIMPORTED = READ.replace("from nemo_gym.server_utils", "# from nemo_gym.server_utils")


@pytest.fixture
def session(tmp_path: Path) -> api.Session:
    for rel, text in {
        "pyproject.toml": '[project]\nname = "fake-gym"\nversion = "0"\n',
        "responses_api_agents/__init__.py": "",
        "responses_api_agents/judge/__init__.py": "",
        APP: AGENT,
        "responses_api_agents/judge/configs/judge.yaml": JUDGE_CONFIG,
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return api.Session(tmp_path, load_settings(tmp_path))


def blockers(session: api.Session, text: str) -> list[tuple[int, str | None, int | None]]:
    """Each self-call of the buffer: its line, and why `fix` leaves it (kind, line), if it does."""
    report = session.analyze([session.root / APP], {APP: text.encode()}, located=True)
    return [
        (f.line, f.fix_blocker.kind if f.fix_blocker else None, f.fix_blocker.line if f.fix_blocker else None)
        for f in report.findings
    ]


FIXABLE = [(8, None, None)]


def test_an_edit_inside_the_method_is_seen_and_undone(session: api.Session) -> None:
    answers = [blockers(session, text) for text in (AGENT, SELF_REBOUND, AGENT)]

    assert answers == [FIXABLE, [(9, "self_rebound", 8)], FIXABLE]


def test_an_edit_above_the_method_moves_the_lines_it_names(session: api.Session) -> None:
    moved = "# moved\n" + SELF_REBOUND_LATER
    answers = [blockers(session, text) for text in (SELF_REBOUND_LATER, moved)]

    assert answers == [[(8, "self_rebound", 11)], [(9, "self_rebound", 12)]]


@pytest.mark.parametrize(
    ("edited", "blocker"),
    [
        pytest.param(GLOBAL_REBOUND, (8, "rebound_by_global", 18), id="a global it reads rebound elsewhere"),
        pytest.param(HELPER_NAME_TAKEN, (8, "helper_name_taken", 16), id="the helper's name bound"),
    ],
)
def test_an_edit_outside_the_method_that_changes_the_answer_is_seen(
    session: api.Session, edited: str, blocker: tuple[int, str, int]
) -> None:
    """The method's text is the same in all three: what the module says is read again each time."""
    answers = [blockers(session, text) for text in (AGENT, edited, AGENT)]

    assert answers == [FIXABLE, [blocker], FIXABLE]


def test_an_edit_to_the_import_of_a_reader_the_response_is_passed_to_is_seen(session: api.Session) -> None:
    """The method's text is the same in all three: how the module names NeMo Gym's readers is read
    again each time."""
    answers = [blockers(session, text) for text in (READ, READ_UNIMPORTED, READ)]

    assert answers == [[(9, None, None)], [(9, "response_passed_on", None)], [(9, None, None)]]


def test_an_edit_to_another_method_reuses_the_call_sites_method_part(
    session: api.Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    worked_out = []
    method_site = around._method_site

    def counted(*args: object) -> around.MethodSite:
        worked_out.append(args[0])
        return method_site(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(around, "_method_site", counted)

    answers = [blockers(session, text) for text in (AGENT, OTHER_METHOD_EDITED, SELF_REBOUND)]

    assert answers == [FIXABLE, FIXABLE, [(9, "self_rebound", 8)]]
    assert len(worked_out) == 2  # the first run and the edit of its own method


def test_an_edit_inside_the_method_that_leaves_the_call_where_it_was_is_seen(session: api.Session) -> None:
    answers = [blockers(session, text) for text in (AGENT, SELF_REBOUND_LATER, AGENT)]

    assert answers == [FIXABLE, [(8, "self_rebound", 11)], FIXABLE]


CLASS_HEAD = AGENT[: AGENT.index("    async def run")]
# a name the removed part reads, bound again after the call in a loop (line 11)
REBOUND_IN_LOOP = (
    CLASS_HEAD
    + """\
    async def run(self, body):
        name = CRITIC
        for item in body:
            await self.server_client.post(server_name=name, url_path="/v1/responses", json=item)  # SCA001
            name = CRITIC
"""
)
# ... and by a function inside the method (line 10)
REBOUND_BY_NONLOCAL = (
    CLASS_HEAD
    + """\
    async def run(self, body):
        name = CRITIC

        def rename():
            nonlocal name
            name = CRITIC

        return await self.server_client.post(server_name=name, url_path="/v1/responses", json=body)  # SCA001
"""
)


@pytest.mark.parametrize(
    ("text", "blocker"),
    [
        pytest.param(SELF_REBOUND_LATER, (8, "self_rebound", 11), id="self"),
        pytest.param(REBOUND_IN_LOOP, (10, "rebound_in_loop", 11), id="a binding of a name"),
        pytest.param(REBOUND_BY_NONLOCAL, (14, "rebound_by_nonlocal", 10), id="a nested function"),
    ],
)
def test_an_edit_above_the_method_reuses_its_part_and_moves_each_line_it_names(
    session: api.Session, monkeypatch: pytest.MonkeyPatch, text: str, blocker: tuple[int, str, int]
) -> None:
    worked_out = []
    method_site = around._method_site
    monkeypatch.setattr(around, "_method_site", lambda *args: worked_out.append(1) or method_site(*args))
    line, kind, at = blocker

    answers = [blockers(session, edit) for edit in (text, "# moved\n" + text, "# 1\n# 2\n" + text, text)]

    assert answers == [[blocker], [(line + 1, kind, at + 1)], [(line + 2, kind, at + 2)], [blocker]]
    assert len(worked_out) == 1


TWO_CALLS = (
    CLASS_HEAD
    + """\
    async def run(self, body):
        await self.server_client.post(server_name=CRITIC, url_path="/v1/responses", json=body)  # SCA001, fixable
        await self.server_client.post(server_name=(n := CRITIC), url_path="/v1/responses", json=n)  # SCA001
"""
)


# two self-calls on one line (columns 15 and 103)
ON_ONE_LINE = (
    CLASS_HEAD
    + """\
    async def run(self, body):
        await self.server_client.post(server_name=CRITIC, url_path="/v1/responses", json=body)
        await self.server_client.post(server_name=(n := CRITIC), url_path="/v1/responses", json=n)
"""
).replace("body)\n        await", "body); await")


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        pytest.param(TWO_CALLS, [(8, None, None), (9, "walrus_in_removed_part", None)], id="lines"),
        pytest.param(ON_ONE_LINE, [(8, None, None), (8, "walrus_in_removed_part", None)], id="columns"),
    ],
)
def test_two_calls_of_a_method_keep_their_own_answers(
    session: api.Session, text: str, answer: list[tuple[int, str | None, None]]
) -> None:
    """Their place tells them apart, before an edit above them and after."""
    answers = [blockers(session, edit) for edit in (text, "# moved\n" + text)]

    assert answers == [answer, [(line + 1, kind, at) for line, kind, at in answer]]


# `run` passes its arguments to `ask` by name, and `ask` passes them on to the client: which of
# them names the server is said by `ask` alone
FORWARDED = (
    CLASS_HEAD
    + """\
    async def run(self, body):
        await self.ask(a=CRITIC, b=(name := CRITIC), p="/v1/responses", c=body)  # SCA001

    async def ask(self, a, b, p, c):
        return await self.server_client.post(server_name=a, url_path=p, json=c, headers=b)
"""
)
# the `:=` is now in the argument that names the server, which the rewrite removes
FORWARDED_OTHERWISE = FORWARDED.replace("server_name=a", "server_name=b").replace("headers=b", "headers=a")


def test_an_edit_to_the_helper_a_call_goes_through_is_seen_at_the_unchanged_call(
    session: api.Session,
) -> None:
    answers = [blockers(session, text) for text in (FORWARDED, FORWARDED_OTHERWISE, FORWARDED)]

    assert answers == [FIXABLE, [(8, "walrus_in_removed_part", None)], FIXABLE]


# facts of the file's functions ------------------------------------------------------------
HEAD = "from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent\n\n\n"
STORED = (
    HEAD
    + """\
class JudgeAgent(SimpleResponsesAPIAgent):
    def model_post_init(self, context):
        self.critic = "judge"

    async def run(self, body):
        return await self.server_client.post(  # SCA001
            server_name=self.critic, url_path="/v1/responses", json=body
        )
"""
)
IMPORTED = (
    HEAD
    + """\
class JudgeAgent(SimpleResponsesAPIAgent):
    def names(self):
        from responses_api_agents.judge.names import CRITIC  # the module's import too

        return CRITIC

    async def run(self, body):
        return await self.server_client.post(  # SCA001
            server_name=CRITIC, url_path="/v1/responses", json=body
        )
"""
)
NESTED = (
    HEAD
    + """\
def make_agent():
    class JudgeAgent(SimpleResponsesAPIAgent):
        async def run(self, body):
            return await self.server_client.post(  # SCA001
                server_name=self.config.critic.name, url_path="/v1/responses", json=body
            )

    return JudgeAgent
"""
)


def found(session: api.Session, *texts: str) -> list[list[int]]:
    return [[line for line, _, _ in blockers(session, text)] for text in texts]


def test_a_function_above_an_edit_is_reused_below_one_it_moves(session: api.Session) -> None:
    answers = found(session, STORED, STORED + "# below\n", "# above\n" + STORED, STORED)

    assert answers == [[9], [9], [10], [9]]


def test_an_edit_to_a_reused_functions_text_is_seen(session: api.Session) -> None:
    other = STORED.replace('"judge"', '"model"')  # the attribute names another server

    answers = found(session, STORED, STORED + "# below\n", other, STORED)

    assert answers == [[9], [9], [], [9]]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param(STORED, 9, id="an attribute another method stores on self"),
        pytest.param(IMPORTED, 11, id="an import inside another method"),
        pytest.param(NESTED, 7, id="a class a function defines"),
    ],
)
def test_a_reused_function_adds_what_walking_it_added(session: api.Session, text: str, line: int) -> None:
    """The edits leave the function that adds it alone: it is reused, and must add it all the same."""
    (session.root / "responses_api_agents/judge/names.py").write_text('CRITIC = "judge"\n')
    session.changed()
    calls_edited = text.replace("json=body", "json=[body]")

    answers = found(session, text, calls_edited, text + "\n\ndef later():\n    pass\n", text)

    assert answers == [[line]] * 4


def test_an_edit_to_a_binding_a_call_goes_through_is_seen(session: api.Session) -> None:
    """Calls are read through the method's local bindings (`post = ...; await post(...)`): an edit
    of the binding alone, the call's own line unchanged, changes what the call is."""
    bound = AGENT.replace(
        "        response = await self.server_client.post(",
        "        post = self.server_client.post\n        response = await post(",
    )
    elsewhere = bound.replace("post = self.server_client.post", "post = self.other_client.post")

    answers = found(session, bound, bound + "# below\n", elsewhere, bound)

    assert answers == [[9], [9], [], [9]]


def test_an_edit_to_a_module_constant_the_call_reads_is_seen(session: api.Session) -> None:
    other = AGENT.replace('CRITIC = "judge"', 'CRITIC = "model"')

    answers = found(session, AGENT, AGENT + "# below\n", other, AGENT)

    assert answers == [[8], [8], [], [8]]


def test_a_module_created_on_the_disk_is_where_an_import_leads_once_changed_says_files_came(
    session: api.Session,
) -> None:
    imported = AGENT.replace('CRITIC = "judge"', "from responses_api_agents.judge.names import CRITIC")
    names = session.root / "responses_api_agents/judge/names.py"

    missing = found(session, imported, imported + "# below\n")
    names.write_text('CRITIC = "judge"\n')
    session.changed()
    created = found(session, imported)
    names.unlink()
    session.changed()
    deleted = found(session, imported)

    assert (missing, created, deleted) == ([[], []], [[8]], [[]])


# every line a function's facts name: its own and its decorators', its calls' (over several lines,
# through a local binding), an import in it, an attribute it stores on `self`, and a class it
# defines with its constants, attributes and methods
EVERY_LINE = """\
import functools

ROUTE = "/v1/responses"


class JudgeAgent(SimpleResponsesAPIAgent):
    @functools.cache
    def settings(self):
        from responses_api_agents.judge.names import CRITIC

        self.critic = CRITIC
        return CRITIC

    async def run(self, body):
        post = self.server_client.post
        return await post(
            server_name=self.critic, url_path=ROUTE, json=body
        )


def make_agent(base):
    class Made(base):
        LIMIT = 3

        def model_post_init(self, context):
            self.name = "made"
            self.helper(context)

    return Made
"""


TWO_LINES = "# 1\n# 2\n"


@pytest.mark.parametrize(
    ("before", "after", "line"),
    [
        pytest.param(EVERY_LINE, TWO_LINES + EVERY_LINE, 27, id="down"),
        pytest.param(TWO_LINES + EVERY_LINE, EVERY_LINE, 25, id="up"),
    ],
)
def test_a_function_an_edit_moves_has_the_facts_it_would_have_if_walked_again(
    monkeypatch: pytest.MonkeyPatch, before: str, after: str, line: int
) -> None:
    """`line`: where `model_post_init` stands after the edit."""
    functions = Functions()
    extraction.extract(APP, before.encode(), functions)
    walked = []
    walk = extraction.ModuleExtractor._walked
    monkeypatch.setattr(extraction.ModuleExtractor, "_walked", lambda *args: walked.append(1) or walk(*args))

    kept = extraction.extract(APP, after.encode(), Functions(functions))

    assert walked == []  # all four functions reused
    assert kept == extraction.extract(APP, after.encode())
    assert kept.classes[1].methods[0].line == line


def test_a_method_and_a_function_of_the_same_text_are_walked_each() -> None:
    """Its first parameter is `self` in a method only."""
    method = CLASS_HEAD + "    async def run(self, body):\n        return body\n"
    function = method.replace("    async def run", "    pass\n\nif True:\n    async def run")
    functions = Functions()
    extraction.extract(APP, method.encode(), functions)

    kept = extraction.extract(APP, function.encode(), Functions(functions))

    assert kept == extraction.extract(APP, function.encode())
    assert (kept.functions[0].name, kept.functions[0].self_param) == ("run", None)


def test_an_edit_above_a_function_keeps_its_calls_as_bindings_give_them(
    session: api.Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The callee and an argument of the call are local bindings: substituted once, kept when
    the function moves, substituted again when it is edited."""
    bound = AGENT.replace(
        "        response = await self.server_client.post(",
        "        critic = CRITIC\n        post = self.server_client.post\n        response = await post(",
    ).replace("server_name=CRITIC", "server_name=critic")
    found(session, bound, bound + "# below\n")  # the second version keeps the functions
    worked_out = []
    inline = facts.inline
    monkeypatch.setattr(facts, "inline", lambda *args: worked_out.append(1) or inline(*args))

    moved = found(session, "# moved\n" + bound)
    kept = len(worked_out)
    edited = found(session, "# moved\n" + bound.replace("critic = CRITIC", 'critic = "model"'))

    assert (moved, edited) == ([[11]], [[]])
    assert kept == 0
    assert len(worked_out) > 0  # the edited function's calls


TWO_BOUND_CALLS = (
    CLASS_HEAD
    + """\
    async def run(self, body):
        critic = CRITIC
        model = "model"
        post = self.server_client.post
        send = self.other.post
        await post(server_name=critic, url_path="/v1/responses")  # SCA001
        await SECOND
"""
)


@pytest.mark.parametrize(
    "second",
    [
        pytest.param('post(server_name=model, url_path="/v1/responses")', id="other arguments"),
        pytest.param('send(server_name=critic, url_path="/v1/responses")', id="another callee"),
    ],
)
def test_two_calls_of_a_function_keep_their_own_bindings_through_an_edit_above(
    session: api.Session, second: str
) -> None:
    """Both calls read the function's local bindings; only the first is a self-call (the second
    names another server, or posts through another object)."""
    two = TWO_BOUND_CALLS.replace("SECOND", second)

    answers = found(session, two, two + "# below\n", "# moved\n" + two)

    assert answers == [[12], [12], [13]]

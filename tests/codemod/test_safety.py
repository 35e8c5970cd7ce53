"""`fix` never changes what a program does: shapes it must refuse, and bytes it must keep.

The refusals here are spelled out in code rather than as case folders because each is one
construct in many variants (every way a module can bind a name), or because the file is in an
encoding other than UTF-8 (which the formatter checks of the case folders do not read).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from selfcall_audit.config import DEFAULT_HELPER
from selfcall_audit.ftypes import Finding
from selfcall_audit.migrate.imports import Helper
from selfcall_audit.migrate.rewrite import rewrite_source

APP = "responses_api_agents/x/app.py"
HELPER = Helper.parse(DEFAULT_HELPER)
AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
{module}

class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        {before}response = await self.server_client.post(
            server_name=self.config.name,  # ourselves
            url_path="/v1/responses",
            json=body,
        )
        return await response.json()
"""
FIXED = """\
from selfcall_audit.inprocess import responses_in_process

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
{module}

class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        {before}response = await responses_in_process(
            self,  # ourselves
            url_path="/v1/responses",
            json=body,
        )
        return await response.json()
"""
REFUSED = re.compile(r"^\S*responses_api_agents/x/app\.py:\d+:\d+: SCA001 not rewritten: (.*)$", re.M)


def project(root: Path, source: bytes) -> Path:
    (root / "nemo_gym").mkdir(parents=True)
    (root / "nemo_gym" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text(  # the installed helper, as the bindings below import it
        '[project]\nname = "toy"\n\n[tool.selfcall-audit]\nhelper = "selfcall_audit.inprocess:responses_in_process"\n'
    )
    app = root / APP
    app.parent.mkdir(parents=True)
    app.write_bytes(source)
    return app


# the helper's name, bound by the module itself --------------------------------------------------

# construct: (the module-level code, which of its lines binds the name)
BINDINGS = {
    "assignment": ("responses_in_process = None", 0),
    "import alias rebound later": (
        "from selfcall_audit.inprocess import responses_in_process as call\ncall = print",
        1,
    ),
    "global": ("def reset():\n    global responses_in_process\n    responses_in_process = None", 1),
    "match capture": ("match 1:\n    case responses_in_process:\n        pass", 1),
    "match star": ("match []:\n    case [*responses_in_process]:\n        pass", 1),
    "match mapping rest": ("match {}:\n    case {**responses_in_process}:\n        pass", 1),
    "for target": ("for responses_in_process in ():\n    pass", 0),
    "with as": ("with open(__file__) as responses_in_process:\n    pass", 0),
    "except as": ("try:\n    pass\nexcept OSError as responses_in_process:\n    pass", 2),
    "function": ("def responses_in_process():\n    pass", 0),
    "class": ("class responses_in_process:\n    pass", 0),
    "walrus": ("if responses_in_process := None:\n    pass", 0),
    "tuple target": ("_, responses_in_process = 1, 2", 0),
    "del": ("from selfcall_audit.inprocess import responses_in_process\ndel responses_in_process", 1),
    "plain import": ("import responses_in_process", 0),
    "another module's name": ("from elsewhere import responses_in_process", 0),
}


@pytest.mark.parametrize("construct", sorted(BINDINGS))
def test_a_module_that_binds_the_helpers_name_is_left_alone(construct: str, tmp_path: Path, cli) -> None:
    binding, offset = BINDINGS[construct]
    source = AGENT.format(module=f"{binding}\n", before="").encode()
    app = project(tmp_path / "repo", source)
    name = "call" if " as call" in binding else "responses_in_process"

    result = cli("fix", "--no-cache", app.parents[2])

    assert app.read_bytes() == source
    assert REFUSED.findall(result.stdout) == [
        f"`{name}` already names something else here (line {2 + offset}); "
        "choose the helper's name with --helper MODULE:NAME"
    ]
    assert result.exit_code == 1


@pytest.mark.slow
@pytest.mark.parametrize("construct", ["match capture", "global", "import alias rebound later"])
def test_the_helpers_name_bound_by_the_module_as_a_real_command(
    construct: str, tmp_path: Path, command
) -> None:
    source = AGENT.format(module=f"{BINDINGS[construct][0]}\n", before="").encode()
    app = project(tmp_path / "repo", source)

    done = command("fix", "--no-cache", app.parents[2])

    assert app.read_bytes() == source
    assert "already names something else here" in done.stdout
    assert done.returncode == 1, done.stderr


def test_the_helper_imported_in_a_function_too_is_still_the_helper(tmp_path: Path, cli) -> None:
    module = "\n\ndef later():\n    from selfcall_audit.inprocess import responses_in_process\n\n    return responses_in_process\n"
    app = project(tmp_path / "repo", AGENT.format(module=module, before="").encode())

    result = cli("fix", "--no-cache", app.parents[2])

    assert app.read_bytes() == FIXED.format(module=module, before="").encode()
    assert result.exit_code == 0, result.stdout


# bytes outside the call, in every declared encoding ---------------------------------------------

ENCODED = {
    # name: (cookie, text before the call on its line, encoding, line ending)
    "latin-1": ("# -*- coding: latin-1 -*-\n", 'note = "café"; ', "latin-1", "\n"),
    "euc-jp": ("# coding: euc-jp\n", 'note = "日本語"; ', "euc-jp", "\n"),
    "euc-jp with CRLF": ("# coding: euc-jp\n", 'note = "日本語"; ', "euc-jp", "\r\n"),
    "unicode_escape": ("# coding: unicode_escape\n", "", "unicode_escape", "\n"),
    "cp1252 with CRLF": ("# coding: cp1252\n", 'note = "€"; ', "cp1252", "\r\n"),
}


def encode(text: str, encoding: str, newline: str) -> bytes:
    text = text.replace("\n", newline)
    return text.encode("ascii") if encoding == "unicode_escape" else text.encode(encoding)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ENCODED))
def test_every_byte_outside_the_call_is_kept_in_the_files_encoding(
    name: str, tmp_path: Path, command
) -> None:
    cookie, before, encoding, newline = ENCODED[name]
    source = encode(cookie + AGENT.format(module="", before=before), encoding, newline)
    expected = encode(cookie + FIXED.format(module="", before=before), encoding, newline)
    app = project(tmp_path / "repo", source)

    done = command("fix", "--no-cache", app.parents[2])
    again = command("fix", "--no-cache", app.parents[2])

    assert app.read_bytes() == expected
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Nothing to rewrite" in again.stdout and app.read_bytes() == expected
    scan = command("scan", "--no-cache", "--format", "json", app.parents[2])
    assert json.loads(scan.stdout)["findings"] == []


# what only the syntax tree shows, whatever the analysis reports ---------------------------------


def finding_at(source: str, needle: str) -> Finding:
    """An SCA001 finding for the call that starts at `needle`, as the analysis would report it."""
    lines = source.splitlines()
    line = next(i for i, text in enumerate(lines, 1) if needle in text)
    column = lines[line - 1].index(needle) + 1
    end_line = next(i for i in range(line, len(lines) + 1) if lines[i - 1].strip() == ")")
    end_column = lines[end_line - 1].index(")") + 2
    return Finding("SCA001", APP, line, column, end_line, end_column, "EchoAgent", "run", fixable=True)


def test_self_rebound_before_the_call_is_refused() -> None:
    source = AGENT.format(module="", before="self = body.agent\n        ")
    finding = finding_at(source, "self.server_client.post(")

    after, [outcome], _, _ = rewrite_source(source.encode(), [finding], HELPER)

    assert after == source.encode()
    assert outcome.reason == "`self` is rebound in the method (line 6); the helper needs the agent itself"


def test_the_first_rebinding_of_self_is_named() -> None:
    """The bindings' search meets them in no particular order: the line named is the first."""
    source = AGENT.format(module="", before="self = body.agent\n        self = body.other\n        ")
    finding = finding_at(source, "self.server_client.post(")

    _, [outcome], _, _ = rewrite_source(source.encode(), [finding], HELPER)

    assert outcome.reason == "`self` is rebound in the method (line 6); the helper needs the agent itself"


def test_a_nested_function_whose_parameter_is_self_is_refused() -> None:
    source = AGENT.format(module="", before="").replace(
        "        response = await", "        async def ask(self):\n            return await"
    )
    source = source.replace("\n            ", "\n                ").replace("\n        )", "\n            )")
    finding = finding_at(source, "self.server_client.post(")

    after, [outcome], _, _ = rewrite_source(source.encode(), [finding], HELPER)

    assert after == source.encode()
    assert outcome.reason == (
        "`self` at the call is not the method's own (a nested function, lambda or comprehension binds it)"
    )


def test_a_comprehension_that_binds_self_is_refused() -> None:
    source = AGENT.format(module="", before="").replace(
        "response = await self.server_client.post(", "response = [await self.server_client.post("
    )
    source = source.replace("        )\n        return", "        ) for self in body.agents]\n        return")
    lines = source.splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "self.server_client" in text)
    end = next(i for i, text in enumerate(lines, 1) if "for self in" in text)
    finding = Finding(
        "SCA001", APP, line, lines[line - 1].index("self.server_client") + 1, end, 10, "EchoAgent", "run"
    )

    after, [outcome], _, _ = rewrite_source(source.encode(), [finding], HELPER)

    assert after == source.encode()
    assert outcome.reason is not None and outcome.reason.startswith(
        "`self` at the call is not the method's own"
    )


def test_a_call_in_a_removed_argument_would_no_longer_run_and_is_refused() -> None:
    source = AGENT.format(module="", before="").replace("self.config.name,", "self.own_name(),")
    finding = finding_at(source, "self.server_client.post(")

    after, [outcome], _, _ = rewrite_source(source.encode(), [finding], HELPER)

    assert after == source.encode()
    assert outcome.reason == (
        "the server name or client comes from `self.own_name()`, which the rewrite would no longer run"
    )


# every binding that can reach the call --------------------------------------------------------

CALL = 'response = await self.server_client.post(server_name=target, url_path="/v1/responses", json=body)'
FLOW = """\
from contextlib import suppress

from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
{module}

class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body, names):
        target = self.config.name
{body}
        return await response.json()
"""


def _flow_case(body: str, module: str = "") -> tuple[str, Finding]:
    """The method with `body` (where CALL stands for the self-call) and the finding at the call."""
    source = FLOW.format(module=module, body=body.strip("\n").replace("CALL", CALL))
    lines = source.splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "self.server_client" in text)
    column = lines[line - 1].index("self.server_client") + 1
    end_column = lines[line - 1].index("json=body)") + len("json=body)") + 1
    return source, Finding("SCA001", APP, line, column, line, end_column, "EchoAgent", "run", fixable=True)


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ("        while names:\n            CALL\n            target = names.pop()", "rebound_in_loop"),
        (
            "        for name in names:\n            if name:\n                target = name\n                continue\n"
            "            CALL",
            "several_bindings",
        ),
        (
            "        try:\n            target = body['peer']\n        except KeyError:\n            pass\n        CALL",
            "several_bindings",
        ),
        (
            "        with suppress(KeyError):\n            target = body['peer']\n        CALL",
            "several_bindings",
        ),
        (
            "        match body:\n            case {'peer': target}:\n                pass\n        CALL",
            "several_bindings",
        ),
        ("        if not names:\n            del target\n        CALL", "maybe_unbound"),
        ("        target += '-2'\n        CALL", "not_a_plain_binding"),
        ("        return None\n        CALL", "unreachable"),
        ("        try:\n            CALL\n        finally:\n            target = None", "none"),
        ("        for name in names:\n            CALL\n        target = names", "none"),
        ("        if names:\n            body = names\n        CALL", "none"),
    ],
    ids=[
        "while",
        "continue",
        "try",
        "with",
        "match",
        "del",
        "augmented",
        "unreachable",
        "finally-after",
        "after-loop",
        "other-name",
    ],
)
def test_a_rewrite_needs_one_binding_of_the_server_name_on_every_path(body: str, kind: str) -> None:
    source, finding = _flow_case(body)

    after, [outcome], _, _ = rewrite_source(source.encode(), [finding], HELPER)

    assert (outcome.blocker.kind if outcome.blocker else "none") == kind
    assert (after == source.encode()) == (kind != "none")


@pytest.mark.parametrize(
    ("module", "server", "kind"),
    [
        ("TARGET = 'x_agent'\n", "TARGET", "none"),
        ("TARGET = 'x_agent'\nTARGET = 'policy_model'\n", "TARGET", "several_bindings"),
        ("", "TARGET", "maybe_unbound"),
        (
            "TARGET = 'x_agent'\n\ndef retarget():\n    global TARGET\n    TARGET = 'policy_model'\n",
            "TARGET",
            "rebound_by_global",
        ),
    ],
    ids=["once", "twice", "never", "global-statement"],
)
def test_a_global_server_name_is_bound_once_in_its_module(module: str, server: str, kind: str) -> None:
    source, finding = _flow_case("        CALL", module)
    source = source.replace("server_name=target", f"server_name={server}")

    after, [outcome], _, _ = rewrite_source(source.encode(), [finding], HELPER)

    assert (outcome.blocker.kind if outcome.blocker else "none") == kind
    assert (after == source.encode()) == (kind != "none")


@pytest.mark.parametrize(
    ("module", "kind", "line"),
    [
        ("TARGET = 'x_agent'\nTARGET = 'policy_model'\nTARGET = 'judge'\n", "several_bindings", 6),
        (
            "TARGET = 'x_agent'\n\ndef one():\n    global TARGET\n    TARGET = 'a'\n\n"
            "def two():\n    global TARGET\n    TARGET = 'b'\n",
            "rebound_by_global",
            7,
        ),
    ],
    ids=["the last of three bindings", "the first of two global statements"],
)
def test_the_line_a_global_blocker_names(module: str, kind: str, line: int) -> None:
    """The module's bindings and `global` statements are met in no particular order: several
    bindings name the last one, as the bindings are read in the order of their lines, and a
    rebinding through `global` names the first function's."""
    source, finding = _flow_case("        CALL", module)
    source = source.replace("server_name=target", "server_name=TARGET")

    _, [outcome], _, _ = rewrite_source(source.encode(), [finding], HELPER)

    assert outcome.blocker is not None
    assert (outcome.blocker.kind, outcome.blocker.line) == (kind, line)


def test_a_comprehension_target_at_the_call_is_refused() -> None:
    source, finding = _flow_case(
        f"        response = [{CALL.removeprefix('response = ')} for target in names]"
    )

    after, [outcome], _, _ = rewrite_source(source.encode(), [finding], HELPER)

    assert outcome.blocker is not None and outcome.blocker.kind == "bound_around_the_call"
    assert after == source.encode()


@pytest.mark.parametrize(
    ("written", "merged"),
    [
        ("(\n    Alpha,\n    Beta\n)", "(\n    Alpha,\n    Beta,\n    responses_in_process\n)"),
        ("(\n    Alpha\n)", "(\n    Alpha,\n    responses_in_process\n)"),
        (
            "(Alpha,\n                             Beta)",
            "(Alpha,\n                             Beta,\n                             responses_in_process)",
        ),
        ("Alpha, \\\n    Beta", "Alpha, \\\n    Beta, \\\n    responses_in_process"),
    ],
    ids=["one-per-line", "one-name", "hanging", "backslash"],
)
def test_a_name_added_after_the_last_one_keeps_its_lines_indentation(written: str, merged: str) -> None:
    """Without a trailing comma too: the new name takes a line of its own, indented as the one before."""
    module = f"from {HELPER.module} import {written}\n"
    source = AGENT.format(module=module, before="")
    finding = finding_at(source, "self.server_client.post(")

    after, [outcome], _, _ = rewrite_source(source.encode(), [finding], HELPER)

    assert outcome.reason is None
    assert f"from {HELPER.module} import {merged}\n" in after.decode()

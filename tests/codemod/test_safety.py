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
        return response
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
        return response
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
    return Finding("SCA001", APP, line, column, end_line, end_column, "m", "EchoAgent", "run", fixable=True)


def test_self_rebound_before_the_call_is_refused() -> None:
    source = AGENT.format(module="", before="self = body.agent\n        ")
    finding = finding_at(source, "self.server_client.post(")

    after, [outcome], _ = rewrite_source(source.encode(), [finding], HELPER)

    assert after == source.encode()
    assert outcome.reason == "`self` is rebound in the method (line 6); the helper needs the agent itself"


def test_a_nested_function_whose_parameter_is_self_is_refused() -> None:
    source = AGENT.format(module="", before="").replace(
        "        response = await", "        async def ask(self):\n            return await"
    )
    source = source.replace("\n            ", "\n                ").replace("\n        )", "\n            )")
    finding = finding_at(source, "self.server_client.post(")

    after, [outcome], _ = rewrite_source(source.encode(), [finding], HELPER)

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
        "SCA001", APP, line, lines[line - 1].index("self.server_client") + 1, end, 10, "m", "EchoAgent", "run"
    )

    after, [outcome], _ = rewrite_source(source.encode(), [finding], HELPER)

    assert after == source.encode()
    assert outcome.reason is not None and outcome.reason.startswith(
        "`self` at the call is not the method's own"
    )


def test_a_call_in_a_removed_argument_would_no_longer_run_and_is_refused() -> None:
    source = AGENT.format(module="", before="").replace("self.config.name,", "self.own_name(),")
    finding = finding_at(source, "self.server_client.post(")

    after, [outcome], _ = rewrite_source(source.encode(), [finding], HELPER)

    assert after == source.encode()
    assert outcome.reason == (
        "the server name or client comes from `self.own_name()`, which the rewrite would no longer run"
    )

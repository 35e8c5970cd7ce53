"""Edits a file's facts cannot see: a one-file run after a change to comment lines alone answers
without extracting the file's facts, and whatever it takes for such an edit gives the same facts."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_annotations import NOT_COPIED

from selfcall_audit.analysis.extract import extract
from selfcall_audit.orchestration.comments import comments_outside_strings, outline

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

AGENT = b'''"""An agent."""
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent

# the route it posts to
ROUTE = "/v1/responses"


class Agent(SimpleResponsesAPIAgent):
    async def run(self, body):
        # post it
        return await self.server_client.post(  # SCA001
            server_name=self.config.name,
            # the route
            url_path=ROUTE,
            json=body,
        )
'''


def comments_alone(old: bytes, new: bytes) -> bool:
    """What a run takes for an edit to comment lines alone."""
    shape, lines = outline(new)
    return outline(old)[0] == shape and comments_outside_strings(new, lines)


@pytest.mark.parametrize(
    "old, new",
    [
        (b"# the route it posts to", b"# another comment, quotes \"\"\" and ''' and a \\"),
        (b"        # post it", b"  # moved left, and longer"),
        (b"            # the route", b"#"),
        (
            b"            json=body,\n        )\n",
            b"            json=body,\n        )\n# one more\n\n   # and more\n",
        ),
    ],
)
def test_a_change_to_comment_lines_alone_is_told_from_the_bytes(old: bytes, new: bytes) -> None:
    edited = AGENT.replace(old, new)

    assert edited != AGENT and comments_alone(AGENT, edited)
    assert extract("app.py", edited) == extract("app.py", AGENT)


@pytest.mark.parametrize(
    "old, new",
    [
        (b"# the route it posts to", b"# noqa: SCA001"),  # the facts record noqa lines
        (b"# the route it posts to", b"# \xff not UTF-8"),
        (b"# the route it posts to", b"# a NUL \x00"),
        (b'"""An agent."""\n', b'"""An agent."""\n# -*- coding: latin-1 -*-\n'),  # a line moved, and line 2
        (b"# the route it posts to\n", b"# the route it posts to\n# a new line moves the ones below\n"),
        (b"# the route it posts to\n", b"# the route it posts to\r"),  # a lone \r ends a line
        (b"        # post it", b"        pass  # post it"),  # code now
        (b"ROUTE = ", b"ROUTE  = "),
    ],
)
def test_any_other_edit_is_not_taken_for_one_to_comments(old: bytes, new: bytes) -> None:
    assert not comments_alone(AGENT, AGENT.replace(old, new))


def test_a_file_whose_strings_hold_a_line_like_a_comment_is_never_taken_for_a_comment_edit() -> None:
    """Which version of such a line is a comment cannot be told from the bytes: the file's facts
    are extracted again, whatever its edit."""
    source = AGENT + b'DOC = """\n# not a comment: part of a value\n"""\n'

    assert not comments_alone(source, source.replace(b"part of a value", b"another value"))
    closing = AGENT + b'DOC = """\n# its last line"""\n'
    assert not comments_alone(closing, closing.replace(b"its last line", b"another"))
    assert not comments_alone(source, source.replace(b"# the route it posts to", b"# another"))


def test_the_first_two_lines_keep_their_comments_text() -> None:
    """A coding declaration may stand there: its text decides how the file decodes."""
    source = b"#!/usr/bin/env python\n# -*- coding: utf-8 -*-\nx = 1\n"

    assert not comments_alone(source, source.replace(b"utf-8", b"latin-1"))
    assert not comments_alone(source, source.replace(b"python", b"python3"))


def test_a_file_that_does_not_parse_is_never_taken_for_a_comment_edit() -> None:
    source = b"x = 1\ny = 2\n# a comment\ndef broken(:\n"

    assert not comments_alone(source, source.replace(b"a comment", b"another"))


def test_a_line_of_a_string_in_a_decorator_lies_in_a_string() -> None:
    """A definition's node starts at its `def`: its decorators' lines are above it."""
    source = b'x = 1\ny = 2\n@decorated("""\n# a decorator\'s value\n""")\ndef f():\n    pass\n'

    assert not comments_outside_strings(source, outline(source)[1])
    other = source.replace(b'"""\n# a', b'"""\n  a')
    assert comments_outside_strings(other, outline(other)[1])


def test_a_comment_inside_an_f_strings_braces_lies_in_a_string() -> None:
    """Python 3.12 reads comments there; before, the file does not parse: declined either way."""
    source = b'x = 1\ny = 2\nz = f"""{\n    # which\n    x\n}"""\n'

    assert not comments_alone(source, source.replace(b"# which", b"# what"))


_COMMENT_LINE = re.compile(rb"^[ \t\f]*#[^\r\n]*$", re.MULTILINE)
_TEXTS = [b"# changed", b'# """', b"# '''", b"# {x} \\", b"# type: ignore", b"#", b"   # \xc3\xa9t\xc3\xa9"]


def _comment_edits(source: bytes) -> list[bytes]:
    """Each comment line's text replaced, one line at a time, by each of `_TEXTS`; and comment
    lines appended."""
    edits = [source + b"# appended\n", source.rstrip(b"\n") + b"\n\n# appended\n   \n"]
    for match in list(_COMMENT_LINE.finditer(source))[:8]:
        edits += [source[: match.start()] + text + source[match.end() :] for text in _TEXTS]
    return edits


def test_every_edit_taken_for_one_to_comments_leaves_the_facts_as_they_were() -> None:
    """Over every fixture module, and a module with a comment line in each place a string can
    hold one: whatever edit the check lets through has the facts it had."""
    sources = {path.relative_to(FIXTURES).as_posix(): path.read_bytes() for path in FIXTURES.rglob("*.py")}
    sources["strings.py"] = AGENT + (
        b'\nS = ("a"\n     # between\n     "b")\nB = b"""\n# bytes\n"""\nD = """\n# a value\n"""\n'
        b'E = """\n# its last line"""\n'
        b'@decorated("""\n# a decorator\'s value\n""")\ndef f():\n    pass\n'
    )
    taken = 0
    for rel, source in sorted(sources.items()):
        before = extract(rel, source)
        for edited in _comment_edits(source):
            if comments_alone(source, edited):
                taken += 1
                assert extract(rel, edited) == before, (rel, edited)
    assert taken > 100  # the check lets most of them through: it is tried, not bypassed


WARM_ONE_FILE = """\
import sys
from pathlib import Path

from selfcall_audit.config import load_settings
from selfcall_audit.orchestration.project import Project

root = Path(sys.argv[1])
report = Project(root, load_settings(root)).analyze([root / sys.argv[2]])
loaded = sorted(m for m in sys.modules if m.startswith(("selfcall_audit.analysis.", "selfcall_audit.orchestration.")))
print(len(report.findings), *loaded)
"""


def test_a_one_file_run_after_a_comment_edit_does_not_extract_the_file_again(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo-gym", root, ignore=NOT_COPIED)
    rel = "responses_api_agents/simple_agent/app.py"
    app = root / rel

    def run(path: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", WARM_ONE_FILE, str(root), path], capture_output=True, text=True, check=True
        )
        return done.stdout.split()

    whole = run(".")  # a whole scan stores the result a one-file run starts from
    app.write_bytes(app.read_bytes() + b"# reviewed\n")
    commented = run(rel)
    app.write_bytes(app.read_bytes().replace(b"# reviewed\n", b"x = 1  # code\n"))
    coded = run(rel)

    assert commented[0] == coded[0] != "0" and int(whole[0]) > int(commented[0])
    assert "selfcall_audit.analysis.extract" not in commented
    assert "selfcall_audit.analysis.extract" in coded  # a code edit is extracted, as before
    # the last result holds: nothing of the resolution loads (the stages, the shared evaluation)
    for module in ("stages", "resolving", "indexes", "targets"):
        assert f"selfcall_audit.orchestration.{module}" not in commented
        assert f"selfcall_audit.orchestration.{module}" in coded
    assert "selfcall_audit.analysis.resolve" not in commented

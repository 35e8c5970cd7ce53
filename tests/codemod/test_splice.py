"""The splice writes the new text's changed characters and copies every other byte, in UTF-8 as in
the byte-by-byte path other encodings take: the bytes are exactly the new text's."""

from __future__ import annotations

import codecs
import re

from hypothesis import assume, example, given
from hypothesis import strategies as st

from selfcall_audit.migrate.fixes import moved
from selfcall_audit.migrate.splice import spliced

# ASCII, two-, three- and four-byte characters, and line ends
TEXT = st.text(alphabet=st.sampled_from("ab (=\n\r\té日😀\u2028"), max_size=60)
EDITS = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 8), TEXT), max_size=4)


def edited(text: str, edits: list[tuple[int, int, str]]) -> str:
    for start, length, replacement in edits:
        start = min(start, len(text))
        text = text[:start] + replacement + text[start + length :]
    return text


@given(TEXT, EDITS, st.sampled_from(["utf-8", "UTF8", "euc-jp"]), st.booleans())
def test_the_bytes_are_the_new_texts(
    old: str, edits: list[tuple[int, int, str]], encoding: str, bom: bool
) -> None:
    """With or without a byte-order mark, in UTF-8 (however its name is spelled) and in another
    encoding that holds every character here but the emoji and the separator."""
    new = edited(old, edits)
    if encoding == "euc-jp":
        old, new = (t.replace("😀", "x").replace("\u2028", "y") for t in (old, new))
    prefix = codecs.BOM_UTF8 if bom and encoding != "euc-jp" else b""

    result = spliced(prefix + old.encode(encoding), encoding, old, old, new).data

    assert result == prefix + new.encode(encoding)


def where(old: str, new: str, line: int, column: int) -> tuple[int, int]:
    return moved(spliced(old.encode(), "utf-8", old, old, new).moves(), (line, column))


def test_a_position_moves_with_the_lines_and_columns_before_it() -> None:
    old = "import a\n\nclass A:\n    def f(self):\n        x = 1\n        y = await post(x)\n"
    added_import = old.replace("import a\n", "import a\nfrom h import call\n")
    removed_binding = old.replace("        x = 1\n", "")
    longer_target = old.replace("        y = await", "        result = await")

    assert where(old, added_import, 6, 19) == (7, 19)
    assert where(old, removed_binding, 6, 19) == (5, 19)
    assert where(old, longer_target, 6, 24) == (6, 29)
    assert where(old, old, 6, 19) == (6, 19)


def test_a_rewritten_call_is_where_its_new_text_starts() -> None:
    old = "async def f(self):\n    return await self.client.post(\n        url='/v1/responses',\n    )\n"
    new = old.replace("self.client.post(\n        url=", "call(\n        self,\n        url=")

    assert where(old, new, 2, 18) == (2, 18)  # the call started at `self.client.post`
    assert where(old, new, 3, 9) == (4, 9)  # the keyword now a line further down


def test_lines_end_where_python_ends_them() -> None:
    """`\\r\\n` and a lone `\\r` end a line; a form feed and a line separator do not."""
    old = "a = 1\r\nb = 2\rc\f = 3\u2028 + 4\nd = 5\n"
    new = "z = 0\n" + old

    assert where(old, new, 3, 1) == (4, 1)
    assert where(old, new, 4, 3) == (5, 3)


def line_ends(text: str) -> int:
    return len(re.findall("\r\n|\r|\n", text))


def keeps_line_ends(text: str, edits: list[tuple[int, int, str]]) -> bool:
    """Does each edit leave the line ends around it as they were: join no lone `\r` to a `\n`
    and split no `\r\n`? (A rewrite replaces code between line ends, never half of one.)"""
    for start, length, replacement in edits:
        start = min(start, len(text))
        after = text[:start] + replacement + text[start + length :]
        if line_ends(after) != line_ends(text) - line_ends(text[start : start + length]) + line_ends(
            replacement
        ):
            return False
        text = after
    return True


@given(TEXT, EDITS)
# the character comparison would part a line end the edit replaces whole: `\r|==` made `\r|\n`,
# and `=|\n` made `\r|\n`; each edit is widened to the whole line end
@example("\r==", [(0, 3, "\r\n")])
@example("=\n", [(0, 2, "\r\n")])
def test_positions_keep_their_order(old: str, edits: list[tuple[int, int, str]]) -> None:
    assume(keeps_line_ends(old, edits))
    new = edited(old, edits)
    moves = spliced(old.encode(), "utf-8", old, old, new).moves()
    lines = old.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    positions = [
        (number, column) for number, text in enumerate(lines, 1) for column in range(1, len(text) + 2)
    ]

    found = [moved(moves, position) for position in positions]

    assert found == sorted(found)
    new_lines = re.split("\r\n|\r|\n", new)
    assert all(1 <= column <= len(new_lines[line - 1]) + 1 for line, column in found)  # in the new text

"""The splice writes the new text's changed characters and copies every other byte, in UTF-8 as in
the byte-by-byte path other encodings take: the bytes are exactly the new text's."""

from __future__ import annotations

import codecs

from hypothesis import given
from hypothesis import strategies as st

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

    result = spliced(prefix + old.encode(encoding), encoding, old, old, new)

    assert result == prefix + new.encode(encoding)

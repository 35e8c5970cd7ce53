"""The rewritten file's bytes: the original bytes wherever the text did not change.

libcst re-encodes a whole module (a `# coding: unicode_escape` file comes out on one line) and
drops a leading form feed, so its output is never written as it is. The new text is compared
with the old, and only the characters that differ are encoded; every other byte is copied.
"""

from __future__ import annotations

import codecs
import difflib
from collections.abc import Iterable, Sequence

_BOM = codecs.BOM_UTF8


class SpliceError(Exception):
    """The new text cannot be put back in the file's encoding with every other byte kept."""


def spliced(source: bytes, encoding: str, old: str, parsed: str, new: str) -> bytes:
    """`source` (whose text is `old`) changed where libcst's `parsed` text became `new`."""
    prefix, body, codec = (_BOM, source[3:], "utf-8") if source.startswith(_BOM) else (b"", source, encoding)
    edits = [
        (_map(start, old, parsed), _map(end, old, parsed), text) for start, end, text in _edits(parsed, new)
    ]
    offsets = _byte_offsets(body, old, codec, [p for start, end, _ in edits for p in (start, end)])
    pieces, expected, at, at_char = [prefix], [], 0, 0
    for start, end, text in edits:
        pieces += [body[at : offsets[start]], _encode(text, codec)]
        expected += [old[at_char:start], text]
        at, at_char = offsets[end], end
    pieces.append(body[at:])
    expected.append(old[at_char:])
    result = b"".join(pieces)
    try:
        same = result[len(prefix) :].decode(codec) == "".join(expected)
    except UnicodeDecodeError:
        same = False
    if not same:
        raise SpliceError(f"the rewrite cannot be encoded in {encoding} without changing other bytes")
    return result


def _edits(a: str, b: str) -> list[tuple[int, int, str]]:
    """(start, end, replacement) in `a` that make `b`: lines first, then characters within them."""
    old_lines, new_lines = a.splitlines(keepends=True), b.splitlines(keepends=True)
    old_starts, new_starts = _starts(old_lines), _starts(new_lines)
    edits = []
    lines = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in lines.get_opcodes():
        if tag == "equal":
            continue
        base, old_block = old_starts[i1], a[old_starts[i1] : old_starts[i2]]
        new_block = b[new_starts[j1] : new_starts[j2]]
        chars = difflib.SequenceMatcher(None, old_block, new_block, autojunk=False)
        for char_tag, k1, k2, l1, l2 in chars.get_opcodes():
            if char_tag != "equal":
                edits.append((base + k1, base + k2, new_block[l1:l2]))
    return edits


def _starts(lines: Sequence[str]) -> list[int]:
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    return starts


def _map(position: int, old: str, parsed: str) -> int:
    """A position in libcst's text as a position in the file's text; they differ at most in one
    place (libcst drops a leading form feed), and the rewrite must not touch it."""
    if old == parsed:
        return position
    prefix = _common(old, parsed)
    suffix = _common(old[prefix:][::-1], parsed[prefix:][::-1])
    if position <= prefix:
        return position
    if position >= len(parsed) - suffix:
        return position + len(old) - len(parsed)
    raise SpliceError("the rewrite touches text libcst does not keep as it was")


def _common(a: str, b: str) -> int:
    """The length of the common start of `a` and `b`."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _byte_offsets(body: bytes, text: str, codec: str, positions: Iterable[int]) -> dict[int, int]:
    """The byte offset in `body` where each character position of `text` starts."""
    wanted = sorted(set(positions))
    if body.isascii() and len(body) == len(text):
        return {p: p for p in wanted}
    decoder = codecs.getincrementaldecoder(codec)()
    offsets: dict[int, int] = {}
    chars = 0
    pending = iter(wanted)
    target = next(pending, None)
    for index in range(len(body) + 1):
        while target is not None and chars >= target:
            if chars > target:
                raise SpliceError("a changed character does not start on a byte boundary")
            offsets[target] = index
            target = next(pending, None)
        if target is None or index == len(body):
            break
        chars += len(decoder.decode(body[index : index + 1]))
    if target is not None:
        raise SpliceError("the rewrite reaches past the end of the file")
    return offsets


def _encode(text: str, codec: str) -> bytes:
    """ASCII as itself where the codec reads it back so (an escape codec would write `\\n`)."""
    if "escape" not in codecs.lookup(codec).name:
        return text.encode(codec)
    out = []
    for char in text:
        plain = char.encode("ascii", "ignore")
        try:
            out.append(plain if plain and plain.decode(codec) == char else char.encode(codec))
        except UnicodeDecodeError:
            out.append(char.encode(codec))
    return b"".join(out)

"""The rewritten file's bytes: the original bytes wherever the text did not change.

libcst re-encodes a whole module (a `# coding: unicode_escape` file comes out on one line) and
drops a leading form feed, so its output is never written as it is. The new text is compared
with the old, and only the characters that differ are encoded; every other byte is copied.
"""

from __future__ import annotations

import bisect
import codecs
import difflib
import re
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from .fixes import Move, Position
from .linediff import Matcher
from .region import Region, touches

_BOM = codecs.BOM_UTF8


# Where Python's tokenizer ends a line (a form feed or a Unicode separator does not).
_LINE_END = re.compile(r"\r\n|\r|\n")


class SpliceError(Exception):
    """The new text cannot be put back in the file's encoding with every other byte kept."""


class Spliced(NamedTuple):
    """The file's new bytes, its old and new text, and the edits (in order, in `old`) between them."""

    data: bytes
    old: str
    new: str
    edits: list[tuple[int, int, str]]

    def moves(self) -> tuple[Move, ...]:
        """The edits as lines and columns of the old and the new text (`fixes.moved` reads them)."""
        old_at, new_at = _positions(self.old), _positions(self.new)
        moves, shift = [], 0
        for start, end, text in self.edits:
            new_start = start + shift
            shift += len(text) - (end - start)
            moves.append((old_at(start), old_at(end), new_at(new_start), new_at(end + shift)))
        return tuple(moves)


def spliced(
    source: bytes, encoding: str, old: str, parsed: str, new: str, read: Region | None = None
) -> Spliced:
    """`source` (whose text is `old`) changed where libcst's `parsed` text became `new`. `read`:
    the text libcst was given, when definitions of `old` were blanked in it (see `region`); a
    change that reaches into one is refused."""
    prefix, body, codec = (_BOM, source[3:], "utf-8") if source.startswith(_BOM) else (b"", source, encoding)
    given = old if read is None else read.text
    to_given = _Mapping(given, parsed)
    edits = [(to_given(start), to_given(end), text) for start, end, text in _edits(parsed, new)]
    if read is not None:
        if touches([(start, end) for start, end, _ in edits], read.blanked):
            raise SpliceError("the rewrite reaches into a definition it was not meant to read")
        edits = [(read.original(start), read.original(end), text) for start, end, text in edits]
    offsets = _byte_offsets(body, old, codec, [p for start, end, _ in edits for p in (start, end)])
    pieces, expected, at, at_char = [prefix], [], 0, 0
    for start, end, text in edits:
        pieces += [body[at : offsets[start]], _encode(text, codec)]
        expected += [old[at_char:start], text]
        at, at_char = offsets[end], end
    pieces.append(body[at:])
    expected.append(old[at_char:])
    result, text = b"".join(pieces), "".join(expected)
    try:
        same = result[len(prefix) :].decode(codec) == text
    except UnicodeDecodeError:
        same = False
    if not same:
        raise SpliceError(f"the rewrite cannot be encoded in {encoding} without changing other bytes")
    return Spliced(result, old, text, edits)


def _positions(text: str) -> Callable[[int], Position]:
    """The line and column of an offset in `text`."""
    starts = [0, *(match.end() for match in _LINE_END.finditer(text))]

    def position(offset: int) -> Position:
        line = bisect.bisect_right(starts, offset)
        return line, offset - starts[line - 1] + 1

    return position


# Characters a changed block may hold for the character-level comparison, which takes time that
# grows with the product of the two sides' lengths; a larger block (a call carrying a 35 KB prompt)
# is one edit between its common start and end, whose unchanged characters are encoded again.
MAX_COMPARED_CHARS = 4_000


def _edits(a: str, b: str) -> list[tuple[int, int, str]]:
    """(start, end, replacement) in `a` that make `b`: lines first, then characters within them.

    The lines both texts start and end with are set aside first (one rewrite in a 40,000-line file
    compares a few lines), and lines found once in each anchor the comparison (`linediff`), which
    keeps it linear when a file's hundreds of rewrites spread the changes over all of it."""
    old_lines, new_lines = a.splitlines(keepends=True), b.splitlines(keepends=True)
    head = _common(old_lines, new_lines)
    tail = _common(old_lines[head:][::-1], new_lines[head:][::-1])
    old_lines, new_lines = old_lines[head : len(old_lines) - tail], new_lines[head : len(new_lines) - tail]
    start = sum(map(len, a.splitlines(keepends=True)[:head]))
    old_starts, new_starts = _starts(old_lines, start), _starts(new_lines, start)
    edits = []
    for tag, i1, i2, j1, j2 in Matcher(old_lines, new_lines).get_opcodes():
        if tag == "equal":
            continue
        base, old_block = old_starts[i1], a[old_starts[i1] : old_starts[i2]]
        new_block = b[new_starts[j1] : new_starts[j2]]
        edits += [(base + k1, base + k2, text) for k1, k2, text in _block_edits(old_block, new_block)]
    return edits


def _block_edits(old: str, new: str) -> list[tuple[int, int, str]]:
    """The character edits that make one changed block of lines the other, each taking whole
    line ends (see `_whole_line_ends`)."""
    head = _common(old, new)
    tail = _common(old[head:][::-1], new[head:][::-1])
    old_end, new_end = len(old) - tail, len(new) - tail
    if max(old_end - head, new_end - head) > MAX_COMPARED_CHARS:
        spans = [(head, old_end, head, new_end)]
    else:
        chars = difflib.SequenceMatcher(None, old[head:old_end], new[head:new_end], autojunk=False)
        spans = [
            (head + k1, head + k2, head + l1, head + l2)
            for tag, k1, k2, l1, l2 in chars.get_opcodes()
            if tag != "equal"
        ]
    return [(k1, k2, new[l1:l2]) for k1, k2, l1, l2 in _whole_line_ends(old, new, spans)]


def _whole_line_ends(
    old: str, new: str, spans: list[tuple[int, int, int, int]]
) -> list[tuple[int, int, int, int]]:
    """The edits `spans` (of `old`, then of `new`), each widened by the `\r` or `\n` beside it
    that it would otherwise part from its other half (`\r|\n` made `\r\n`, or `\r\n` cut in
    two), and merged where they then meet: an edit's ends stay where both texts end a line alike,
    so the lines and columns around it (`Spliced.moves`) mean the same in both."""
    widened: list[tuple[int, int, int, int]] = []
    for k1, k2, l1, l2 in spans:
        if k1 and old[k1 - 1] == "\r" and "\n" in (old[k1 : k1 + 1], new[l1 : l1 + 1]):
            k1, l1 = k1 - 1, l1 - 1  # the `\r` before it is in both texts
        if old[k2 : k2 + 1] == "\n" and "\r" in (old[k2 - 1 : k2], new[l2 - 1 : l2]):
            k2, l2 = k2 + 1, l2 + 1  # and so is the `\n` after it
        if widened and k1 <= widened[-1][1]:
            k1, _, l1, _ = widened.pop()
        widened.append((k1, k2, l1, l2))
    return widened


def _starts(lines: Sequence[str], start: int = 0) -> list[int]:
    starts = [start]
    for line in lines:
        starts.append(starts[-1] + len(line))
    return starts


class _Mapping:
    """Positions in libcst's text as positions in the file's text; they differ at most in one
    place (libcst drops a leading form feed), and the rewrite must not touch it. The place is
    found once, not for each edit."""

    def __init__(self, old: str, parsed: str):
        self.same = old == parsed
        self.prefix = _common(old, parsed) if not self.same else len(old)
        suffix = _common(old[self.prefix :][::-1], parsed[self.prefix :][::-1]) if not self.same else 0
        self.suffix_start = len(parsed) - suffix
        self.shift = len(old) - len(parsed)

    def __call__(self, position: int) -> int:
        if self.same or position <= self.prefix:
            return position
        if position >= self.suffix_start:
            return position + self.shift
        raise SpliceError("the rewrite touches text libcst does not keep as it was")


def _common(a: Sequence, b: Sequence) -> int:
    """The length of the common start of `a` and `b` (strings or lists of lines), found by halving:
    slices compare in C, so a 35 KB line costs a few comparisons, not one step per character."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _byte_offsets(body: bytes, text: str, codec: str, positions: Iterable[int]) -> dict[int, int]:
    """The byte offset in `body` where each character position of `text` starts."""
    wanted = sorted(set(positions))
    if body.isascii() and len(body) == len(text):
        return {p: p for p in wanted}
    if codecs.lookup(codec).name == "utf-8" and text.encode("utf-8", "replace") == body:
        # UTF-8 encodes each character alone, so one starts after the bytes of the text before it:
        # worked out in C, where the loop below decodes byte by byte (NeMo Gym's 24 rewritten
        # files: 22 ms of splicing against 118)
        return _utf8_offsets(text, wanted)
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


def _utf8_offsets(text: str, wanted: list[int]) -> dict[int, int]:
    """`_byte_offsets` of `wanted` (sorted) in the UTF-8 bytes of `text`."""
    if wanted and wanted[-1] > len(text):
        raise SpliceError("the rewrite reaches past the end of the file")
    offsets: dict[int, int] = {}
    at = start = 0
    for position in wanted:
        at += len(text[start:position].encode("utf-8", "replace"))
        offsets[position] = at
        start = position
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

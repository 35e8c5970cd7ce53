"""Two versions of a file compared line by line for the splice, in time that grows with the
file, not its square.

difflib's `SequenceMatcher` takes the longest block the two sides share, then does the same on
each side of it. When a rewrite changes hundreds of places spread over a file, the longest block
is one stretch between two of them, and every search reads what is left of the file: the
comparison grows with the file times the number of changes. Here, as in patience diff, lines
that occur once on each side (a method's `def` line, most lines of real code) are matched first,
in the order both sides keep them; difflib compares only the stretches between two such lines,
which a rewrite keeps short. Where no line is unique, the stretch is difflib's alone.
"""

from __future__ import annotations

import bisect
import difflib
from collections import Counter
from collections.abc import Iterator, Sequence

Block = tuple[int, int, int]  # a[i:i + size] == b[j:j + size]


class Matcher(difflib.SequenceMatcher):
    """difflib's matcher of two lists of lines, its matching blocks found as the module says;
    `get_opcodes` and `get_grouped_opcodes` read them as difflib's own."""

    def __init__(self, a: Sequence, b: Sequence):
        super().__init__(None, a, b)
        self._blocks: list[difflib.Match] | None = None

    def get_matching_blocks(self) -> list[difflib.Match]:
        if self._blocks is None:
            self._blocks = [difflib.Match(*block) for block in _merged(matching_blocks(self.a, self.b))]
            self._blocks.append(difflib.Match(len(self.a), len(self.b), 0))
        return self._blocks


def matching_blocks(a: Sequence, b: Sequence) -> list[Block]:
    """The blocks both sides share, in order (without difflib's closing empty block)."""
    found: list[Block] = []
    pending = [(0, len(a), 0, len(b))]  # stretches left to compare
    while pending:
        alo, ahi, blo, bhi = pending.pop()
        head = 0
        while alo + head < ahi and blo + head < bhi and a[alo + head] == b[blo + head]:
            head += 1
        if head:
            found.append((alo, blo, head))
            alo, blo = alo + head, blo + head
        tail = 0
        while alo < ahi - tail and blo < bhi - tail and a[ahi - tail - 1] == b[bhi - tail - 1]:
            tail += 1
        anchors = _anchors(a, b, alo, ahi - tail, blo, bhi - tail)
        if anchors:
            later = []
            i, j = alo, blo
            for anchor_i, anchor_j in anchors:
                later.append((i, anchor_i, j, anchor_j))
                found.append((anchor_i, anchor_j, 1))
                i, j = anchor_i + 1, anchor_j + 1
            later.append((i, ahi - tail, j, bhi - tail))
            pending.extend(reversed(later))
        elif alo < ahi - tail and blo < bhi - tail:
            matcher = difflib.SequenceMatcher(None, a[alo : ahi - tail], b[blo : bhi - tail])
            found += [(alo + i, blo + j, size) for i, j, size in matcher.get_matching_blocks() if size]
        if tail:
            found.append((ahi - tail, bhi - tail, tail))
    return sorted(found)


def _anchors(a: Sequence, b: Sequence, alo: int, ahi: int, blo: int, bhi: int) -> list[tuple[int, int]]:
    """The lines found once in `a[alo:ahi]` and once in `b[blo:bhi]`, as (i, j) pairs: the
    longest chain of them in the same order on both sides (patience sorting)."""
    if ahi - alo < 2 or bhi - blo < 2:
        return []
    counts_a, counts_b = Counter(a[alo:ahi]), Counter(b[blo:bhi])
    where_b = {line: j for j, line in enumerate(b[blo:bhi], blo) if counts_b[line] == 1}
    pairs = [
        (i, where_b[line])
        for i, line in enumerate(a[alo:ahi], alo)
        if counts_a[line] == 1 and line in where_b
    ]
    # the longest run of pairs whose j increase with i: piles by j, each pair linked to the top
    # of the pile before its own
    tops: list[int] = []  # the j on top of each pile
    top_pair: list[int] = []  # the index in `pairs` on top of each pile
    before: list[int] = []  # per pair, the pair it follows in a chain (-1: none)
    for index, (_, j) in enumerate(pairs):
        pile = bisect.bisect_left(tops, j)
        before.append(top_pair[pile - 1] if pile else -1)
        if pile == len(tops):
            tops.append(j)
            top_pair.append(index)
        else:
            tops[pile], top_pair[pile] = j, index
    chain = []
    index = top_pair[-1] if top_pair else -1
    while index >= 0:
        chain.append(pairs[index])
        index = before[index]
    return chain[::-1]


def _merged(blocks: list[Block]) -> Iterator[Block]:
    """Adjacent blocks as one, as difflib gives them."""
    i = j = size = 0
    for i2, j2, size2 in blocks:
        if size and i + size == i2 and j + size == j2:
            size += size2
            continue
        if size:
            yield i, j, size
        i, j, size = i2, j2, size2
    if size:
        yield i, j, size

"""The text libcst reads for a rewrite: the parts of the file the rewrite can read, the other
definitions blanked.

libcst's parser, metadata and visitors cost about a hundred times what `ast` costs, and a rewrite
reads little of a file: the methods that hold the calls, the module's top (the imports the
helper's import joins), and whatever binds a name the checks ask about at module level. So each
function and class that holds no call to rewrite, and whose text (NFKC-normalised, as Python
reads identifiers) mentions none of those `names`, becomes an empty string statement over the
same lines (`\"\"\"` where it began, `\"\"\"` where it ended): line numbers, and the columns and
text of every other line, stay those of the file, and libcst builds one node where the
definition had thousands. A blanked definition cannot bind a name it does not spell, which is
what makes the module-level answers the same as on the whole file; the codemod reports the names
it asked about (`SelfCallRewrite.asked`) so that the caller can check. A change libcst makes maps
back to the file's text by line (`Region.original`); one that reaches into a blanked definition
is refused (`touches`).
"""

from __future__ import annotations

import ast
import bisect
import itertools
import re
import unicodedata
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_NEWLINE = re.compile(r"\r\n|\r|\n")  # as Python counts lines: not at form feeds
_INDENT = re.compile(r"[ \t\f]*")
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Region:
    """The text libcst reads (`text`) and how its positions map to the file's text. `names`: no
    blanked definition mentions one; `blanked`: the sorted (start, end) in `text` of each blanked
    definition's string, which no change may reach into."""

    text: str
    names: frozenset[str]
    blanked: tuple[tuple[int, int], ...]
    starts: tuple[int, ...]  # where each line starts in `text`
    ends: tuple[int, ...]  # where each line's content ends (before its line end) in `text`
    file_starts: tuple[int, ...]  # the same in the file's text
    file_ends: tuple[int, ...]
    kept: tuple[int, ...]  # per line: how many of its first characters are the file's own

    def original(self, position: int) -> int:
        """The position in the file's text of `position` in `text`, outside a blanked string."""
        line = bisect.bisect_right(self.starts, position) - 1
        column = position - self.starts[line]
        if column <= self.kept[line]:
            return self.file_starts[line] + column
        if position >= self.ends[line]:  # at or after the end of a blanked line's content
            return self.file_ends[line] + position - self.ends[line]
        raise ValueError(f"position {position} lies inside a blanked definition")


def region(
    text: str, calls: Iterable[tuple[int, int]], names: Iterable[str], tree: ast.Module | None = None
) -> Region | None:
    """The text to give libcst for rewriting the calls on the (first, last) line ranges `calls`:
    None when `ast` cannot read the file (libcst then reads all of it). `tree`: the file as `ast`
    read it already."""
    if tree is None:
        try:
            with warnings.catch_warnings():  # the user's own invalid escapes are not ours to report
                warnings.simplefilter("ignore", SyntaxWarning)
                tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return None
    wanted = frozenset(names)
    spans = sorted(calls)
    span_starts = [start for start, _ in spans]
    reach = list(itertools.accumulate((end for _, end in spans), max))
    breaks = list(_NEWLINE.finditer(text))
    starts = [0, *(match.end() for match in breaks)]
    ends = [*(match.start() for match in breaks), len(text)]

    def holds_call(first: int, last: int) -> bool:
        """Does a call start on or before `last` and end on or after `first`?"""
        index = bisect.bisect_right(span_starts, last)
        return index > 0 and reach[index - 1] >= first

    def blankable(node: ast.stmt) -> tuple[int, int] | None:
        first, last = _lines(node)
        if holds_call(first, last):
            return None
        chunk = text[starts[first - 1] : ends[last - 1]]
        if not chunk.isascii():
            chunk = unicodedata.normalize("NFKC", chunk)
        return None if any(name in chunk for name in wanted) else (first, last)

    blank = []  # (first, last) line, 1-based
    top, rest = _split_top(tree.body)
    for below, node in [*((False, n) for n in top), *((True, n) for n in rest)]:
        if not isinstance(node, _DEFINITIONS):
            continue
        first, last = _lines(node)
        if not holds_call(first, last):
            if below:
                blank.append(blankable(node))
        elif isinstance(node, ast.ClassDef):  # its methods and classes that hold no call
            blank += [blankable(member) for member in node.body if isinstance(member, _DEFINITIONS)]
    return _blanked(text, starts, ends, sorted(span for span in blank if span is not None), wanted)


def _split_top(body: list[ast.stmt]) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """The module's top, which the helper's import is placed among (every statement up to the
    first one after the last import: never blanked whole), and the statements below it."""
    imports = [i for i, node in enumerate(body) if isinstance(node, (ast.Import, ast.ImportFrom))]
    last = imports[-1] if imports else 0
    after = (i for i in range(last + 1, len(body)) if body[i].lineno > (body[last].end_lineno or 0))
    top = next(after, len(body))
    return body[: top + 1], body[top + 1 :]


def _lines(node: ast.stmt) -> tuple[int, int]:
    """The first and last line of a statement, its decorators included."""
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)]), node.end_lineno or node.lineno


def _blanked(
    text: str, starts: list[int], ends: list[int], spans: list[tuple[int, int]], names: frozenset[str]
) -> Region:
    """`text` with each (first, last) line span an empty string statement."""
    first_lines = dict(spans)
    pieces: list[str] = []
    new_starts, new_ends, kept, blanked = [], [], [], []
    at, line, count = 0, 1, len(starts)
    while line <= count:
        last = first_lines.get(line, line)
        indent = len(_INDENT.match(text, starts[line - 1]).group()) if line in first_lines else 0  # type: ignore[union-attr]
        begin = at + indent
        for index in range(line, last + 1):
            content = text[starts[index - 1] : ends[index - 1]]
            if line in first_lines:  # `"""` at the first line's indentation, `"""` alone on the last
                quotes = '""' if line == last else '"""'
                content = content[:indent] + quotes if index == line else quotes if index == last else ""
            new_starts.append(at)
            kept.append(len(content) if line not in first_lines else indent if index == line else 0)
            at += len(content)
            new_ends.append(at)
            ending = text[ends[index - 1] : starts[index]] if index < count else ""
            pieces += [content, ending]
            at += len(ending)
        if line in first_lines:
            blanked.append((begin, new_ends[-1]))
        line = last + 1
    return Region(
        "".join(pieces),
        names,
        tuple(blanked),
        tuple(new_starts),
        tuple(new_ends),
        tuple(starts),
        tuple(ends),
        tuple(kept),
    )


def touches(edits: Iterable[tuple[int, int]], blanked: Sequence[tuple[int, int]]) -> bool:
    """Does an edit (start, end) replace a character of a blanked string, or insert inside one?
    `blanked`: sorted ranges that do not overlap."""
    begins = [begin for begin, _ in blanked]
    for start, end in edits:
        index = bisect.bisect_right(begins, start) - 1  # the last range that begins at or before start
        for begin, stop in blanked[max(index, 0) :]:
            if begin >= max(end, start + 1):
                break
            if (start < stop and end > begin) if start < end else begin < start < stop:
                return True
    return False

"""Edits a file's facts cannot see: the text of its comment lines.

A line holding only a comment gives the parser nothing but a comment and a line end, so changing
its text, or adding or dropping such lines (and blank ones) after the file's last code, leaves
every node and every position as they were. `outline` is a digest of a file blind to exactly
that; two versions with the same outline have the same facts once `comments_outside_strings`
vouches that none of those lines lies in a string, where the same text would be part of a value
(the tokenizer's state at each line is then the same in both, line by line). So a one-file run
after a comment edit answers without extracting the file's facts again, or loading the analysis
to do it.

A comment line keeps its text in the outline (an edit to it is an edit) in the first two lines,
where a coding declaration may stand, when it names noqa (the facts record those lines), and when
its text could stop the file from decoding or parsing (a NUL byte, or bytes that are not UTF-8).
The counts of `\\r` and `\\r\\n` are in the outline too: they decide how lines are counted, and a
file with a line that `\\r` alone ends is outlined whole.
"""

from __future__ import annotations

import ast
import bisect
import re

from ..analysis.parsing import parse
from .keys import blake2b

# A line holding only a comment, after the line end before it (a literal the search can skip
# to: a file's first line is never blanked). A file with a line that `\r` alone ends is left whole.
_COMMENT_LINE = re.compile(rb"\n([ \t\f]*#[^\r\n]*)")
_MARK = b"#"


def _blanked(data: bytes) -> tuple[bytes, list[int]]:
    """The file with the text of each comment line the outline ignores replaced by `#`, and the
    numbers of those lines."""
    first = data.find(b"\n")
    protected = -1 if first < 0 else data.find(b"\n", first + 1)  # the end of line 2, or none
    if protected < 0 or data.count(b"\r") != data.count(b"\r\n"):  # a lone `\r` ends a line too
        return data, []
    lines: list[int] = []
    pieces: list[bytes] = []
    at, line, counted = 0, 1, 0
    for match in _COMMENT_LINE.finditer(data, protected):
        text, start = match.group(1), match.start(1)
        if b"noqa" in text.lower() or b"\0" in text or not (text.isascii() or _utf8(text)):
            continue
        line += data.count(b"\n", counted, start)
        counted = start
        lines.append(line)
        pieces += [data[at:start], _MARK]
        at = match.end()
    pieces.append(data[at:])
    return b"".join(pieces), lines


def _utf8(text: bytes) -> bool:
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def outline(data: bytes) -> tuple[str, list[int]]:
    """A digest of the file that the text of its comment lines does not change, nor comment or
    blank lines after its last code; and the numbers of those comment lines."""
    blanked, lines = _blanked(data)
    end = len(blanked)
    while (start := blanked.rfind(b"\n", 0, end)) >= 0 and blanked[start + 1 : end].strip() in (b"", _MARK):
        end = start  # a blank or comment line after the last code
    digest = blake2b(blanked[:end].rstrip(b"\r\n"), digest_size=16)
    returns, line_ends = data.count(b"\r"), data.count(b"\r\n")
    digest.update(f"\0{returns}\0{line_ends}".encode())
    return digest.hexdigest(), lines


def comments_outside_strings(data: bytes, lines: list[int]) -> bool:
    """Does the file parse, with none of these comment lines (`outline`'s) inside a string that
    spans lines (a docstring line that starts with `#`)?"""
    try:
        tree = parse(data)  # kept: the facts, if they must be extracted after all, read it again
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return not _in_a_string(tree, lines)


def _in_a_string(tree: ast.AST, lines: list[int]) -> bool:
    """Does a string spanning lines (an f-string: any part of it) hold one of these lines, which
    are in order? Only the nodes whose lines hold one are walked into."""
    stack = [tree]
    while stack:
        node = stack.pop()
        start = getattr(node, "lineno", None)
        if start is not None:
            end = node.end_lineno
            # a definition's lines start at its `def` or `class`, its decorators' above them
            start = min([start, *(d.lineno for d in getattr(node, "decorator_list", ()))])
            at = bisect.bisect_left(lines, start)
            if at == len(lines) or lines[at] > end:
                continue
            if isinstance(node, (ast.Constant, ast.JoinedStr)) and end > start:
                return True
        stack.extend(ast.iter_child_nodes(node))
    return False

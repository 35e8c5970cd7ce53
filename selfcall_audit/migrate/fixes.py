"""What `fix` plans and reports in, free of libcst: the helper a self-call is rewritten to, what
became of each self-call, and the error of a rewrite that would not parse. libcst takes longer to
import than a warm analysis takes to run, and a `fix` with nothing to rewrite (the pre-commit
hook's and `fix --check`'s usual run once a project is migrated) says so without loading it."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from ..config import helper_parts
from ..ftypes import Blocker, Finding

Position = tuple[int, int]  # 1-based line and 1-based column, in characters
Move = tuple[Position, Position, Position, Position]  # an edit: its start and end, old, then new


@dataclass(frozen=True)
class Helper:
    """The function a self-call is rewritten to, as `MODULE:NAME`."""

    module: str
    name: str

    @classmethod
    def parse(cls, spec: str) -> Helper:
        return cls(*helper_parts(spec))


class CodemodError(Exception):
    """The codemod produced text that does not parse: a bug; the file is left as it was."""


@dataclass(frozen=True)
class Outcome:
    """One SCA001 finding after the codemod looked at it: rewritten when `reason` is None."""

    finding: Finding
    reason: str | None = None
    blocker: Blocker | None = None  # what the reason is about, where the analysis or the tree tells
    callee: str | None = None  # rewritten: the helper's name in the module, which the call now uses


def moved(moves: Sequence[Move], position: Position) -> Position:
    """Where `position` of a file stands after the edits `moves` (in order): text no edit replaced
    at its new place, text an edit replaces or starts at (a rewritten call) where the edit's new
    text starts."""
    before = bisect.bisect_left(moves, position, key=lambda move: move[0])  # the edits starting before it
    if not before:
        return position
    _, (old_line, old_column), new_start, (new_line, new_column) = moves[before - 1]
    if (old_line, old_column) > position:
        return new_start  # inside the edit
    line, column = position
    if line == old_line:
        return new_line, new_column + column - old_column
    return line + new_line - old_line, column

"""What `fix` plans and reports in, free of libcst: the helper a self-call is rewritten to, what
became of each self-call, and the error of a rewrite that would not parse. libcst takes longer to
import than a warm analysis takes to run, and a `fix` with nothing to rewrite (the pre-commit
hook's and `fix --check`'s usual run once a project is migrated) says so without loading it."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import helper_parts
from ..ftypes import Blocker, Finding


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

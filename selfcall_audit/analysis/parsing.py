"""A module's syntax tree, parsed once for all that read the same bytes right after each other:
its facts (`extract`), the questions `around` asks of its self-calls (an editor's edit, a one-file
run), and whether an edit touched its comments alone (`orchestration.comments`)."""

from __future__ import annotations

import ast
import functools
import warnings


@functools.lru_cache(maxsize=2)
def parse(source: bytes) -> ast.Module:
    """The module's tree, never changed by any reader."""
    with warnings.catch_warnings():  # `"\d"` and the like: the audited code's business, not our output
        warnings.simplefilter("ignore")
        return ast.parse(source, type_comments=False)

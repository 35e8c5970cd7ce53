"""Text cut to a terminal's width, so that tables and code frames stay readable at 80 columns: a
path loses its start (its file name and line are what tell it apart), a line of code its end,
each with an ellipsis that says so; never a letter-by-letter wrap."""

from __future__ import annotations

ELLIPSIS = "…"


def left_abbreviated(text: str, width: int) -> str:
    """`text` whole when it fits in `width` cells, else its end after an ellipsis."""
    if len(text) <= width:
        return text
    return ELLIPSIS + text[len(text) - max(width - 1, 0) :]


def cut(text: str, width: int) -> str:
    """`text` whole when it fits in `width` cells, else its start and an ellipsis (tabs count as
    the eight columns a terminal gives them at most)."""
    if len(text.expandtabs()) <= width:
        return text
    return text.expandtabs()[: max(width - 1, 0)] + ELLIPSIS

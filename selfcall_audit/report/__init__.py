"""Reporters: one module per output format, each a pure `render(report) -> str`."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

FORMATS = ("text", "concise", "json", "sarif", "github", "gitlab", "junit")


def renderer(name: str) -> Callable[..., str]:
    """The `render(report, ...)` of the reporter for `name` (text and concise take display options
    too), importing only that reporter, so a run does not load what it does not use."""
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r}")
    return import_module(f".{name}", __name__).render

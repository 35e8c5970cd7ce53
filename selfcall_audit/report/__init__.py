"""Reporters: one module per output format, each a pure `render(report) -> str`."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..ftypes import Report

FORMATS = ("text", "concise", "json", "sarif", "github", "gitlab", "junit")


def renderer(name: str) -> Callable[[Report], str]:
    """Import only the reporter asked for, so a run does not load what it does not use."""
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r}")
    return import_module(f".{name}", __name__).render

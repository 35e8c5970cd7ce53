"""A one-shot run turns the garbage collector off (`__main__`); the language server, which lives as
long as the editor, must turn it back on before it serves."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest
from pygls.lsp.server import LanguageServer

from selfcall_audit.frontends import lsp


def test_the_language_server_collects_garbage_while_it_serves(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen = []
    (tmp_path / "in").write_bytes(b"")
    monkeypatch.setattr(sys, "stdin", (tmp_path / "in").open())
    monkeypatch.setattr(sys, "stdout", (tmp_path / "out").open("w"))
    monkeypatch.setattr(LanguageServer, "start_io", lambda self, stdin, stdout: seen.append(gc.isenabled()))
    was = gc.isenabled()
    gc.disable()  # as `__main__` leaves it
    try:
        lsp.serve()
    finally:
        if was:
            gc.enable()
        else:
            gc.disable()
    assert seen == [True]

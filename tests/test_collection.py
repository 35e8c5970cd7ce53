"""A one-shot run turns the garbage collector off (`__main__`); the language server, which lives as
long as the editor, must turn it back on before it serves, and what its session keeps frozen out
of the collector's sight must not grow with each edit."""

from __future__ import annotations

import gc
import shutil
import sys
from pathlib import Path

import pytest
from pygls.lsp.server import LanguageServer

from selfcall_audit import api
from selfcall_audit.config import load_settings
from selfcall_audit.frontends import lsp

REPO = Path(__file__).resolve().parent.parent


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


def test_a_server_settling_after_each_edit_frees_what_the_edit_built(tmp_path: Path) -> None:
    """The server freezes what its session keeps once each edit's diagnostics are sent; cycles
    the edit's run built (its project and facts store, its hierarchy) are gone first, or frozen
    they would never be freed."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "fixtures" / "demo-gym", root)
    app = next(p for p in sorted(root.rglob("app.py")) if b"server_client" in p.read_bytes())
    rel = app.relative_to(root).as_posix()
    session = api.Session(root, load_settings(root))
    frozen = []
    for edit in range(25):
        text = f"_EDITED = {edit}\n".encode() + app.read_bytes()
        session.analyze([app], {rel: text}, located=True)
        api.settle()
        frozen.append(gc.get_freeze_count())

    assert frozen[-1] - frozen[4] < 20  # 59 or 219 more per edit when runs leaked their cycles


def test_the_server_settles_once_it_has_sent_the_diagnostics(monkeypatch: pytest.MonkeyPatch) -> None:
    server = lsp.make_server()
    calls = []
    monkeypatch.setattr(server.editor, "diagnostics", lambda path: calls.append("diagnostics") or [])
    monkeypatch.setattr(server, "text_document_publish_diagnostics", lambda params: calls.append("published"))
    monkeypatch.setattr(api, "settle", lambda: calls.append("settled"))

    server.publish(Path("/nowhere/app.py"))

    assert calls == ["diagnostics", "published", "settled"]

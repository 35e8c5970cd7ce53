"""`selfcall-audit server`: a language server over stdio (pygls). Diagnostics on open, change and
save from the unsaved text, the evidence chain as related information, the rule's explanation on
hover, the rewrite `fix` would make as a quick fix, and a new analysis when the project's YAML
configs or settings change on the disk. What it computes is in `editor`, over `api.Session`."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from pathlib import Path

from lsprotocol import types as lsp
from pygls import uris
from pygls.lsp.server import LanguageServer

from .. import __version__, api
from ..config import ConfigError
from ..rules import SELF_CALL
from .editor import FIX_TITLE, SOURCE, Document, Editor

# What the server asks the editor to watch: the configs that bind agent instances, the settings,
# and Python files changed outside the editor (a `git checkout`, a formatter run from a terminal).
WATCHED = ("**/*.{yaml,yml}", "**/pyproject.toml", "**/*.py")


def _path(uri: str) -> Path | None:
    found = uris.to_fs_path(uri)
    return Path(found).absolute() if found else None


class SelfCallServer(LanguageServer):
    """The language server, with the editor's state."""

    def __init__(self) -> None:
        super().__init__(SOURCE, __version__)
        self.editor = Editor(uris.from_fs_path)

    def publish(self, path: Path) -> None:
        """Analyse the document again and send its diagnostics (a bad pyproject.toml: shown once, none sent)."""
        try:
            diagnostics = self.editor.diagnostics(path)
        except ConfigError as exc:
            self.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, f"{SOURCE}: {exc}"))
            diagnostics = []
        uri = uris.from_fs_path(str(path))
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri, diagnostics))
        api.settle()  # once the diagnostics are sent: the next edit's answer does not wait for it

    def remember(self, uri: str) -> Path | None:
        """Keep the document's current text (as pygls synchronised it); its path, None if not a file."""
        path = _path(uri)
        if path is None:
            return None
        document = self.workspace.get_text_document(uri)
        self.editor.documents[path] = Document(path, document.source)
        return path


def make_server() -> SelfCallServer:
    """A server with its features registered; `start_io` runs it."""
    server = SelfCallServer()

    @server.feature(lsp.INITIALIZED)
    async def initialized(ls: SelfCallServer, _params: lsp.InitializedParams) -> None:
        """Count columns as the client and the server agreed; ask the editor to watch the files
        whose changes the analysis depends on, when it can."""
        ls.editor.units = ls.workspace.position_codec.client_num_units
        capabilities = ls.client_capabilities.workspace
        watching = capabilities and capabilities.did_change_watched_files
        if not (watching and watching.dynamic_registration):
            return
        options = lsp.DidChangeWatchedFilesRegistrationOptions(
            watchers=[lsp.FileSystemWatcher(glob_pattern=pattern) for pattern in WATCHED]
        )
        registration = lsp.Registration(
            id=f"{SOURCE}-watch", method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
        )
        await ls.client_register_capability_async(lsp.RegistrationParams([registration]))

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: SelfCallServer, params: lsp.DidOpenTextDocumentParams) -> None:
        if (path := ls.remember(params.text_document.uri)) is not None:
            ls.publish(path)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: SelfCallServer, params: lsp.DidChangeTextDocumentParams) -> None:
        if (path := ls.remember(params.text_document.uri)) is not None:
            ls.publish(path)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: SelfCallServer, params: lsp.DidSaveTextDocumentParams) -> None:
        if (path := ls.remember(params.text_document.uri)) is not None:
            ls.editor.disk_changed([path], listing=False)
            ls.publish(path)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: SelfCallServer, params: lsp.DidCloseTextDocumentParams) -> None:
        path = _path(params.text_document.uri)
        if path is not None:
            ls.editor.documents.pop(path, None)
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(params.text_document.uri, []))

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: SelfCallServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        """Files changed on the disk: what was kept of them is dropped, every open document analysed again."""
        paths = [path for change in params.changes if (path := _path(change.uri)) is not None]
        listing = any(change.type != lsp.FileChangeType.Changed for change in params.changes)
        ls.editor.disk_changed(paths, listing)
        for path in list(ls.editor.documents):
            ls.publish(path)

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]),
    )
    def code_action(ls: SelfCallServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction] | None:
        """The rewrite of the document's fixable self-calls, offered on any of their diagnostics."""
        mine = [
            d
            for d in params.context.diagnostics
            if d.source == SOURCE
            and d.code == SELF_CALL
            and isinstance(d.data, dict)
            and d.data.get("fixable")
        ]
        path = _path(params.text_document.uri)
        if not mine or path is None:
            return None
        ls.remember(params.text_document.uri)
        edit = ls.editor.fix(path)
        if edit is None:
            return None
        action = lsp.CodeAction(
            title=FIX_TITLE, kind=lsp.CodeActionKind.QuickFix, diagnostics=mine, edit=edit, is_preferred=True
        )
        return [action]

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: SelfCallServer, params: lsp.HoverParams) -> lsp.Hover | None:
        """Over a self-call: the explanation of the rules it breaks."""
        path = _path(params.text_document.uri)
        if path is None or path not in ls.editor.documents:
            return None
        line = params.position.line
        codes = [
            str(d.code) for d in ls.editor.diagnostics(path) if d.range.start.line <= line <= d.range.end.line
        ]
        texts = [text for code in dict.fromkeys(codes) if (text := ls.editor.explanation(code))]
        if not texts:
            return None
        return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, "\n\n---\n\n".join(texts)))

    return server


def serve() -> None:
    """Serve one editor over stdin and stdout until it says exit. The protocol gets copies of the
    two streams (pygls closes what it served on), and anything printed goes to stderr. Garbage
    is collected again (a one-shot run turns collection off): the process lives as long as the
    editor, and the protocol's tasks and errors leave cycles behind."""
    gc.enable()
    with (
        os.fdopen(os.dup(sys.stdin.fileno()), "rb") as stdin,
        os.fdopen(os.dup(sys.stdout.fileno()), "wb") as stdout,
        contextlib.redirect_stdout(sys.stderr),
    ):
        make_server().start_io(stdin, stdout)

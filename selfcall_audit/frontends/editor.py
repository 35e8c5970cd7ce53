"""What the language server knows of the projects an editor has open, in the protocol's terms:
one warm `api.Session` per project root, the diagnostics of a document from its unsaved text, and
the quick fix that rewrites its self-calls as `fix` would. The server (`lsp`) only wires these to
the protocol's messages."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types as lsp

from .. import api
from ..config import load_settings
from ..ftypes import Finding, InputError
from ..migrate.vendor import VendorError, helper_placement, helper_source
from ..report.messages import message, note, reason
from ..rules import RULES
from ..workspace.discovery import find_root

SOURCE = "selfcall-audit"
_SEVERITY = {"error": lsp.DiagnosticSeverity.Error, "warning": lsp.DiagnosticSeverity.Warning}
FIX_TITLE = "Call the handler in-process (selfcall-audit fix)"

Uri = str
ToUri = Callable[[str], Uri]  # an absolute path to a URI


@dataclass(frozen=True)
class Document:
    """An open document as the server holds it: its path and its unsaved text."""

    path: Path
    text: str


def _position(lines: list[str], line: int, column: int, units: Callable[[str], int]) -> lsp.Position:
    """A 1-based line and character column as the client counts (`units` of a string: UTF-16 code
    units unless the client chose otherwise)."""
    index = max(line - 1, 0)
    text = lines[index] if index < len(lines) else ""
    return lsp.Position(index, units(text[: max(column - 1, 0)]))


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class Editor:
    """The projects of the open documents, each a warm session with its own settings."""

    def __init__(self, to_uri: ToUri, units: Callable[[str], int] = utf16_units):
        self.to_uri = to_uri
        self.units = units
        self.documents: dict[Path, Document] = {}
        self._sessions: dict[Path, api.Session] = {}
        # the project root of each folder of a document: found once (each edit would read the
        # pyproject.toml files above it again), again when a watched pyproject.toml or file came or went
        self._roots: dict[Path, Path] = {}

    # projects ----------------------------------------------------------------------------
    def session(self, path: Path) -> api.Session:
        """The warm session of the project `path` belongs to; ConfigError for a bad pyproject.toml."""
        root = self._roots.get(path.parent)
        if root is None:
            root = self._roots[path.parent] = find_root(path.parent)
        if root not in self._sessions:
            self._sessions[root] = api.Session(root, load_settings(root))
        return self._sessions[root]

    def disk_changed(self, paths: Iterable[Path], listing: bool) -> None:
        """Files the editor's watcher saw change; `listing`: created or deleted ones (the project's
        listing is made again). A changed pyproject.toml starts its project's session anew."""
        paths = list(paths)
        if listing or any(p.name == "pyproject.toml" for p in paths):
            self._roots.clear()
        for root in list(self._sessions):
            mine = [p for p in paths if p.is_relative_to(root)]
            if any(p.name == "pyproject.toml" for p in mine):
                del self._sessions[root]
            elif listing and mine:
                self._sessions[root].changed(None)
            elif mine:
                self._sessions[root].changed(mine)

    def _sources(self, root: Path) -> dict[str, bytes]:
        return {
            os.path.relpath(path, root).replace(os.sep, "/"): document.text.encode("utf-8", "surrogateescape")
            for path, document in self.documents.items()
            if path.is_relative_to(root)
        }

    # diagnostics ---------------------------------------------------------------------------
    def diagnostics(self, path: Path) -> list[lsp.Diagnostic]:
        """The findings and input errors of the open document `path`, from its unsaved text (and
        every other open document's of its project)."""
        session = self.session(path)
        report = session.analyze([path], self._sources(session.root), located=True)
        rel = os.path.relpath(path, session.root).replace(os.sep, "/")
        lines = self.documents[path].text.splitlines() if path in self.documents else []
        found = [self._diagnostic(session.root, f, lines) for f in report.findings if f.path == rel]
        found += [self._error(e, lines) for e in report.errors if e.path == rel]
        return found

    def _diagnostic(self, root: Path, finding: Finding, lines: list[str]) -> lsp.Diagnostic:
        rule = RULES[finding.code]
        start = _position(lines, finding.line, finding.column, self.units)
        end = _position(lines, finding.end_line, finding.end_column, self.units)
        related = [
            lsp.DiagnosticRelatedInformation(
                lsp.Location(
                    self.to_uri(os.fspath(root / evidence.path)),
                    lsp.Range(lsp.Position(evidence.line - 1, 0), lsp.Position(evidence.line - 1, 0)),
                ),
                note(evidence),
            )
            for evidence in finding.evidence
        ]
        return lsp.Diagnostic(
            range=lsp.Range(start, end),
            message=message(finding),
            severity=_SEVERITY[rule.severity],
            code=finding.code,
            source=SOURCE,
            related_information=related or None,
            data={
                "fixable": finding.fixable,
                "blocker": reason(finding.fix_blocker) if finding.fix_blocker else None,
            },
        )

    def _error(self, error: InputError, lines: list[str]) -> lsp.Diagnostic:
        where = _position(lines, error.line, error.column, self.units)
        return lsp.Diagnostic(
            range=lsp.Range(where, where),
            message=error.message,
            severity=lsp.DiagnosticSeverity.Error if error.fails else lsp.DiagnosticSeverity.Warning,
            code=error.code,
            source=SOURCE,
        )

    # quick fix ---------------------------------------------------------------------------
    def fix(self, path: Path) -> lsp.WorkspaceEdit | None:
        """The edit `fix` would make to the document (its fixable self-calls rewritten, the helper
        imported), and the helper's copy created when `fix` would write one; None: nothing to do."""
        session = self.session(path)
        rel = os.path.relpath(path, session.root).replace(os.sep, "/")
        try:
            placement = helper_placement(session.root, session.settings, [rel])
            plan = session.plan_fix(path, placement.spec, self._sources(session.root))
        except (ValueError, VendorError):
            return None
        changed = [file for file in plan.files if file.changed]
        if not changed:
            return None
        changes: list = []
        for file in changed:
            uri = self.to_uri(os.fspath(session.root / file.path))
            before = file.before.decode("utf-8", "surrogateescape")
            after = file.after.decode("utf-8", "surrogateescape")
            changes.append(
                lsp.TextDocumentEdit(
                    lsp.OptionalVersionedTextDocumentIdentifier(uri, None), [self._edit(before, after)]
                )
            )
        if placement.write_to and not (session.root / placement.write_to).exists():
            uri = self.to_uri(os.fspath(session.root / placement.write_to))
            text = helper_source(placement.write_to).decode("utf-8")
            changes.append(lsp.CreateFile(uri=uri, options=lsp.CreateFileOptions(ignore_if_exists=True)))
            whole = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
            changes.append(
                lsp.TextDocumentEdit(
                    lsp.OptionalVersionedTextDocumentIdentifier(uri, None), [lsp.TextEdit(whole, text)]
                )
            )
        return lsp.WorkspaceEdit(document_changes=changes)

    def _edit(self, before: str, after: str) -> lsp.TextEdit:
        """One edit from `before` to `after`: the lines between their common head and tail."""
        old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
        head = 0
        while head < min(len(old), len(new)) and old[head] == new[head]:
            head += 1
        tail = 0
        while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
            tail += 1
        start = lsp.Position(head, 0)
        end = lsp.Position(len(old) - tail, 0)
        return lsp.TextEdit(lsp.Range(start, end), "".join(new[head : len(new) - tail]))

    def explanation(self, code: str) -> str | None:
        """The rule's explanation, for a hover over its diagnostic (as `selfcall-audit explain`)."""
        rule = RULES.get(code)
        if rule is None:
            return None
        return (
            f"**{rule.code}** ({rule.name}): {rule.summary}\n\n{rule.explanation}\n\n"
            f"Instead of:\n\n```python\n{rule.bad}\n```\n\nwrite:\n\n```python\n{rule.good}\n```"
        )

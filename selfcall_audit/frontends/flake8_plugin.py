"""flake8 front end: the whole-project analysis, reported for the one file flake8 hands over.

A self-call is only visible from the whole project (base classes in other files, instance names
in YAML), so each flake8 process analyses a project root once and answers every file of that
root from the same report. flake8 applies its own select/ignore, `# noqa` and per-file-ignores
to the codes we yield; the analysis also honours `# noqa` on any line of a multi-line call.
"""

from __future__ import annotations

import argparse
import ast
import os
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from .. import __version__, api
from ..config import ConfigError, Settings, load_settings
from ..ftypes import Report
from ..report.messages import message
from ..rules import POSSIBLE_SELF_CALL, RULES
from ..workspace.discovery import find_root

POSSIBLE = POSSIBLE_SELF_CALL

# flake8 makes one checker per file, and a file's findings come from the whole project: the
# analysis of a root is kept for the process's other files of that root. Analysing per file
# instead would repeat the whole-project work once per file (1,600 times on NeMo Gym).
_reports: dict[tuple[Path, bool], Report] = {}


def _settings(root: Path, possible: bool) -> Settings:
    from flake8.exceptions import ExecutionError

    try:
        settings = load_settings(root)
    except ConfigError as exc:  # a mistake in the settings stops flake8 with its message, as scan's
        raise ExecutionError(f"selfcall-audit: {exc}") from None
    return (
        settings.with_overrides(extend_select=(*settings.extend_select, POSSIBLE)) if possible else settings
    )


def _normalized(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _buffer_differs(path: Path, lines: list[str]) -> bool:
    """Does flake8 check text other than what is on disk (an unsaved editor buffer on stdin)?"""
    try:
        on_disk = path.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return False
    return _normalized(on_disk) != _normalized("".join(lines))


def _check_our_codes(options: argparse.Namespace) -> None:
    """A code of ours (`SCA...`) in flake8's selection that matches no rule is a typo that would
    silently turn a rule off (or never on): stop, naming the known codes."""
    from flake8.exceptions import ExecutionError

    for option in ("select", "extend_select", "ignore", "extend_ignore"):
        for code in getattr(options, option, None) or ():
            if code.upper().startswith("SCA") and not any(known.startswith(code.upper()) for known in RULES):
                name = "--" + option.replace("_", "-")
                raise ExecutionError(
                    f"selfcall-audit: unknown rule code or prefix {code!r} in {name} (known: {', '.join(RULES)})"
                )


class SelfCallChecker:
    """Reports SCA001/SCA002 (and SCA003 when selected by name or prefix) for flake8."""

    name = "selfcall-audit"
    version = __version__
    report_possible: ClassVar[bool] = False

    def __init__(self, tree: ast.AST, filename: str, lines: list[str]) -> None:
        self.filename = filename
        self.lines = lines

    @classmethod
    def parse_options(cls, options: argparse.Namespace) -> None:
        # SCA003 is off by default, as in `selfcall-audit scan`: yielded only when the user's
        # --select/--extend-select covers it (flake8's own default-ignore list is dropped as soon
        # as a config sets `ignore`, so it cannot keep an opt-in rule off on its own).
        chosen = [*(options.select or ()), *(options.extend_select or ())]
        _check_our_codes(options)
        cls.report_possible = any(POSSIBLE.startswith(code) for code in chosen)

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        path = Path(self.filename).resolve()
        if not path.is_file():
            return
        root = find_root(path)
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        report = self._report(root, rel, path)
        for finding in report.findings:
            if finding.path == rel:
                yield finding.line, finding.column - 1, f"{finding.code} {message(finding)}", type(self)
        for error in report.errors:
            if error.path == rel:
                yield error.position[0], error.position[1] - 1, f"{error.code} {error.message}", type(self)

    def _report(self, root: Path, rel: str, path: Path) -> Report:
        if _buffer_differs(path, self.lines):
            data = "".join(self.lines).encode("utf-8")
            return api.analyze([root], settings_for=self._settings_for, sources={path: data})
        key = (root, self.report_possible)
        if key not in _reports:
            _reports[key] = api.analyze([root], settings_for=self._settings_for)
        return _reports[key]

    def _settings_for(self, root: Path) -> Settings:
        return _settings(root, self.report_possible)

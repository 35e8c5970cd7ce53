"""flake8 front end: the whole-project analysis, reported for each file flake8 hands over.

A self-call is only visible from the whole project (base classes in other files, instance names
in YAML), so the paths flake8 was given are analysed once per flake8 run, in flake8's main process
as it reads its options (`parse_options`), before its worker processes fork and inherit the
result. Each file's check is then a look-up of its path in that result: a file with nothing to
say costs a dictionary look-up, and no worker imports or runs the analysis. (Where workers do not
fork, each reads the options again and so analyses once, from the warm cache.) flake8 applies its
own select/ignore, `# noqa` and per-file-ignores to the codes we yield; the analysis also honours
`# noqa` on any line of a multi-line call.
"""

from __future__ import annotations

import argparse
import ast
import os
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from flake8.exceptions import ExecutionError

from .. import __version__, api
from ..config import ConfigError, Settings, load_settings
from ..ftypes import Report
from ..report.messages import message
from ..rules import POSSIBLE_SELF_CALL, RULES
from ..workspace.discovery import find_root

POSSIBLE = POSSIBLE_SELF_CALL
Result = tuple[int, int, str]  # flake8's line, 0-based column and text


def _results(report: Report) -> dict[str, list[Result]]:
    """What the report says of each file, by absolute path: what a file's check looks up."""
    found: dict[str, list[Result]] = {}
    for finding in report.findings:
        key = os.path.join(report.root, finding.path)
        found.setdefault(key, []).append(
            (finding.line, finding.column - 1, f"{finding.code} {message(finding)}")
        )
    for error in report.errors:
        key = os.path.join(report.root, error.path)
        found.setdefault(key, []).append((error.line, error.column - 1, f"{error.code} {error.message}"))
    return found


def _settings(root: Path, possible: bool) -> Settings:
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
    # The run's analysis, made by `parse_options`: the folders it covers (realpaths of the paths
    # flake8 was given) and what it says of each file. Class state, as flake8's plugin interface
    # keeps it: one checker object per file, options given to the class.
    covered: ClassVar[tuple[str, ...]] = ()
    roots: ClassVar[frozenset[Path]] = frozenset()  # the projects that analysis covered
    results: ClassVar[dict[str, list[Result]]] = {}

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
        paths = [p for p in getattr(options, "filenames", None) or ["."] if p != "-" and os.path.lexists(p)]
        if not paths:  # a buffer on stdin: analysed with its text, when flake8 hands it over
            cls.covered, cls.roots, cls.results = (), frozenset(), {}
            return
        root, projects = api.grouped(paths, cls._settings_for)
        report = api.analyze_projects(projects, root)
        cls.covered = tuple(os.path.realpath(p) for p in paths)
        cls.roots = projects.analysed
        cls.results = _results(report)

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        path = os.path.realpath(self.filename)
        if self._covered(path):
            results = self.results.get(path, ())
        else:  # not among the paths flake8 was given (an editor's buffer on stdin, a direct call)
            results = self._analysed(Path(path)).get(path, ())
        for line, column, text in results:
            yield line, column, text, type(self)

    def _covered(self, path: str) -> bool:
        """Did the run's analysis cover the file? Under a path flake8 was given, and in a project it
        analysed (not one nested in a folder the enclosing project leaves out, such as its tests)."""
        given = any(
            path == folder or path.startswith(folder.rstrip(os.sep) + os.sep) for folder in self.covered
        )
        return given and find_root(Path(path).parent) in self.roots

    def _analysed(self, path: Path) -> dict[str, list[Result]]:
        """This file's project analysed for it alone, from the unsaved text flake8 checks."""
        if not path.is_file():
            return {}
        sources = {path: "".join(self.lines).encode("utf-8")} if _buffer_differs(path, self.lines) else None
        return _results(api.analyze([path], settings_for=self._settings_for, sources=sources))

    @classmethod
    def _settings_for(cls, root: Path) -> Settings:
        return _settings(root, cls.report_possible)

"""What the analysing commands do, without click: `cli` declares the command line and calls these,
and the console script (`launch`) calls `scan` directly when its arguments need no parser, since
loading click would take a pre-commit run a sixth of its time."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

from ..config import ConfigError, Settings, load_settings
from ..rules import RULES, parse_codes
from ..workspace.discovery import find_root
from ..workspace.listing import start_listing

TYPE_CHECKING = False  # typing is not imported at run time: it costs a one-file scan 3%
if TYPE_CHECKING:
    from typing import Any, NoReturn

EXIT_FINDINGS, EXIT_ERROR = 1, 2  # 0 (clean) is the normal exit
_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")  # what click.echo strips from output to a pipe


class UsageError(Exception):
    """A mistake in the command line or the settings: reported with the command's usage, exit 2."""


def echo(text: str, err: bool = False, nl: bool = True) -> None:
    """click.echo for text: escape sequences removed when the stream is not a terminal."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    if nl:
        text += "\n"
    if not stream.isatty():
        text = _ANSI.sub("", text)
    stream.write(text)
    stream.flush()


@dataclass(frozen=True)
class Common:
    """The options every analysing command takes."""

    paths: tuple[Path, ...]
    config_file: Path | None
    exclude: tuple[str, ...]
    include_tests: bool | None
    no_cache: bool
    jobs: int | None
    quiet: bool
    verbose: bool

    @classmethod
    def split(cls, params: dict[str, Any]) -> tuple[Common, dict[str, Any]]:
        """The common options out of a command's parameters, and the rest."""
        rest = dict(params)
        return cls(**{f.name: rest.pop(f.name) for f in fields(cls)}), rest

    def prepare(self, **overrides: Any) -> tuple[Path, Settings]:
        """The project root and its settings with these options applied."""
        root = _root(self.paths)
        start_listing(os.fspath(root))
        settings = _settings(
            root,
            self.config_file,
            exclude=self.exclude,
            include_tests=self.include_tests,
            jobs=self.jobs,
            cache_dir="" if self.no_cache else None,
            **overrides,
        )
        return root, settings


def _settings(root: Path, config_file: Path | None, **overrides: Any) -> Settings:
    try:
        settings = load_settings(root, config_file)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    exclude = overrides.pop("exclude", ())
    if exclude:
        overrides["exclude"] = settings.exclude + tuple(exclude)
    return settings.with_overrides(**overrides)


def _root(paths: tuple[Path, ...]) -> Path:
    """The paths' project root; of nested projects (a sub-package with its own pyproject.toml,
    as pre-commit may pass together), the outermost, which contains them all."""
    roots = {find_root(p) for p in paths} if paths else {find_root(Path.cwd())}
    outer = [r for r in roots if all(r == other or r in other.parents for other in roots)]
    if not outer:
        listed = ", ".join(sorted(str(r) for r in roots))
        raise UsageError(f"the paths belong to different projects ({listed}); scan them one at a time")
    return outer[0]


class LazyProgress:
    """A progress bar that appears only when the scan runs longer than about a second on a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.started = time.perf_counter()
        self._bar = None
        self._task = None

    def __call__(self, path: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self._bar is None:
            if time.perf_counter() - self.started < 1.0:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._bar = Progress(
                TextColumn("analysing"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                console=Console(stderr=True),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("", total=total)
        self._bar.update(self._task, completed=done, total=total, description=path)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def run_analysis(
    paths: tuple[Path, ...], settings: Settings, root: Path, show_progress: bool, inventory: bool = False
):
    from ..analysis.project import Project

    progress = LazyProgress(show_progress)
    try:
        return Project(root, settings, progress=progress).analyze(paths or (root,), inventory=inventory)
    finally:
        progress.close()


def scan(
    common: Common,
    output_format: str | None,
    select: str | None,
    ignore: str | None,
    strict: bool | None,
    baseline_file: Path | None,
    write_baseline: Path | None,
) -> None:
    root, settings = common.prepare(
        strict=strict,
        select=_codes(select),
        ignore=_codes(ignore),
    )
    baseline = _load_baseline(root, settings, baseline_file, write_baseline)
    output_format = output_format or ("text" if sys.stdout.isatty() else "concise")
    show_progress = output_format == "text" and not common.quiet and sys.stderr.isatty()
    report = run_analysis(common.paths, settings, root, show_progress)
    if write_baseline is not None:
        _write_baseline(report, write_baseline)
        return
    notes: list[str] = []
    if baseline is not None:
        from ..report.baseline import apply_baseline, notes_for

        report, hidden = apply_baseline(report, baseline[1], common.paths or (root,), settings)
        notes = notes_for(report, hidden, baseline[0])

    from ..report import renderer

    if output_format == "text":
        from ..report.text import render as render_text

        out = render_text(report, width=terminal_width(), color=sys.stdout.isatty())
        if common.quiet:
            out = out.split("\n\n")[0] + "\n" if report.findings else ""
    else:
        out = renderer(output_format)(report)
    echo(out, nl=False)
    if notes and not common.quiet:
        echo("\n".join(notes), err=True)
    if common.verbose:
        echo(f"{report.files_parsed} files parsed in {report.seconds:.3f}s", err=True)
    if report.findings or (settings.strict and report.errors):
        sys.exit(EXIT_FINDINGS)


def _load_baseline(
    root: Path, settings: Settings, option: Path | None, write_to: Path | None
) -> tuple[Path, list[dict]] | None:
    """The baseline to apply: --baseline FILE, else the `baseline` setting (relative to the root)."""
    if option is not None and write_to is not None:
        raise UsageError("--baseline and --write-baseline cannot be used together")
    path = option
    if path is None and settings.baseline and write_to is None:
        path = root / settings.baseline
    if path is None:
        return None
    from ..report.baseline import BaselineError, load_baseline

    try:
        return path, load_baseline(path)
    except BaselineError as exc:
        raise UsageError(str(exc)) from None


def _write_baseline(report: Any, path: Path) -> None:
    from ..report.baseline import write_baseline

    try:
        count = write_baseline(report, path)
    except OSError as exc:
        raise UsageError(f"cannot write the baseline to {path}: {exc.strerror or exc}") from None
    echo(f"selfcall-audit: recorded {count} finding(s) in {path}", err=True)


def _codes(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    codes = parse_codes(text)
    known = (*RULES,)
    for code in codes:
        if not any(k.startswith(code) for k in known):
            raise UsageError(f"unknown rule code or prefix {code!r} (known: {', '.join(known)})")
    return codes


def terminal_width() -> int | None:
    try:
        return os.get_terminal_size().columns if sys.stdout.isatty() else None
    except OSError:
        return None


def guarded(run: Callable[[], Any], passing: tuple[type[BaseException], ...] = ()) -> Any:
    """Runs a command: unexpected exceptions become one clear line and exit 2 (traceback with -v);
    `passing` (with usage errors and exits) go on to the caller."""
    try:
        return run()
    except (UsageError, SystemExit, *passing):
        raise
    except KeyboardInterrupt:
        echo("selfcall-audit: interrupted", err=True)
        sys.exit(EXIT_ERROR)
    except BrokenPipeError:  # the reader of stdout went away (`| head`): not our error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_FINDINGS)
    except Exception as exc:  # an internal error: never a bare traceback for users
        if os.environ.get("SELFCALL_AUDIT_DEBUG") or "-v" in sys.argv or "--verbose" in sys.argv:
            import traceback

            traceback.print_exc()
        echo(f"selfcall-audit: internal error: {type(exc).__name__}: {exc}", err=True)
        echo("Please report it with the command you ran (add -v for the traceback).", err=True)
        sys.exit(EXIT_ERROR)


def finish(run: Callable[[], Any]) -> NoReturn:
    """Runs the console script's command, then exits at once. Every file is closed and every worker
    joined by then, and freeing hundreds of modules one by one at interpreter shutdown would cost
    a warm run a tenth of its time."""
    try:
        run()
        code: int = 0
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader went away (`| head`): what it did not read is lost anyway
        code = code or EXIT_FINDINGS
    os._exit(code)

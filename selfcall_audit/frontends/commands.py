"""What the analysing commands do once `cli` has read the command line: the root and settings, the
analysis, where the output goes and which exit code the run ends with."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from .. import api
from ..api import Projects, by_project
from ..config import ConfigError, Settings, load_settings
from ..ftypes import Report
from ..report import renderer
from ..report.paths import base_for, relocated
from ..report.summary import duration, summary_line
from ..rules import RULES, UnknownCode, parse_codes
from ..workspace.listing import GitListing, is_project_root
from ..workspace.write import replace_file
from .display import Display

if TYPE_CHECKING:
    from typing import Any


EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_TERMINATED = 143  # SIGTERM: 128 + its number, as a shell reports a process it ended
COLOR_CHOICES = ("auto", "always", "never")


class UsageError(Exception):
    """A mistake in the command line: reported with the command's usage, exit 2."""


class SettingsError(UsageError):
    """A mistake in the settings (pyproject.toml, --config): one line, without the usage, exit 2."""


class OutputFailed(Exception):
    """stdout or the -o file would not take the results (`> /dev/full`, a closed pipe, a full disk):
    said in one line, exit 2."""

    def __init__(self, error: OSError):
        super().__init__(error)
        self.error = error


def say(text: str) -> None:
    """A line for the user on stderr, written at once: results and messages interleave in order."""
    print(text, file=sys.stderr, flush=True)


def use_color(when: str, terminal: bool) -> bool:
    """--color as ruff reads it: `always`/`never` win; `auto` follows NO_COLOR, then FORCE_COLOR
    (each when set and not empty), then whether the output is a terminal."""
    if when != "auto":
        return when == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return terminal


class Output(NamedTuple):
    """Where the results go (stdout, or -o/--output-file) and whether they are coloured."""

    file: Path | None
    terminal: bool  # the results go to a terminal: the default format is the rich one
    color: bool

    @classmethod
    def choose(cls, file: Path | None, color: str) -> Output:
        terminal = file is None and sys.stdout.isatty()
        return cls(file, terminal, use_color(color, terminal))

    def write(self, text: str) -> None:
        """The results as rendered: coloured only when `color` (then, on Windows, click writes
        them, which knows the consoles that need their colours translated; elsewhere none does)."""
        if self.file is None:
            try:
                if self.color and os.name == "nt":
                    import click

                    click.echo(text, nl=False, color=True)
                else:
                    sys.stdout.write(text)
                    sys.stdout.flush()
            except OSError as exc:
                raise OutputFailed(exc) from exc
            return
        try:  # swapped in whole: a full disk or a signal leaves the previous report as it was
            self.file.parent.mkdir(parents=True, exist_ok=True)  # as ruff: `-o reports/audit.json`
            replace_file(self.file, text.encode("utf-8", "surrogateescape"))
        except OSError as exc:
            # Named as the user named it (not the temporary file beside it that failed).
            raise OutputFailed(OSError(exc.errno, exc.strerror, str(self.file))) from exc


class Common(NamedTuple):
    """The options every analysing command takes; the defaults are a bare command line's."""

    started: float  # when the process started (`time.perf_counter`): a run's time counts its start-up
    paths: tuple[Path, ...] = ()
    config_file: Path | None = None
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    include_tests: bool | None = None
    no_cache: bool = False
    jobs: int | None = None
    quiet: bool = False
    verbose: bool = False
    color: str = "auto"
    early: GitListing | None = None  # git's listing of the current folder's project, started first

    @classmethod
    def split(
        cls, params: dict[str, Any], early: GitListing | None, started: float | None = None
    ) -> tuple[Common, dict[str, Any]]:
        """The common options out of a command's parameters, and the rest."""
        rest = dict(params)
        options = {name: rest.pop(name) for name in cls._fields if name not in ("early", "started")}
        return cls(time.perf_counter() if started is None else started, **options, early=early), rest

    def prepare(self, whole: bool = False, **overrides: Any) -> tuple[Path, Settings, Projects]:
        """The folder the report's paths are relative to (the project root, or the outermost of
        several) and its settings, and the projects to analyse, each with these options applied
        to its own settings; `whole`: each project entire, whatever the paths."""
        for path in self.paths:  # a broken link or an unreadable file is reported by the scan
            if not os.path.lexists(path):
                import click  # only now: a run that needs no message need not load it

                raise UsageError(f"path {click.format_filename(path)!r} does not exist")
        try:
            root, groups = by_project(self.paths)
        except FileNotFoundError:  # `os.getcwd()`: the folder the run started in was deleted
            raise UsageError("the current folder no longer exists; run from the project's folder") from None
        rooted = root not in groups or is_project_root(os.fspath(root))
        if not rooted:  # a home folder or `/`: analysed in part, and no cache is written there
            say(
                f"selfcall-audit: warning: no pyproject.toml or .git in {root} or above it; "
                "analysing this folder as the project (large folders are listed only in part; no cache)"
            )
        options = {
            "exclude": self.exclude,
            "extend_exclude": self.extend_exclude,
            "include_tests": self.include_tests,
            "jobs": self.jobs,
            **overrides,
        }
        settings = _settings(root, self.config_file, cache_dir="" if self.no_cache else None, **options)
        if not settings.nested_projects:  # --config: its settings, and the one root, for every path
            groups = {root: self.paths or (root,)}
        loaded = {root: settings}

        def settings_for(project_root: Path) -> Settings:
            if project_root not in loaded:
                loaded[project_root] = _settings(
                    project_root, None, cache_dir="" if self.no_cache else None, **options
                )
            return loaded[project_root]

        if whole:
            groups = {project_root: (project_root,) for project_root in groups}
        return root, settings, Projects(groups, settings_for)

    def progress(self) -> Display:
        """The run's progress display, on stderr when it is a terminal (whatever stdout is), unless
        -q; counted from the start of the process."""
        return Display(not self.quiet and stderr_is_terminal(), since=self.started)


def _settings(root: Path, config_file: Path | None, **overrides: Any) -> Settings:
    try:
        settings = load_settings(root, config_file)
    except ConfigError as exc:
        raise SettingsError(str(exc)) from None
    # As ruff: --exclude replaces the settings' `exclude` (their `extend-exclude` still applies),
    # --extend-exclude adds to both.
    exclude, extend_exclude = overrides.pop("exclude", ()), overrides.pop("extend_exclude", ())
    if exclude:
        overrides["exclude"] = (*exclude, *settings.extend_exclude, *extend_exclude)
    elif extend_exclude:
        overrides["exclude"] = (*settings.exclude, *extend_exclude)
    extend = overrides.pop("extend_select", None) or ()
    if overrides.get("select"):  # --select replaces the settings' selection, its extensions too
        overrides["extend_select"] = extend
    elif extend:
        overrides["extend_select"] = settings.extend_select + extend
    return settings.with_overrides(**overrides)


def codes(text: str | None, option: str) -> tuple[str, ...] | None:
    """A code list given on the command line, checked: a typo would silently disable the gate."""
    if text is None:
        return None
    try:
        return parse_codes(text)
    except UnknownCode as exc:
        raise UsageError(f"{option}: {exc}") from None


def run_analysis(
    common: Common, projects: Projects, root: Path, progress: Display, inventory: bool = False
) -> Report:
    """The run's report; the display is paused while its notes are said."""
    report = api.analyze_projects(projects, root, progress=progress, inventory=inventory, early=common.early)
    if report.excluded and not common.quiet:
        progress.pause()
        say_excluded(report)
    return report


def say_excluded(report: Report) -> None:
    """A path named on purpose that the settings leave out is said, not passed over in silence."""
    for rel in report.excluded:
        shown = os.path.relpath(report.root / rel).replace(os.sep, "/")
        say(
            f"selfcall-audit: note: {shown} is excluded (the `exclude` settings, or test code without "
            "--include-tests); not analysed"
        )


class ScanOptions(NamedTuple):
    """`scan`'s own options, beyond `Common`; the defaults are a bare `scan`'s."""

    output_format: str | None = None
    output_file: Path | None = None
    select: str | None = None
    extend_select: str | None = None
    ignore: str | None = None
    strict: bool | None = None
    exit_zero: bool = False
    statistics: bool = False
    baseline_file: Path | None = None
    write_baseline: Path | None = None
    diff_base: str | None = None


def scan(common: Common, options: ScanOptions) -> int:
    """The exit status of a scan; what it found is written to the output and its notes said."""
    output_file, diff_base, write_baseline = options.output_file, options.diff_base, options.write_baseline
    output = Output.choose(output_file, common.color)
    if diff_base is not None and write_baseline is not None:
        raise UsageError("--diff-base and --write-baseline cannot be used together")
    root, settings, projects = common.prepare(
        strict=options.strict,
        select=codes(options.select, "--select"),
        extend_select=codes(options.extend_select, "--extend-select"),
        ignore=codes(options.ignore, "--ignore"),
    )
    baseline = _load_baseline(root, settings, options.baseline_file, write_baseline)
    if diff_base is not None:  # checked before the analysis, which may take a while
        from .diffbase import DiffBaseError, commit_of, known_at, new_findings

        try:
            base = commit_of(root, diff_base)
        except DiffBaseError as exc:  # one line, not click's usage banner: the command line is fine
            say(f"selfcall-audit: {exc}")
            return EXIT_ERROR
    output_format = options.output_format or ("text" if output.terminal else "concise")
    progress = common.progress()  # one display from the listing to the report
    try:
        report = run_analysis(common, projects, root, progress)
        if write_baseline is not None:
            progress.close()
            _write_baseline(report, write_baseline)
            return EXIT_CLEAN
        notes: list[str] = []
        if baseline is not None:
            from ..report.baseline import apply_baseline, notes_for

            report, hidden = apply_baseline(report, baseline[1], common.paths or (root,), settings)
            notes = notes_for(report, hidden, baseline[0])
        if diff_base is not None:
            progress.phase(f"comparing with {diff_base}")
            try:
                known = known_at(root, common.paths, base, projects.settings)
            except DiffBaseError as exc:
                progress.close()
                say(f"selfcall-audit: {exc}")
                return EXIT_ERROR
            report, hidden = new_findings(report, known)
            if hidden:
                notes.append(f"selfcall-audit: {hidden} finding(s) already present at {diff_base} not shown")
        progress.phase("reporting")
        seconds = time.perf_counter() - common.started
        rendered = _rendered(report, output_format, options.statistics, output, common.quiet, seconds)
    finally:
        progress.close()
    output.write(rendered)
    # The text formats end with the count, as ruff's; the count of results that go to a file, or of
    # a format for machines (kept clean), is said on stderr to someone watching it
    counted = output_format in ("text", "concise") and output.file is None
    if not (counted or common.quiet or options.statistics or output.terminal) and stderr_is_terminal():
        say(f"{summary_line(report)} ({duration(seconds)}).")
    if notes and not common.quiet:
        say("\n".join(notes))
    if common.verbose:
        say(f"{report.files_parsed} files parsed in {report.seconds:.3f}s")
    if report.needs_python is not None:  # never a passing gate over files this interpreter cannot read
        major, minor = report.needs_python
        say(
            f"error: some Python files could not be parsed by Python {sys.version_info[0]}."
            f"{sys.version_info[1]}, older than the Python {major}.{minor} the project requires: they "
            f"may use newer syntax. Run selfcall-audit with Python {major}.{minor} or newer."
        )
        return EXIT_ERROR
    failed = report.findings or report.inputs_failed
    return EXIT_FINDINGS if failed and not options.exit_zero else EXIT_CLEAN


def _rendered(
    report: Report, output_format: str, statistics: bool, output: Output, quiet: bool, seconds: float
) -> str:
    if statistics:
        return render_statistics(report, as_json=output_format == "json")
    report = relocated(report, base_for(output_format, report.root))
    render = renderer(output_format)
    if output_format == "concise":
        return render(report, color=output.color, summary=not quiet)
    if output_format != "text":
        return render(report)
    width = terminal_width() if output.terminal else None
    return render(report, width=width, color=output.color, summary=not quiet, seconds=seconds)


def render_statistics(report: Report, as_json: bool) -> str:
    """--statistics as ruff prints it: one line per code, most frequent first, `[*]` if fixable."""
    counts: dict[str, list[int]] = {}
    for finding in report.findings:
        count = counts.setdefault(finding.code, [0, 0])
        count[0] += 1
        count[1] += finding.fixable
    for error in report.errors:
        counts.setdefault(error.code, [0, 0])[0] += 1
    rows = sorted(counts.items(), key=lambda item: (-item[1][0], item[0]))
    if as_json:
        listed = [
            {"code": code, "name": RULES[code].name, "count": total, "fixable": fixable > 0}
            for code, (total, fixable) in rows
        ]
        return json.dumps(listed, indent=2) + "\n"
    if not rows:
        return ""
    width = max(len(str(total)) for _, (total, _) in rows)
    any_fixable = any(fixable for _, (_, fixable) in rows)
    lines = []
    for code, (total, fixable) in rows:
        mark = ("[*] " if fixable else "[ ] ") if any_fixable else ""
        lines.append(f"{total:>{width}}\t{code}\t{mark}{RULES[code].name}")
    return "".join(f"{line}\n" for line in lines)


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


def _write_baseline(report: Report, path: Path) -> None:
    from ..report.baseline import write_baseline

    try:
        count = write_baseline(report, path)
    except OSError as exc:
        raise UsageError(f"cannot write the baseline to {path}: {exc.strerror or exc}") from None
    say(f"selfcall-audit: recorded {count} finding(s) in {path}")


def stderr_is_terminal() -> bool:
    """Does someone watch the run's messages? (Not a CI log, nor a test's capture.)"""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by something that is no stream, or closed
        return False


def terminal_width() -> int | None:
    try:
        return os.get_terminal_size().columns if sys.stdout.isatty() else None
    except OSError:
        return None

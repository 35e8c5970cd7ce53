"""selfcall-audit against its peers on the same tree, measured side by side in one run.

Every measured command runs as a subprocess, as users run it, from the tree's root:

- selfcall-audit **cold**: ``scan --format json`` after removing ``.selfcall_audit_cache``
  (a first run: it parses and writes the cache);
- selfcall-audit **warm**: the same command with the cache present and nothing changed;
- selfcall-audit **one file**, as the pre-commit hook runs it (``scan --format json <file>``) after
  an edit, the file restored after each run: an agent file with a new trailing comment (its
  meaning unchanged), the same file with a new first statement (its code and every line number
  changed), and a module that is not an agent with a new first statement;
- selfcall-audit on a **migrated** copy of the tree (made by that install's ``fix`` in the
  unmeasured round): ``scan --format json`` warm, and ``fix --check <agent file>`` as the
  pre-commit hook runs it once the migration is merged;
- selfcall-audit **--diff-base HEAD** (``scan --format json --diff-base HEAD``), the gate of a
  pull request, the cache warm, in a git checkout only: its findings must be some of the cold
  run's, the same in every round;
- **semgrep** with a self-call rule written by this script (keyword arguments in any order,
  and the ``config = self.config`` alias);
- **ruff** ``check`` of the whole tree, cold (``--no-cache``) and warm (its cache present);
- **flake8** ``--select SCA``: our plugin, through flake8;
- **flake8 without the plugin** and **flake8 with the plugin**, each with flake8's default
  checks, both started by the same few lines (``FLAKE8_RUNNER``) that leave our plugin out of
  flake8's plugin list for the first: what the plugin adds to a flake8 run (target: 10%);
- selfcall-audit **fix** (``fix``, which writes) on a fresh copy of the tree (no cache in it) made
  before each run and not timed: compared with the cold scan (target: at most 2x); the calls it
  rewrote must be at the lines it names (in the file as written), no more in a file than the
  scan's SCA001 findings there, and the same in every round;
- ``python -c pass``: the interpreter's own start-up, the floor under a one-file run;
  ``python -S -c pass``, without the ``.pth`` start-up hooks of site-packages that raise it; and
  ``python -c 'import ...'`` of the standard-library modules a one-file run loads (read from its
  ``PYTHONPROFILEIMPORTTIME`` report after the unmeasured round): the floor that no code of
  selfcall-audit's own can go below; in a git checkout, the same imports while git lists the
  files (started first, as the console script starts it), then a status of each listed Python and
  YAML file (``LISTING_FLOOR``): the floor under any one-file run that checks the rest of the
  project before it answers.

Commands run without ``PYTHONDONTWRITEBYTECODE``, so that Python tools start from compiled
bytecode as installed tools do (pip compiles at install time). A peer that is not installed, or
that fails in the unmeasured first round (an exit code it does not give for a clean run, or
output that cannot be read), is skipped with a note saying why. Tools are looked up in this
interpreter's scripts folder first, then on PATH, and where each was found is printed (a pyenv
shim on PATH adds its own start-up to every run of the tool). Rounds are interleaved, each command once per round, after one unmeasured round that warms the OS file
cache for every tool; the table shows the median, fastest and slowest of ``--repeat`` rounds and
the peak RSS of one more run after them (the largest resident set of the command's process or any
child it waited for), which a small launcher starts (``LAUNCHER``).

On a generated tree (``gen_tree.py``), every selfcall-audit and flake8 run must report exactly
the generator's ``expected.json`` (the one-file run: that file's share); elsewhere they must
agree with the first cold run. A mismatch is printed and the exit code is 1.

``--only KEYS`` measures only those rows (and the cold scan, whose findings the others are
checked against). ``--repo PATH`` measures a copy of an existing tree (the benchmark edits a file and writes
caches; the original is never touched); ``--scaling 1000,5000,20000`` generates trees of those
sizes and prints the cold scan's time, time per file and peak memory for each. The last lines
are ``key=value`` pairs for scripts.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from gen_tree import EXPECTED_FILE, generate

CACHE_DIR = ".selfcall_audit_cache"
REWROTE = re.compile(r"^(?P<path>.+?):(?P<line>\d+): rewrote self-call to (?P<helper>\S+)$", re.MULTILINE)
FLAKE8_LINE = re.compile(r"^(?:\./)?(?P<path>.+?):(?P<line>\d+):\d+: (?P<code>SCA\d{3}) ")
SEMGREP_RULE = """\
rules:
  - id: agent-self-call
    languages: [python]
    severity: ERROR
    message: a server posts to itself over HTTP
    pattern-either:
      - pattern: $X.server_client.post(..., server_name=self.config.name, ..., url_path=$PATH, ...)
      - pattern: |
          $CONFIG = self.config
          ...
          $X.server_client.post(..., server_name=$CONFIG.name, ..., url_path=$PATH, ...)
"""
# The targets, side by side on one tree: cold at least 5x faster than semgrep and within 3x of
# ruff's cold lint, in at most 50 MB; warm no slower than ruff's warm lint; a one-file run within
# 4x of the interpreter's own start-up (5x after a code edit of an agent file); and absolute
# seconds for a 1,600-file tree.
TARGET_COLD_SPEEDUP = 5.0
TARGET_COLD_VS_RUFF = 3.0
TARGET_WARM_VS_RUFF = 1.0
TARGET_ONE_FILE_VS_PYTHON = {"sca_one_file": 4.0, "sca_one_edit": 5.0, "sca_other_edit": 4.0}
TARGET_COLD_PEAK_MB = 50.0
TARGET_VS_AGAINST = 1.10  # each row against another install (`--against`): no worse by more than 10%
TARGET_SECONDS = {
    "sca_cold": 1.0,
    "sca_warm": 0.3,
    "sca_one_file": 0.3,
    "sca_one_edit": 0.3,
    "sca_other_edit": 0.3,
}
# `selfcall-audit` with every command line going to click's (`cli.main`), as the console script
# runs those that `frontends/quick.py` does not read.
CLICK_RUNNER = """\
import sys
from selfcall_audit.frontends.cli import main
sys.exit(main(sys.argv[1:]))
"""
TARGET_FIX_VS_COLD = 2.0  # fix (analysis, rewrites, test updates) against its own cold scan
TARGET_FLAKE8_PLUGIN = 1.10  # flake8 with the plugin, against flake8 alone
# flake8 as its console script runs it, with our plugin left out of the plugins it finds when the
# first argument is "without" (the package stays installed: the same interpreter and site).
FLAKE8_RUNNER = """\
import sys
from flake8.plugins import finder
if sys.argv.pop(1) == "without":
    found = finder._find_importlib_plugins
    finder._find_importlib_plugins = lambda: (p for p in found() if p.package != "selfcall-audit")
from flake8.main.cli import main
sys.exit(main())
"""
# Child processes: compiled bytecode may be written and used, as for an installed tool.
ENVIRONMENT = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
# The modules named after it imported while git lists the checkout, then a status of each file
# listed: no code of selfcall-audit's, only what checking the whole project takes.
LISTING_FLOOR = """\
import os, sys
read_end, write_end = os.pipe()
safely = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"]  # as the tool runs git
listing = ["git", *safely, "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
git = os.posix_spawnp("git", listing, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, write_end, 1)])
os.close(write_end)
for name in sys.argv[1:]:
    __import__(name)
chunks = []
while chunk := os.read(read_end, 1 << 20):
    chunks.append(chunk)
os.waitpid(git, 0)
for name in b"".join(chunks).split(b"\\0"):
    if name.endswith((b".py", b".yaml", b".yml")):
        os.stat(name)
"""


# Starts the command it is given and reports on the file descriptor it is given its wall clock from
# start to exit, its peak RSS and its exit code. A process's peak as Linux reports it counts the
# memory of the process that started it, as it was then (exec records the high-water mark of the
# address space it replaces): started by this small process rather than by the benchmark, a command
# is not charged with the benchmark's own memory (which made `python -c pass` 32 MB where it is 9).
LAUNCHER = """\
import os, sys, time
report, command = int(sys.argv[1]), sys.argv[2:]
started = time.perf_counter()
child = os.posix_spawnp(command[0], command, os.environ)
_, status, usage = os.wait4(child, 0)
seconds = time.perf_counter() - started
os.write(report, f"{seconds} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}".encode())
"""


def find_tool(name: str) -> str | None:
    search = os.pathsep.join((sysconfig.get_path("scripts"), os.environ.get("PATH", "")))
    return shutil.which(name, path=search)


@dataclass
class Outcome:
    seconds: float
    max_rss_kb: int
    returncode: int
    stdout: str
    stderr: str


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None, launched: bool = False) -> Outcome:
    """Run a command, timing it from start to exit and reading its peak RSS from wait4().

    `launched`: started by a small launcher process (`LAUNCHER`), for a peak that is the command's
    own; otherwise by this process, for its time: a launcher's child took about 1 ms longer to run
    (`python -c pass`, 41 alternating runs: 14.6 ms against 13.5 ms), for no cause found."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        if launched:
            seconds, max_rss_kb, returncode = _launched(command, cwd, env or ENVIRONMENT, out, err)
        else:
            started = time.perf_counter()
            process = subprocess.Popen(
                command, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env or ENVIRONMENT
            )
            _, status, usage = os.wait4(process.pid, 0)
            seconds, max_rss_kb = time.perf_counter() - started, usage.ru_maxrss
            returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Outcome(
            seconds,
            max_rss_kb,
            returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
        )


def _launched(command: list[str], cwd: Path, env: dict[str, str], out: IO, err: IO) -> tuple[float, int, int]:
    """Seconds, peak RSS (KB) and exit code of `command` as `LAUNCHER` reports them."""
    reading, writing = os.pipe()
    with os.fdopen(reading) as report:
        try:
            launcher = subprocess.Popen(
                [sys.executable, "-S", "-c", LAUNCHER, str(writing), *command],
                cwd=cwd,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env=env,
                pass_fds=(writing,),
            )
        finally:
            os.close(writing)
        measured = report.read().split()
    launcher.wait()
    if len(measured) != 3:  # the command could not be started: the launcher said why
        err.seek(0)
        said = err.read().decode("utf-8", "replace").strip().splitlines() or ["it said nothing"]
        raise BenchmarkError(f"cannot run {command[0]}: {said[-1]}")
    return float(measured[0]), int(measured[1]), int(measured[2])


class BenchmarkError(Exception):
    """A measured command failed: the benchmark cannot go on."""


@dataclass
class Measure:
    """One command, measured once per round; `check` reads its output and returns a findings count."""

    key: str
    label: str
    command: list[str]
    ok_codes: tuple[int, ...] = (0, 1)
    before: Callable[[], None] = lambda: None
    after: Callable[[], None] = lambda: None
    check: Callable[[Outcome], int | None] = lambda outcome: None
    optional: bool = False  # a peer or a reference row: if it fails in the unmeasured round, left out
    cwd: Path | None = None  # where it runs, if not in the measured tree (another install's copy)
    seconds: list[float] = field(default_factory=list)
    max_rss_kb: int = 0
    findings: int | None = None

    def once(self, cwd: Path, record: bool, peak: bool = False) -> None:
        """One run: timed in a measured round (`record`); `peak`: launched, for its peak memory (a
        round after the measured ones, where each row's state is the one its times were taken in:
        the first scan of a copy the unmeasured round made is a cold one)."""
        self.before()
        try:
            outcome = run(self.command, self.cwd or cwd, launched=peak)
        finally:
            self.after()
        if outcome.returncode not in self.ok_codes:
            tail = (outcome.stderr or outcome.stdout).strip().splitlines()[-15:]
            raise BenchmarkError(f"{self.label} exited {outcome.returncode}:\n  " + "\n  ".join(tail))
        try:
            self.findings = self.check(outcome)
        except (ValueError, KeyError) as exc:
            raise BenchmarkError(f"{self.label} printed what cannot be read ({exc!r})") from exc
        if record:
            self.seconds.append(outcome.seconds)
        if peak:
            self.max_rss_kb = outcome.max_rss_kb

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def ruff_diagnostics(outcome: Outcome) -> int:
    """The count in ruff's closing line: a ruff that did not lint (a version manager's shim with no
    interpreter behind it exits 1 too) prints none, and is left out rather than timed."""
    if "All checks passed!" in outcome.stdout:
        return 0
    found = re.search(r"^Found (\d+) errors?\.", outcome.stdout, re.MULTILINE)
    if found is None:
        raise ValueError("no 'Found N errors.' or 'All checks passed!' line")
    return int(found.group(1))


def triples(report: dict) -> list[list]:
    return sorted([f["code"], f["path"], f["line"]] for f in report["findings"])


class Checker:
    """Compares every selfcall-audit run with the expected findings (or with the cold run)."""

    def __init__(self, expected: list[list] | None):
        self.expected = sorted(expected) if expected is not None else None
        self.reference: list[list] | None = self.expected
        self.problems: list[str] = []
        self.files_parsed: int | None = None
        self.rewrites: list[list] | None = None  # what the first `fix` rewrote

    def whole(self, label: str) -> Callable[[Outcome], int]:
        def check(outcome: Outcome) -> int:
            report = json.loads(outcome.stdout)
            self.files_parsed = report["summary"]["files_parsed"]
            found = triples(report)
            if self.reference is None:
                self.reference = found
            self._compare(label, found, self.reference)
            return len(found)

        return check

    def fix(self, label: str, tree: Path) -> Callable[[Outcome], int]:
        """The calls `fix` rewrote in `tree`: each named at the line of the written file that now
        calls the helper, no more in a file than the scan's SCA001 findings there, the same in
        every round."""

        def check(outcome: Outcome) -> int:
            named = [(m["path"], int(m["line"]), m["helper"]) for m in REWROTE.finditer(outcome.stdout)]
            rewrote = sorted([path, line] for path, line, _ in named)
            if self.rewrites is None:
                self.rewrites = rewrote
            elif rewrote != self.rewrites:
                self.problems.append(f"{label}: rewrote {len(rewrote)} calls, {len(self.rewrites)} before")
            elsewhere = []
            for path, line, helper in named:
                lines = (tree / path).read_text(encoding="utf-8", errors="replace").splitlines()
                if line > len(lines) or f"{helper}(" not in lines[line - 1]:
                    elsewhere.append([path, line])
            if elsewhere:
                self.problems.append(f"{label}: no call of the helper at the lines named: {elsewhere[:5]}")
            scanned = Counter(path for code, path, _ in self.reference or [] if code == "SCA001")
            extra = sorted(
                path for path, count in Counter(p for p, _ in rewrote).items() if count > scanned[path]
            )
            if extra:
                self.problems.append(f"{label}: rewrote more calls than the scan reported in: {extra[:5]}")
            return len(rewrote)

        return check

    def one_file(self, label: str, rel: str, shift: int = 0) -> Callable[[Outcome], int]:
        """The run's findings in `rel` must be the reference's, `shift` lines further down."""

        def check(outcome: Outcome) -> int:
            found = [t for t in triples(json.loads(outcome.stdout)) if t[1] == rel]
            wanted = [[code, path, line + shift] for code, path, line in self.reference or [] if path == rel]
            self._compare(label, found, wanted)
            return len(found)

        return check

    def edited(self, label: str, rel: str) -> Callable[[Outcome], int]:
        """A whole scan after `rel` got a new first statement: the reference's findings, those in
        `rel` one line further down."""

        def check(outcome: Outcome) -> int:
            found = triples(json.loads(outcome.stdout))
            wanted = sorted([code, path, line + (path == rel)] for code, path, line in self.reference or [])
            self._compare(label, found, wanted)
            return len(found)

        return check

    def steady(self, label: str, of_reference: bool = False) -> Callable[[Outcome], int]:
        """A scan's findings, the same in every round; `of_reference`: each one of the cold run's
        (a `--diff-base` run shows some of them)."""
        first: list[list] = []

        def check(outcome: Outcome) -> int:
            found = triples(json.loads(outcome.stdout))
            if not first:
                first.append([t for t in found if t in (self.reference or [])] if of_reference else found)
            self._compare(label, found, first[0])
            return len(found)

        return check

    def nothing_to_rewrite(self, label: str) -> Callable[[Outcome], int]:
        """`fix --check` of a migrated file: nothing left to rewrite (what is left, by hand)."""

        def check(outcome: Outcome) -> int:
            if "Nothing to rewrite" not in outcome.stdout:
                self.problems.append(f"{label}: {outcome.stdout.strip().splitlines()[-1:]}")
            return len(REWROTE.findall(outcome.stdout))

        return check

    def flake8(self, label: str) -> Callable[[Outcome], int]:
        """flake8 prints `./path:line:column: CODE message`; a crash shows as missing findings."""

        def check(outcome: Outcome) -> int:
            found = sorted(
                [match["code"], match["path"], int(match["line"])]
                for match in map(FLAKE8_LINE.match, outcome.stdout.splitlines())
                if match
            )
            errors = outcome.stderr.strip().splitlines()
            self._compare(label, found, self.reference or [], errors[-1] if errors else "")
            return len(found)

        return check

    def no_sca(self, label: str) -> Callable[[Outcome], int]:
        """flake8 without the plugin: none of our codes."""

        def check(outcome: Outcome) -> int:
            found = [line for line in outcome.stdout.splitlines() if FLAKE8_LINE.match(line)]
            self._compare(label, [[line] for line in found], [])
            return len(found)

        return check

    def _compare(self, label: str, found: list[list], wanted: list[list], stderr: str = "") -> None:
        if found == wanted:
            return
        missing = [t for t in wanted if t not in found]
        extra = [t for t in found if t not in wanted]
        problem = (
            f"{label}: {len(found)} findings, {len(wanted)} wanted; "
            f"{len(missing)} missing {missing[:5]}, {len(extra)} extra {extra[:5]}"
        )
        self.problems.append(problem + (f"; stderr ends: {stderr}" if stderr else ""))

    @property
    def exact(self) -> bool:
        return not self.problems


def one_file_target(root: Path, expected: list[list] | None, sca: str) -> str:
    """An agent module with a self-call: the file a pre-commit run would be handed."""
    if expected:
        paths = [t[1] for t in expected]
        singles = [p for p in paths if p.endswith("/app.py") and paths.count(p) == 1]
        return (singles or paths)[0]
    outcome = run([sca, "scan", "--format", "json"], root)
    findings = json.loads(outcome.stdout)["findings"] if outcome.returncode in (0, 1) else []
    if findings:
        return findings[0]["path"]
    candidates = sorted(root.glob("responses_api_agents/*/app.py")) or sorted(root.rglob("*.py"))
    if not candidates:
        raise BenchmarkError(f"no Python file under {root}")
    return candidates[0].relative_to(root).as_posix()


def other_file_target(root: Path, agent: str) -> str:
    """A module that is not an agent: most commits change only such files."""
    candidates = sorted(root.glob("resources_servers/*/app.py")) or sorted(root.rglob("*.py"))
    others = [path.relative_to(root).as_posix() for path in candidates]
    return next((rel for rel in others if rel != agent), agent)


class Editor:
    """Edits one file differently before each run (a trailing comment, or a new first statement)
    and restores its bytes and modification time after."""

    def __init__(self, path: Path, first_line: bool):
        self.path = path
        self.first_line = first_line
        self.original = path.read_bytes()
        self.stat = path.stat()
        self.count = 0

    def edit(self) -> None:
        self.count += 1
        if self.first_line:
            self.path.write_bytes(f"_EDITED_BY_THE_BENCHMARK = {self.count}\n".encode() + self.original)
        else:
            self.path.write_bytes(self.original + f"# touched by the benchmark ({self.count})\n".encode())

    def restore(self) -> None:
        self.path.write_bytes(self.original)
        os.utime(self.path, ns=(self.stat.st_atime_ns, self.stat.st_mtime_ns))


def sca_measures(
    root: Path, checker: Checker, sca: str, target: str, other: str, against: bool = False
) -> list[Measure]:
    """selfcall-audit's rows: cold, warm and the three one-file runs; `against`: those of another
    install, run in a copy of the tree of their own (two versions sharing one cache folder would
    each prune the other's entries), keyed `against_...`."""
    scan = [sca, "scan", "--format", "json"]
    prefix, suffix = ("against_", " (--against)") if against else ("", "")
    found: list[Measure] = [
        Measure(
            f"{prefix}sca_cold",
            f"selfcall-audit cold{suffix}",
            scan,
            before=lambda: shutil.rmtree(root / CACHE_DIR, ignore_errors=True),
            check=checker.whole(f"selfcall-audit cold{suffix}"),
            cwd=root if against else None,
        ),
        Measure(
            f"{prefix}sca_warm",
            f"selfcall-audit warm{suffix}",
            scan,
            check=checker.whole(f"selfcall-audit warm{suffix}"),
            cwd=root if against else None,
        ),
    ]
    # The gate of a pull request, against the last commit, the cache warm: only in a git checkout.
    found.append(
        Measure(
            f"{prefix}sca_diff_base",
            f"selfcall-audit --diff-base HEAD{suffix}",
            [*scan, "--diff-base", "HEAD"],
            check=checker.steady(f"selfcall-audit --diff-base HEAD{suffix}", of_reference=True),
            optional=True,
            cwd=root if against else None,
        )
    )
    # A migrated project, as its hooks and CI run once `fix` is merged: a copy of the tree that this
    # install's `fix` rewrote (made in the unmeasured round), scanned warm, and `fix --check` of the
    # agent file as the pre-commit hook runs it.
    migrated = root.with_name(f"{root.name}-migrated")
    found += [
        Measure(
            f"{prefix}sca_migrated_warm",
            f"selfcall-audit warm, migrated tree{suffix}",
            scan,
            before=lambda: migrate(root, migrated, sca),
            check=checker.steady(f"selfcall-audit warm, migrated tree{suffix}"),
            cwd=migrated,
        ),
        Measure(
            f"{prefix}sca_migrated_fix_check",
            f"selfcall-audit fix --check <agent file>, migrated tree{suffix}",
            [sca, "fix", "--check", target],
            before=lambda: migrate(root, migrated, sca),
            check=checker.nothing_to_rewrite(f"selfcall-audit fix --check, migrated tree{suffix}"),
            cwd=migrated,
        ),
    ]
    for key, label, rel, first_line in (
        ("sca_one_file", "selfcall-audit one file, comment", target, False),
        ("sca_one_edit", "selfcall-audit one file, code edit", target, True),
        ("sca_other_edit", "selfcall-audit one non-agent file", other, True),
    ):
        editor = Editor(root / rel, first_line)
        found.append(
            Measure(
                f"{prefix}{key}",
                f"{label}{suffix}",
                [*scan, rel],
                before=editor.edit,
                after=editor.restore,
                check=checker.one_file(f"{label}{suffix}", rel, shift=int(first_line)),
                cwd=root if against else None,
            )
        )
    # A whole scan after an agent's code changed, as CI scans a pull request with the last run's
    # cache: the stored result no longer holds, the facts of every other file do. The tree is then
    # restored and scanned again, unmeasured, so that the rows after it find the cache as before.
    editor = Editor(root / target, first_line=True)
    label = f"selfcall-audit whole, after an agent edit{suffix}"

    def restored() -> None:
        editor.restore()
        run(scan, root)

    found.append(
        Measure(
            f"{prefix}sca_edit_whole",
            label,
            scan,
            before=editor.edit,
            after=restored,
            check=checker.edited(label, target),
            cwd=root if against else None,
        )
    )
    return found


def migrate(root: Path, copy: Path, sca: str) -> None:
    """`copy`: the tree at `root` as `sca fix` leaves it, made the first time it is asked for."""
    if not copy.exists():
        shutil.copytree(root, copy, symlinks=True, ignore=shutil.ignore_patterns(CACHE_DIR, ".ruff_cache"))
        run([sca, "fix"], copy)


def measures(
    root: Path, workdir: Path, checker: Checker, sca: str, target: str, other: str
) -> tuple[list[Measure], list[str]]:
    """The commands to compare, and a note for each peer that is not installed."""
    scan = [sca, "scan", "--format", "json"]
    found = sca_measures(root, checker, sca, target, other)
    # The same one-file scan through click's command line, as any command line the shortcut does
    # not read runs: what `frontends/quick.py` saves.
    editor = Editor(root / target, first_line=False)
    found.append(
        Measure(
            "sca_one_file_click",
            "selfcall-audit one file, comment, through click",
            [sys.executable, "-c", CLICK_RUNNER, *scan[1:], target],
            before=editor.edit,
            after=editor.restore,
            check=checker.one_file("through click", target, shift=0),
        )
    )
    copy = workdir / "fix-copy"  # a fresh copy for each run of `fix`, which rewrites it

    def fresh_copy() -> None:
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(root, copy, symlinks=True, ignore=shutil.ignore_patterns(CACHE_DIR, ".ruff_cache"))

    found.append(
        Measure(
            "sca_fix",
            "selfcall-audit fix (fresh copy)",
            [sca, "fix"],
            before=fresh_copy,
            check=checker.fix("selfcall-audit fix", copy),
            cwd=copy,
        )
    )
    # The interpreter's own start-up: the floor under any one-file run. Without `site` too: .pth
    # files that import modules at every start (editable installs' finders, injected hooks) raise
    # that floor, and with it make every one-file ratio look better than on a clean install.
    found.append(Measure("python_pass", "python -c pass", [sys.executable, "-c", "pass"]))
    found.append(Measure("python_no_site", "python -S -c pass", [sys.executable, "-S", "-c", "pass"]))
    notes = [f"one-file targets: {target} (an agent), {other} (not an agent)"]
    semgrep = find_tool("semgrep")
    if semgrep:
        rule = workdir / "selfcall.semgrep.yaml"
        rule.write_text(SEMGREP_RULE, encoding="utf-8")
        command = [semgrep, "scan", "--config", str(rule), "--metrics", "off", "--disable-version-check"]
        found.append(
            Measure(
                "semgrep",
                "semgrep (self-call rule)",
                [*command, "--json", "--quiet", "."],
                ok_codes=(0,),
                check=lambda outcome: len(json.loads(outcome.stdout)["results"]),
                optional=True,
            )
        )
    else:
        notes.append("skipped semgrep: not installed (pip install semgrep)")
    ruff = find_tool("ruff")
    if ruff:
        for key, label, extra in (
            ("ruff_cold", "ruff check cold", ["--no-cache"]),
            ("ruff_warm", "ruff check warm", []),
        ):
            found.append(
                Measure(key, label, [ruff, "check", *extra, "."], check=ruff_diagnostics, optional=True)
            )
    else:
        notes.append("skipped ruff: not installed (pip install ruff)")
    flake8 = find_tool("flake8")
    if flake8:
        found.append(
            Measure(
                "flake8",
                "flake8 --select SCA",
                [flake8, "--select", "SCA", "."],
                check=checker.flake8("flake8 --select SCA"),
            )
        )
        if importable("flake8"):
            for key, label, which in (
                ("flake8_alone", "flake8 without the plugin", "without"),
                ("flake8_plugin", "flake8 with the plugin", "with"),
            ):
                found.append(
                    Measure(
                        key,
                        label,
                        [sys.executable, "-c", FLAKE8_RUNNER, which, "."],
                        check=checker.flake8(label) if which == "with" else checker.no_sca(label),
                    )
                )
    else:
        notes.append("skipped flake8: not installed (pip install flake8)")
    # Where each peer was found: a version manager's shim on PATH (pyenv's) adds its own start-up,
    # about 0.1 s, to every run of the tool it stands for.
    notes[1:1] = [
        f"{name}: {path}" for name, path in (("semgrep", semgrep), ("ruff", ruff), ("flake8", flake8)) if path
    ]
    return found, notes


def print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print(
            "  ".join(
                cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))
            )
        )


def machine() -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} CPUs, load average {load} (other work on the machine slows every tool alike)"


def describe(root: Path) -> tuple[int, bool]:
    """Number of .py files (outside tool folders) and whether the tree is a git checkout."""
    skipped = {".git", CACHE_DIR, ".ruff_cache", "__pycache__"}
    count = 0
    for _, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skipped]
        count += sum(name.endswith(".py") for name in filenames)
    return count, (root / ".git").exists()


def warm_up(commands: list[Measure], cwd: Path, notes: list[str]) -> list[Measure]:
    """The unmeasured round: an optional command that fails in it is left out with a note; our own
    commands may not fail."""
    working = []
    for measure in commands:
        try:
            measure.once(cwd, record=False)
        except BenchmarkError as exc:
            if not measure.optional:
                raise
            notes.append(f"skipped {measure.key}: it failed: {exc}")
            continue
        working.append(measure)
    return working


def importable(name: str) -> bool:
    """Can this interpreter import the module?"""
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def stdlib_floor(one_file: Measure, root: Path) -> Measure | None:
    """`python -c 'import ...'` of the standard-library modules a one-file run loads (read from
    the run's `PYTHONPROFILEIMPORTTIME` report, its edit made as in the measured runs): a floor
    under the one-file ratios that no code of selfcall-audit's own can go below."""
    one_file.before()
    try:
        outcome = run(one_file.command, root, env={**ENVIRONMENT, "PYTHONPROFILEIMPORTTIME": "1"})
    finally:
        one_file.after()
    names = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", outcome.stderr, re.MULTILINE)
    if outcome.returncode not in one_file.ok_codes or "selfcall_audit" not in names:
        return None
    # The report also names the imports that failed (`_winapi`, tried and caught off Windows).
    modules = sorted({n for n in names if n.split(".")[0] in sys.stdlib_module_names and importable(n)})
    return Measure(
        "python_stdlib",
        f"python -c 'import <{len(modules)} stdlib modules of a one-file run>'",
        [sys.executable, "-c", "import " + ", ".join(modules)],
        optional=True,
    )


def listing_floors(stdlib: Measure, root: Path) -> list[Measure]:
    """git's listing of the checkout at `root`, then a status of each listed file (`LISTING_FLOOR`):
    with nothing imported, the floor under any run that checks every file through git, and while
    `stdlib`'s imports load, the floor under a one-file run as it loads today; none outside a git
    checkout, where the tool walks the folders itself."""
    if not (root / ".git").exists() or not hasattr(os, "posix_spawnp"):
        return []
    modules = stdlib.command[-1].removeprefix("import ").split(", ")
    return [
        Measure(
            "python_git",
            "git lists the files, then a status of each, nothing imported",
            [sys.executable, "-c", LISTING_FLOOR],
            optional=True,
        ),
        Measure(
            "python_listing",
            "the same while the one-file run's stdlib modules load",
            [sys.executable, "-c", LISTING_FLOOR, *modules],
            optional=True,
        ),
    ]


def side_by_side(
    root: Path,
    workdir: Path,
    expected: list[list] | None,
    repeat: int,
    sca: str,
    only: frozenset[str] | None = None,
    against: str | None = None,
) -> int:
    files, git = describe(root)
    checker = Checker(expected)
    target = one_file_target(root, checker.expected, sca)
    other = other_file_target(root, target)
    commands, notes = measures(root, workdir, checker, sca, target, other)
    old = Checker(expected)  # the other install's findings, checked apart: they may differ
    if against is not None:
        copy = workdir / "tree-against"
        shutil.copytree(root, copy, symlinks=True, ignore=shutil.ignore_patterns(CACHE_DIR))
        commands += sca_measures(copy, old, against, target, other, against=True)
        notes.append(f"--against: {against}, in a copy of the tree of its own")
    if only is not None:  # the cold scans stay: the others' findings are checked against them
        commands = [
            m for m in commands if m.key.removeprefix("against_") in only or m.key.endswith("sca_cold")
        ]
    print(f"tree: {files} .py files, {'a git checkout' if git else 'not a git checkout'}; {repeat} rounds")
    print(machine())
    commands = warm_up(commands, root, notes)
    one_file = next((m for m in commands if m.key == "sca_one_file"), None)
    floor = stdlib_floor(one_file, root) if one_file is not None else None
    if floor is not None:
        commands += warm_up([floor, *listing_floors(floor, root)], root, notes)
    elif one_file is not None:
        notes.append("skipped python_stdlib: the one-file run's import report could not be read")
    for note in notes:
        print(note)
    for _ in range(repeat):
        for measure in commands:
            measure.once(root, record=True)
    for measure in commands:
        measure.once(root, record=False, peak=True)

    rows = []
    for m in commands:
        target = TARGET_SECONDS.get(m.key)
        rows.append(
            [
                m.label,
                f"{m.median:.3f}",
                f"{min(m.seconds):.3f}",
                f"{max(m.seconds):.3f}",
                f"{m.max_rss_kb / 1024:.0f}",
                "-" if m.findings is None else str(m.findings),
                f"<= {target}" if target else "",
            ]
        )
    print()
    print_table(rows, ["command", "median s", "min s", "max s", "peak MB", "findings", "target s"])

    by_key = {m.key: m for m in commands}
    values: dict[str, str] = {"files": str(files), "git": "yes" if git else "no", "repeat": str(repeat)}
    values.update({f"{m.key}_s": f"{m.median:.4f}" for m in commands})
    values.update({f"{m.key}_peak_mb": f"{m.max_rss_kb / 1024:.1f}" for m in commands})
    wanted = [  # name, what is measured, what it is compared with, sense, target
        ("cold_speedup_vs_semgrep", "semgrep", "sca_cold", ">=", TARGET_COLD_SPEEDUP),
        ("warm_vs_ruff_warm", "sca_warm", "ruff_warm", "<=", TARGET_WARM_VS_RUFF),
        ("cold_vs_ruff_cold", "sca_cold", "ruff_cold", "<=", TARGET_COLD_VS_RUFF),
        ("flake8_plugin_vs_alone", "flake8_plugin", "flake8_alone", "<=", TARGET_FLAKE8_PLUGIN),
        ("fix_vs_cold", "sca_fix", "sca_cold", "<=", TARGET_FIX_VS_COLD),
        *(
            (f"{key.removeprefix('sca_')}_vs_python_pass", key, "python_pass", "<=", target)
            for key, target in TARGET_ONE_FILE_VS_PYTHON.items()
        ),
        # a migrated project's warm scan and pre-commit `fix --check`, against ruff's warm lint
        ("migrated_warm_vs_ruff_warm", "sca_migrated_warm", "ruff_warm", "", None),
        ("migrated_fix_check_vs_ruff_warm", "sca_migrated_fix_check", "ruff_warm", "", None),
        # a pull request's gate with the cache warm, and a whole scan after an agent edit, against
        # a cold scan: no target
        ("diff_base_vs_cold", "sca_diff_base", "sca_cold", "", None),
        ("edit_whole_vs_cold", "sca_edit_whole", "sca_cold", "", None),
        # what the command-line shortcut (`frontends/quick.py`) buys a one-file run: no target
        ("one_file_through_click_vs_quick", "sca_one_file_click", "sca_one_file", "", None),
    ]
    ratios = [  # a peer that is skipped has no ratio
        (name, by_key[top].median / by_key[bottom].median, sense, target)
        for name, top, bottom, sense, target in wanted
        if top in by_key and bottom in by_key
    ]
    print()
    for key, ratio, sense, target in ratios:
        if target is None:
            print(f"{key}: {ratio:.2f}x")
        else:
            met = ratio >= target if sense == ">=" else ratio <= target
            print(f"{key}: {ratio:.2f}x (target {sense} {target:g}x: {'met' if met else 'NOT met'})")
        values[key] = f"{ratio:.3f}"
    for m in commands:  # this install against the other, row by row: no worse by more than 10%
        if (then := by_key.get(f"against_{m.key}")) is not None:
            ratio = m.median / then.median
            met = "met" if ratio <= TARGET_VS_AGAINST else "NOT met"
            print(f"{m.key}_vs_against: {ratio:.2f}x (target <= {TARGET_VS_AGAINST:g}x: {met})")
            values[f"{m.key}_vs_against"] = f"{ratio:.3f}"
    for problem in old.problems:
        print(f"--against differs: {problem}")
    if "sca_cold" in by_key:
        peak = by_key["sca_cold"].max_rss_kb / 1024
        met = "met" if peak <= TARGET_COLD_PEAK_MB else "NOT met"
        print(f"cold_peak_mb: {peak:.1f} (target <= {TARGET_COLD_PEAK_MB:g} MB: {met})")
    if "python_stdlib" in by_key and "python_pass" in by_key:
        floor = by_key["python_stdlib"].median / by_key["python_pass"].median
        print(f"stdlib_vs_python_pass: {floor:.2f}x (the floor under the one-file ratios)")
        values["stdlib_vs_python_pass"] = f"{floor:.3f}"
    if "python_git" in by_key and "python_pass" in by_key:
        floor = by_key["python_git"].median / by_key["python_pass"].median
        print(
            f"git_listing_vs_python_pass: {floor:.2f}x (the floor under any run that checks every file through git)"
        )
        values["git_listing_vs_python_pass"] = f"{floor:.3f}"
    if "python_listing" in by_key and "python_pass" in by_key:
        floor = by_key["python_listing"].median / by_key["python_pass"].median
        print(f"listing_vs_python_pass: {floor:.2f}x (the floor under a one-file run that checks every file)")
        values["listing_vs_python_pass"] = f"{floor:.3f}"
    findings = by_key["sca_cold"].findings
    values["findings"] = str(findings)
    if expected is not None:
        values["expected"] = str(len(expected))
    values["exact" if expected is not None else "consistent"] = "yes" if checker.exact else "no"
    for problem in checker.problems:
        print(f"MISMATCH {problem}")
    print()
    for key, value in values.items():
        print(f"{key}={value}")
    return 0 if checker.exact else 1


def scaling(sizes: list[int], workdir: Path, repeat: int, seed: int, git: bool, sca: str) -> int:
    print(f"cold scans of generated trees, median of {repeat} rounds{' (git checkouts)' if git else ''}")
    print(machine())
    rows, values, exact = [], {}, True
    for size in sizes:
        tree = workdir / f"tree-{size}"
        expected = generate(tree, size, seed, git)
        checker = Checker(expected)
        measure = Measure(
            "sca_cold",
            f"selfcall-audit cold ({size} files)",
            [sca, "scan", "--format", "json"],
            before=lambda tree=tree: shutil.rmtree(tree / CACHE_DIR, ignore_errors=True),
            check=checker.whole(f"cold scan of {size} files"),
        )
        warm_up([measure], tree, [])
        for _ in range(repeat):
            measure.once(tree, record=True)
        measure.once(tree, record=False, peak=True)
        exact = exact and checker.exact
        for problem in checker.problems:
            print(f"MISMATCH {problem}")
        per_file_ms = measure.median / size * 1000
        peak_mb = measure.max_rss_kb / 1024
        rows.append(
            [
                str(size),
                str(checker.files_parsed),
                f"{measure.median:.3f}",
                f"{per_file_ms:.3f}",
                f"{peak_mb:.0f}",
                f"{measure.findings}/{len(expected)}",
                "yes" if checker.exact else "no",
            ]
        )
        values.update(
            {
                f"scaling_{size}_cold_s": f"{measure.median:.4f}",
                f"scaling_{size}_ms_per_file": f"{per_file_ms:.4f}",
                f"scaling_{size}_peak_mb": f"{peak_mb:.1f}",
                f"scaling_{size}_files_parsed": str(checker.files_parsed),
                f"scaling_{size}_findings": str(measure.findings),
                f"scaling_{size}_expected": str(len(expected)),
            }
        )
        shutil.rmtree(tree)
    print()
    print_table(rows, ["py files", "parsed", "cold s", "ms/file", "peak MB", "found/expected", "exact"])
    values["scaling_exact"] = "yes" if exact else "no"
    print()
    for key, value in values.items():
        print(f"{key}={value}")
    return 0 if exact else 1


QUICK_FILES = 40
QUICK_REPEAT = 2


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def sizes(text: str) -> list[int]:
    return [positive(size) for size in text.split(",")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="selfcall-audit against semgrep, ruff and flake8 on the same tree, side by side.",
        epilog="Details: the module docstring, and benchmarks/README.md.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--repo", type=Path, help="measure a copy of this tree instead of a generated one")
    where.add_argument(
        "--scaling", type=sizes, metavar="SIZES", help="comma-separated tree sizes (.py files) for cold scans"
    )
    parser.add_argument(
        "--files", type=positive, help="size of the generated tree in .py files (default 1600)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated trees (default 0)")
    parser.add_argument("--git", action="store_true", help="make generated trees git checkouts")
    parser.add_argument("--repeat", type=positive, help="measured rounds per command (default 5)")
    parser.add_argument(
        "--only", type=lambda text: frozenset(text.split(",")), metavar="KEYS", help="measure only these rows"
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"a {QUICK_FILES}-file tree and {QUICK_REPEAT} rounds"
    )
    parser.add_argument(
        "--against",
        metavar="PATH",
        help="another selfcall-audit executable (an earlier version's virtualenv) whose rows are measured "
        "in the same rounds, each compared with this one's",
    )
    args = parser.parse_args(argv)
    repeat = args.repeat or (QUICK_REPEAT if args.quick else 5)
    files = args.files or (QUICK_FILES if args.quick else 1600)

    sca = find_tool("selfcall-audit")
    if sca is None:
        print("selfcall-audit is not installed: pip install -e .", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="scan-bench-") as temp:
        workdir = Path(temp)
        try:
            if args.scaling:
                return scaling(args.scaling, workdir, repeat, args.seed, args.git, sca)
            root = workdir / "tree"
            if args.repo:
                print(f"copying {args.repo} (the benchmark edits a file and writes caches in its copy)")
                shutil.copytree(
                    args.repo, root, symlinks=True, ignore=shutil.ignore_patterns(CACHE_DIR, ".ruff_cache")
                )
                expected = None
            else:
                expected = generate(root, files, args.seed, args.git)
                print(f"generated {files} .py files with {len(expected)} self-calls ({EXPECTED_FILE})")
            return side_by_side(root, workdir, expected, repeat, sca, args.only, args.against)
        except BenchmarkError as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())

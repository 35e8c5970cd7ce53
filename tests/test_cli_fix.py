"""`selfcall-audit fix` and `selfcall-audit helper` as users run them: modes, exit codes, safety.

The byte-for-byte rewrites of each form live in tests/codemod; here the project is the `plain`
case unless a test needs another shape.
"""

from __future__ import annotations

import ast
import errno
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from test_quick_scan import imported

from selfcall_audit.api import plan_fix
from selfcall_audit.config import load_settings
from selfcall_audit.frontends import fixing
from selfcall_audit.migrate import arguments, codemod
from selfcall_audit.migrate.codemod import Helper
from selfcall_audit.migrate.vendor import helper_source, is_vendored

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "tests" / "codemod" / "cases"
APP = "responses_api_agents/x/app.py"
BEFORE = (CASES / "plain" / "before.py").read_bytes()
AFTER = (CASES / "plain" / "after.py").read_bytes()
DEFAULT_HELPER = Helper.parse(codemod.DEFAULT_HELPER)


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    """A small NeMo Gym-shaped repo with one agent that self-calls once, fixably, to be rewritten to
    the helper installed with selfcall-audit; the current folder (paths are printed relative to it)."""
    root = tmp_path / "repo"
    (root / "nemo_gym").mkdir(parents=True)
    (root / "nemo_gym" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "toy"\n\n[tool.selfcall-audit]\nhelper = "selfcall_audit.inprocess:responses_in_process"\n'
    )  # the rewrites as in tests/codemod; fix's default, a vendored helper, is tested in test_vendor.py
    app = root / APP
    app.parent.mkdir(parents=True)
    app.write_bytes(BEFORE)
    monkeypatch.chdir(root)
    return root


def add_agent(root: Path, folder: str, case: str) -> Path:
    path = root / "responses_api_agents" / folder / "app.py"
    path.parent.mkdir(parents=True)
    path.write_bytes((CASES / case / "before.py").read_bytes())
    return path


# modes and exit codes ------------------------------------------------------------------------


def test_fix_rewrites_reports_and_exits_0_when_nothing_remains(project: Path, cli) -> None:
    result = cli("fix", "--no-cache", project)

    assert result.exit_code == 0
    assert (project / APP).read_bytes() == AFTER
    assert AFTER.splitlines()[35 - 1].strip() == b"response = await responses_in_process("
    assert result.stdout == (  # the line the call now starts on, below the helper's new import
        f"{APP}:35: rewrote self-call to responses_in_process\n"
        "Rewrote 1 self-call in 1 file; none left to fix by hand.\n"
    )


def test_fix_exits_1_and_says_why_when_a_self_call_remains(project: Path, cli) -> None:
    add_agent(project, "scoped", "async_with")

    result = cli("fix", "--no-cache", project)

    assert result.exit_code == 1
    assert (project / APP).read_bytes() == AFTER
    assert (
        "responses_api_agents/scoped/app.py:9:20: SCA001 not rewritten: "
        "the response is used as an async context manager\n"
    ) in result.stdout
    assert result.stdout.endswith("Rewrote 1 self-call in 1 file; 1 self-call to fix by hand.\n")


def test_fix_on_a_project_without_self_calls_exits_0(tmp_path: Path, cli) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "tool.py").write_text("print('hello')\n")

    result = cli("fix", "--no-cache", tmp_path)

    assert result.exit_code == 0
    assert result.stdout == "Nothing to rewrite; none left to fix by hand.\n"


def test_libcst_loads_only_when_there_is_a_self_call_to_rewrite(project: Path, command, monkeypatch) -> None:
    """A migrated project's `fix` (the pre-commit hook, `fix --check` in CI), or one whose self-calls
    all need a hand, is told so without libcst, which takes longer to load than the analysis."""
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # each import on stderr, as `-X importtime`
    scoped = add_agent(project, "scoped", "async_with")  # a self-call fix leaves to a hand
    by_hand = command("fix", "--check", scoped)
    rewrites = command("fix", "--check", project / APP)
    command("fix", project)
    migrated = command("fix", "--check", project / APP)

    assert (by_hand.returncode, rewrites.returncode, migrated.returncode) == (1, 1, 0)
    assert by_hand.stdout.endswith("Nothing to rewrite; 1 self-call to fix by hand.\n")
    assert migrated.stdout == "Nothing to rewrite; none left to fix by hand.\n"
    assert "libcst" in imported(rewrites.stderr)
    assert "libcst" not in imported(by_hand.stderr) | imported(migrated.stderr)


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands for git")
def test_fix_lists_the_files_with_the_git_started_first(
    project: Path, command, monkeypatch, tmp_path
) -> None:
    """The console script starts git's listing before its modules load; `fix` uses it, as `scan`
    does, instead of listing the work tree a second time."""
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    log, wrapper = tmp_path / "git.log", tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {shutil.which("git")} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")

    command("fix", APP, cwd=project)
    log.unlink()
    check = command("fix", "--check", APP, cwd=project)  # the pre-commit hook, once migrated

    assert check.returncode == 0, check.stdout + check.stderr
    assert [line for line in log.read_text().splitlines() if "ls-files" in line] == [
        f"-C {project} -c core.fsmonitor=false -c core.hooksPath=/dev/null ls-files -z --cached --others --exclude-standard"
    ]


def test_a_helper_that_cannot_be_written_stops_the_run_with_exit_2_and_nothing_rewritten(
    project: Path, cli, monkeypatch
) -> None:
    (project / "pyproject.toml").write_text('[project]\nname = "toy"\n')  # the default: a copy in nemo_gym

    def refused(path: Path) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(fixing, "vendor_helper", refused)  # as the fix command calls it

    result = cli("fix", "--no-cache", project)

    assert result.exit_code == 2
    assert result.stderr == (
        "selfcall-audit: cannot write the helper: Permission denied; no file of this project was rewritten\n"
    )
    assert result.stdout == ""
    assert (project / APP).read_bytes() == BEFORE


def test_diff_prints_a_patch_that_applies_and_writes_nothing(project: Path, cli, tmp_path: Path) -> None:
    result = cli("fix", "--no-cache", "--diff", project)

    assert result.exit_code == 1
    assert (project / APP).read_bytes() == BEFORE
    assert result.stdout.startswith(f"--- a/{APP}\n+++ b/{APP}\n@@ ")
    assert f"{APP}:34: would rewrite self-call to responses_in_process" in result.stderr
    patch_file = tmp_path / "fix.patch"
    patch_file.write_text(result.stdout)
    subprocess.run(["patch", "-p1", "-s", "-i", str(patch_file)], cwd=project, check=True)
    assert (project / APP).read_bytes() == AFTER

    clean = cli("fix", "--no-cache", "--diff", project)
    assert (clean.exit_code, clean.stdout) == (0, "")


def test_the_patch_of_a_file_with_a_form_feed_applies(project: Path, cli, tmp_path: Path) -> None:
    """A form feed does not end a line for patch: the diff must not split one there."""
    case = CASES / "form_feed"
    (project / APP).write_bytes((case / "before.py").read_bytes())
    patch_file = tmp_path / "fix.patch"
    patch_file.write_text(cli("fix", "--no-cache", "--diff", project).stdout)

    subprocess.run(["patch", "-p1", "-s", "-i", str(patch_file)], cwd=project, check=True)

    assert (project / APP).read_bytes() == (case / "after.py").read_bytes()


def _latin_1(source: bytes) -> bytes:
    """With a coding declaration, and a character of that encoding in a line of the call."""
    accented = "# paramètres de l'épisode".encode("latin-1")
    return b"# -*- coding: latin-1 -*-\n" + source.replace(b"# the episode's parameters", accented)


@pytest.mark.parametrize(
    "variant",
    [_latin_1, lambda source: source.replace(b"\n", b"\r")],
    ids=["latin-1", "carriage returns alone"],
)
@pytest.mark.slow
def test_the_patch_applies_with_git_whatever_the_encoding_and_line_endings(
    project: Path, variant: Callable[[bytes], bytes]
) -> None:
    (project / APP).write_bytes(variant(BEFORE))

    diff = subprocess.run(
        [sys.executable, "-m", "selfcall_audit", "fix", "--no-cache", "--diff"],
        capture_output=True,
        cwd=project,
        timeout=120,
    )
    applied = subprocess.run(["git", "apply", "-"], input=diff.stdout, capture_output=True, cwd=project)

    assert diff.returncode == 1, diff.stderr
    assert applied.returncode == 0, applied.stderr
    assert (project / APP).read_bytes() == variant(AFTER)


@pytest.mark.parametrize("folder", ["tab\there", "escape\x1b[31m", 'quote"back\\slash', "accentué"])
def test_the_patch_of_a_file_with_an_unusual_name_applies_with_git(project: Path, folder: str, cli) -> None:
    """git quotes such a name in the header (a tab would end it, an escape would reach a terminal);
    `git apply` rejects the whole patch when it is not quoted so."""
    moved = project / "responses_api_agents" / folder / "app.py"
    moved.parent.mkdir()
    (project / APP).rename(moved)

    diff = cli("fix", "--no-cache", "--diff", project)
    applied = subprocess.run(
        ["git", "apply", "-"], input=diff.stdout.encode(), capture_output=True, cwd=project
    )

    assert diff.exit_code == 1, diff.stderr
    assert "\x1b" not in diff.stdout
    assert applied.returncode == 0, applied.stderr
    assert moved.read_bytes() == AFTER


def test_check_writes_nothing_and_exits_1_while_anything_would_change(project: Path, cli) -> None:
    result = cli("fix", "--no-cache", "--check", project)

    assert result.exit_code == 1
    assert (project / APP).read_bytes() == BEFORE
    assert result.stdout == (
        f"{APP}:34: would rewrite self-call to responses_in_process\n"
        "Would rewrite 1 self-call in 1 file; none left to fix by hand.\n"
    )
    cli("fix", "--no-cache", project)
    assert cli("fix", "--no-cache", "--check", project).exit_code == 0


def test_quiet_prints_only_what_is_left(project: Path, cli) -> None:
    add_agent(project, "impatient", "extra_kwarg")

    result = cli("fix", "--no-cache", "-q", project)

    assert result.exit_code == 1
    assert result.stdout == (
        "responses_api_agents/impatient/app.py:9:26: SCA001 not rewritten: "
        "the in-process helper takes no `timeout` argument\n"
    )


def test_paths_limit_which_files_are_rewritten(project: Path, cli) -> None:
    other = add_agent(project, "y", "loop")

    result = cli("fix", "--no-cache", project / "responses_api_agents" / "y")

    assert result.exit_code == 0
    assert other.read_bytes() == (CASES / "loop" / "after.py").read_bytes()
    assert (project / APP).read_bytes() == BEFORE


@pytest.mark.slow
def test_the_exit_codes_hold_for_a_real_process(project: Path, command) -> None:
    add_agent(project, "scoped", "async_with")

    check = command("fix", "--no-cache", "--check", project)
    diff = command("fix", "--no-cache", "--diff", project)
    done = command("fix", "--no-cache", project)
    bad = command("fix", "--helper", "no-colon", project)

    assert (check.returncode, diff.returncode, done.returncode, bad.returncode) == (1, 1, 1, 2)
    assert diff.stdout.startswith("--- a/responses_api_agents/x/app.py")
    assert "not rewritten" not in diff.stdout and "not rewritten" in diff.stderr
    assert (project / APP).read_bytes() == AFTER
    assert "MODULE:NAME" in bad.stderr


# the helper to call ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["no-colon", "pkg:", ":name", "pkg:a.b", "pkg.1x:name", "pkg:class"])
def test_a_malformed_helper_is_a_usage_error(project: Path, cli, value: str) -> None:
    result = cli("fix", "--helper", value, project)

    assert result.exit_code == 2
    assert "MODULE:NAME" in result.stderr
    assert (project / APP).read_bytes() == BEFORE


def test_a_malformed_helper_setting_is_a_usage_error(project: Path, cli) -> None:
    (project / "pyproject.toml").write_text('[tool.selfcall-audit]\nhelper = "responses_in_process"\n')

    result = cli("fix", project)

    assert result.exit_code == 2
    assert "pyproject.toml: `helper`: the helper must be given as MODULE:NAME" in result.stderr
    assert (project / APP).read_bytes() == BEFORE


def test_helper_option_names_the_import_and_the_call(project: Path, cli) -> None:
    result = cli("fix", "--no-cache", "--helper", "shared.loopback:call_local", project)

    text = (project / APP).read_text()
    assert result.exit_code == 0
    assert "from shared.loopback import call_local\n" in text
    assert "response = await call_local(\n            self,\n" in text
    assert "responses_in_process" not in text


# safety ----------------------------------------------------------------------------------------


def test_file_mode_is_kept_and_no_temporary_file_is_left(project: Path, cli) -> None:
    app = project / APP
    app.chmod(0o751)

    cli("fix", "--no-cache", project)

    assert stat.S_IMODE(app.stat().st_mode) == 0o751
    assert sorted(p.name for p in app.parent.iterdir()) == ["app.py"]


def test_a_file_changed_after_the_analysis_is_not_written(project: Path) -> None:
    plan = plan_fix(project, load_settings(project).with_overrides(cache_dir=""), [project], DEFAULT_HELPER)
    edited = BEFORE + b"# edited meanwhile\n"
    (project / APP).write_bytes(edited)

    plan.write()

    assert (project / APP).read_bytes() == edited
    assert plan.rewritten == []
    [(finding, reason)] = plan.not_fixed
    assert (finding.path, reason) == (
        APP,
        "the file changed since it was analysed; run `selfcall-audit fix` again",
    )
    assert plan.errors == []


def test_a_file_outside_the_root_is_never_written(project: Path, tmp_path: Path, cli) -> None:
    outside = tmp_path / "elsewhere" / "app.py"
    outside.parent.mkdir()
    outside.write_bytes(BEFORE)
    linked = add_agent(project, "linked", "plain")
    linked.unlink()
    linked.symlink_to(outside)

    result = cli("fix", "--no-cache", project)

    assert outside.read_bytes() == BEFORE and linked.is_symlink()
    assert (
        "responses_api_agents/linked/app.py:34:26: SCA001 not rewritten: "
        "the file resolves outside the project root; it was not written"
    ) in result.stdout
    assert (project / APP).read_bytes() == AFTER
    assert result.exit_code == 1


@pytest.mark.slow
def test_a_file_linked_under_another_name_in_the_project_is_rewritten_once(project: Path, command) -> None:
    linked = project / "responses_api_agents" / "y" / "app.py"
    linked.parent.mkdir()
    linked.symlink_to("../x/app.py")

    diff = command("fix", "--no-cache", "--diff", cwd=project)
    applies = subprocess.run(
        ["git", "apply", "--check"], input=diff.stdout, text=True, capture_output=True, cwd=project
    )
    done = command("fix", "--no-cache", cwd=project)

    assert re.findall(r"^\+\+\+ .*$", diff.stdout, re.MULTILINE) == [f"+++ b/{APP}"]  # what is written
    assert applies.returncode == 0, applies.stderr
    assert done.returncode == 0, done.stdout
    assert "not rewritten" not in done.stdout
    assert (project / APP).read_bytes() == AFTER and linked.is_symlink()


def test_a_broken_file_is_left_alone_and_the_others_are_fixed(project: Path, cli) -> None:
    broken = project / "responses_api_agents" / "broken" / "app.py"
    broken.parent.mkdir()
    broken_text = BEFORE.replace(b"async def run(self,", b"async def run(self")
    broken.write_bytes(broken_text)

    result = cli("fix", "--no-cache", project)

    assert broken.read_bytes() == broken_text
    assert (project / APP).read_bytes() == AFTER
    assert re.search(
        r"responses_api_agents/broken/app\.py:(\d+):(\d+): SCA900 syntax error at line \1, column \2",
        result.stdout,
    )
    assert result.exit_code == 1  # a self-call in the broken file would go unseen, as scan says


def test_output_that_would_not_parse_is_never_written(project: Path, cli, monkeypatch) -> None:
    import libcst as cst

    monkeypatch.setattr(
        arguments, "rewritten_call", lambda call, *_: call.with_changes(func=cst.Name("class"))
    )

    result = cli("fix", "--no-cache", project)

    assert result.exit_code == 2
    assert (project / APP).read_bytes() == BEFORE
    assert "the rewritten file would not parse" in result.stderr


# the fixture repos ------------------------------------------------------------------------------


# Planning this one's rewrites takes seconds (each planned call walks the module again): in the
# slow set, which CI runs, until that walk is shared.
SLOW_TO_FIX = {"shape-values-as-computed"}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.slow) if name in SLOW_TO_FIX else name
        for name in sorted(p.name for p in (REPO / "fixtures").iterdir() if p.is_dir())
    ],
)
def test_every_fixture_repo_is_left_with_no_fixable_self_call(name: str, tmp_path: Path, cli) -> None:
    root = tmp_path / name
    shutil.copytree(REPO / "fixtures" / name, root)
    originals = {p: p.read_bytes() for p in root.rglob("*.py")}

    first = cli("fix", "--no-cache", root)
    options: tuple[str, ...] = ()
    if first.exit_code == 2:  # agents in unrelated packages and no nemo_gym: no place for the helper
        assert "no `nemo_gym` package and no package holding every rewritten file" in first.stderr
        assert {p: p.read_bytes() for p in root.rglob("*.py")} == originals
        options = ("--helper", "selfcall_audit.inprocess:responses_in_process")
        first = cli("fix", "--no-cache", *options, root)
    after = {p: p.read_bytes() for p in root.rglob("*.py")}
    scan = json.loads(cli("scan", "--no-cache", "--format", "json", root).stdout)
    second = cli("fix", "--no-cache", *options, root)

    for path, data in after.items():
        if data != originals.get(path):
            ast.parse(data, str(path))
    assert all(is_vendored(after[path]) for path in set(after) - set(originals))
    left = [f for f in scan["findings"] if f["code"] == "SCA001" and f["fixable"]]
    refused = [line for line in first.stdout.splitlines() if "SCA001 not rewritten: " in line]
    assert len(left) <= len(refused)  # only calls the codemod explained it would not touch
    assert {p: p.read_bytes() for p in root.rglob("*.py")} == after
    assert "Nothing to rewrite" in second.stdout
    assert first.exit_code == second.exit_code


# vendoring the helper ---------------------------------------------------------------------------


def test_helper_write_vendors_the_module_and_says_how_to_use_it(project: Path, cli, monkeypatch) -> None:
    monkeypatch.chdir(project)

    result = cli("helper", "--write", "nemo_gym")

    vendored = project / "nemo_gym" / "inprocess.py"
    shipped = (REPO / "selfcall_audit" / "inprocess.py").read_bytes()
    assert result.exit_code == 0
    assert vendored.read_bytes().endswith(shipped)
    assert vendored.read_bytes().startswith(b"# Vendored from selfcall-audit ")
    assert "selfcall-audit fix --helper nemo_gym.inprocess:responses_in_process" in result.stdout

    fixed = cli("fix", "--no-cache", "--helper", "nemo_gym.inprocess:responses_in_process", project)
    assert fixed.exit_code == 0
    assert "from nemo_gym.inprocess import responses_in_process\n" in (project / APP).read_text()


def test_the_vendored_helper_imports_without_selfcall_audit(project: Path, cli) -> None:
    cli("helper", "--write", project / "nemo_gym" / "inprocess.py")
    code = (
        "import sys; sys.modules['selfcall_audit'] = None\n"
        "import nemo_gym.inprocess as h\n"
        "assert callable(h.responses_in_process)\n"
    )

    done = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True)

    assert done.returncode == 0, done.stderr


def test_helper_write_refuses_to_overwrite_a_different_file_unless_forced(project: Path, cli) -> None:
    target = project / "nemo_gym" / "inprocess.py"
    target.write_text("# our own loopback\n")
    target.chmod(0o640)

    refused = cli("helper", "--write", target)
    assert refused.exit_code == 2
    assert "exists and differs from the helper; pass --force" in refused.stderr
    assert target.read_text() == "# our own loopback\n"

    forced = cli("helper", "--write", target, "--force")
    assert forced.exit_code == 0
    assert target.read_bytes() == helper_source("nemo_gym/inprocess.py")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640

    again = cli("helper", "--write", target)
    assert again.exit_code == 0
    assert again.stdout.startswith("Already up to date: ")


def test_helper_write_wants_a_python_file(project: Path, cli) -> None:
    result = cli("helper", "--write", project / "notes.txt")

    assert result.exit_code == 2
    assert "is not a .py file" in result.stderr
    assert not (project / "notes.txt").exists()


def test_helper_write_as_a_real_command(project: Path, command) -> None:
    (project / "vendor").mkdir()
    done = command("helper", "--write", "vendor/loopback.py", cwd=project)

    assert done.returncode == 0, done.stderr
    assert (project / "vendor" / "loopback.py").read_bytes() == helper_source("vendor/loopback.py")
    assert "--helper vendor.loopback:responses_in_process" in done.stdout


def test_helper_write_refuses_a_folder_it_would_create(project: Path, cli) -> None:
    done = cli("helper", "--write", "vendor/loopback.py", cwd=project)

    assert done.exit_code == 2
    assert "the folder 'vendor' does not exist; create it first" in done.stderr
    assert not (project / "vendor").exists()


def test_helper_write_refuses_outside_the_project(project: Path, tmp_path: Path, cli) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    done = cli("helper", "--write", outside / "inprocess.py", cwd=project)

    assert done.exit_code == 2
    assert "is outside the project root" in done.stderr
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("place", ["my-tools/inprocess.py", "my-helper.py"])
def test_helper_write_says_when_the_place_cannot_be_imported(project: Path, cli, place: str) -> None:
    (project / "my-tools").mkdir()

    done = cli("helper", "--write", place, cwd=project)

    assert done.exit_code == 0, done.stderr
    assert (
        "cannot be imported by a dotted module name (a folder or file name in it is not an identifier)"
        in (done.stdout)
    )
    assert "--helper my-" not in done.stdout

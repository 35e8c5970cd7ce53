"""`selfcall-audit fix`, case by case.

Each `cases/<name>/before.py` is an agent module as found in a NeMo Gym-style repo. The test puts
it at `responses_api_agents/x/app.py` in a small project and runs the fix: the file must then be
byte for byte `after.py` (a case without one must come out unchanged), the calls left alone must
be exactly those of `case.json` with their reasons, what remains must be only those for a scan,
and a second run must change nothing. A `pyproject.toml` in the case replaces the default one.
A case with a `tests_before.py` puts it at `responses_api_agents/x/tests/test_app.py`: after the
fix it must be `tests_after.py` (or unchanged without one), and each test `fix` names must have the
fate `case.json` gives it (`"tests"`: node id within the file, reason and fate). Such a case may
take its agent module from another case (`"agent"`: that case's name), when the agent is not what
it is about.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CASES = Path(__file__).parent / "cases"
APP = "responses_api_agents/x/app.py"
TESTS = "responses_api_agents/x/tests/test_app.py"
TEST_FATE = re.compile(r"^  (?:.*/)?responses_api_agents/x/tests/test_app\.py::(\S+): (.*)$", re.M)
NOT_REWRITTEN = re.compile(
    r"^(?:.*/)?responses_api_agents/x/app\.py:\d+:\d+: SCA00\d not rewritten: (.*)$", re.M
)


def spec_of(case: Path) -> dict:
    """The case's `case.json`: what it expects besides its files ({} without one)."""
    spec = case / "case.json"
    return json.loads(spec.read_text()) if spec.exists() else {}


def agent_of(case: Path) -> Path:
    """The case whose `before.py` and `after.py` are this case's agent module: itself, or the
    one its `case.json` names (a test-update case about the tests of an agent another case has)."""
    return CASES / spec_of(case).get("agent", case.name)


def make_project(root: Path, case: Path, before: bytes | None = None) -> Path:
    """A small repo in NeMo Gym's layout: `nemo_gym` is a first-party package, as upstream."""
    root.mkdir()
    pyproject = case / "pyproject.toml"
    (root / "pyproject.toml").write_bytes(
        pyproject.read_bytes()
        if pyproject.exists()
        # the installed helper, as the after files import it; fix's default (vendored) is in test_vendor.py
        else b'[project]\nname = "toy"\n\n[tool.selfcall-audit]\nhelper = "selfcall_audit.inprocess:responses_in_process"\n'
    )
    (root / "nemo_gym").mkdir()
    (root / "nemo_gym" / "__init__.py").write_text("")
    app = root / APP
    app.parent.mkdir(parents=True)
    app.write_bytes((agent_of(case) / "before.py").read_bytes() if before is None else before)
    if (case / "tests_before.py").exists():
        (root / TESTS).parent.mkdir()
        (root / TESTS).write_bytes((case / "tests_before.py").read_bytes())
    return root


def updated_test_expectations(case: Path) -> tuple[bytes | None, list[list[str]]]:
    """The test file after the fix (None: the case has none), and the fate of each named test."""
    if not (case / "tests_before.py").exists():
        return None, []
    after = case / "tests_after.py"
    expected = (after if after.exists() else case / "tests_before.py").read_bytes()
    return expected, spec_of(case)["tests"]


def expectations(case: Path) -> tuple[bytes, list[str]]:
    agent = agent_of(case)
    after = agent / "after.py"
    expected = (after if after.exists() else agent / "before.py").read_bytes()
    return expected, spec_of(case).get("reasons", [])


@pytest.mark.parametrize("name", sorted(p.name for p in CASES.iterdir() if p.is_dir()))
def test_case(name: str, tmp_path: Path, cli) -> None:
    case = CASES / name
    expected, reasons = expectations(case)
    root = make_project(tmp_path / "repo", case)

    result = cli("fix", "--no-cache", root)

    assert (root / APP).read_bytes() == expected
    assert NOT_REWRITTEN.findall(result.stdout) == reasons
    assert result.exit_code == (1 if reasons else 0), result.stdout
    ast.parse(expected)
    test_file, fates = updated_test_expectations(case)
    if test_file is not None:
        assert (root / TESTS).read_bytes() == test_file
        assert [list(fate) for fate in TEST_FATE.findall(result.stdout)] == fates

    scan = cli("scan", "--no-cache", "--format", "json", root)
    assert len(json.loads(scan.stdout)["findings"]) == len(reasons)

    again = cli("fix", "--no-cache", root)
    assert (root / APP).read_bytes() == expected
    if test_file is not None:
        assert (root / TESTS).read_bytes() == test_file
    assert "Nothing to rewrite" in again.stdout
    assert again.exit_code == result.exit_code


def test_every_fixed_case_has_a_changed_after_and_every_refused_case_a_reason() -> None:
    """Guards the case files themselves: an after.py equal to its before.py would test nothing."""
    for case in CASES.iterdir():
        if not case.is_dir():
            continue
        expected, reasons = expectations(case)
        if (agent_of(case) / "after.py").exists():
            assert expected != (agent_of(case) / "before.py").read_bytes(), case.name
        else:
            assert reasons, f"{case.name}: a case left unchanged must say why"


def test_every_after_file_passes_isort_and_leaves_no_unused_name(tmp_path: Path) -> None:
    """The import lands where ruff's isort puts it (with NeMo Gym's settings) and no alias dangles."""
    afters = sorted(str(p) for p in [*CASES.glob("*/after.py"), *CASES.glob("*/tests_after.py")])
    isort_like_gym = "lint.isort.known-first-party = ['nemo_gym', 'responses_api_agents']"  # as in the repo
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--line-length", "119", "--select", "I,F401,F841",
         "--config", isort_like_gym, *afters],
        cwd=tmp_path,  # so that nothing but nemo_gym counts as first party
        capture_output=True,
        text=True,
    )  # fmt: skip

    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    "name", ["plain", "positional", "async_with", "walrus_in_server_name", "default_argument", "form_feed"]
)
@pytest.mark.slow
def test_case_as_a_real_command(name: str, tmp_path: Path, command) -> None:
    case = CASES / name
    expected, reasons = expectations(case)
    root = make_project(tmp_path / "repo", case)

    done = command("fix", "--no-cache", root)

    assert (root / APP).read_bytes() == expected
    assert NOT_REWRITTEN.findall(done.stdout) == reasons
    assert done.returncode == (1 if reasons else 0), done.stderr


def test_crlf_and_bom_are_kept(tmp_path: Path, cli) -> None:
    case = CASES / "plain"
    expected, _ = expectations(case)

    def windows(text: bytes) -> bytes:
        return b"\xef\xbb\xbf" + text.replace(b"\n", b"\r\n")

    root = make_project(tmp_path / "repo", case, windows((case / "before.py").read_bytes()))

    result = cli("fix", "--no-cache", root)

    assert result.exit_code == 0, result.stdout
    assert (root / APP).read_bytes() == windows(expected)


@pytest.mark.slow
def test_a_case_copied_twice_is_rewritten_in_both_files(tmp_path: Path, cli) -> None:
    root = make_project(tmp_path / "repo", CASES / "loop")
    shutil.copytree(root / "responses_api_agents" / "x", root / "responses_api_agents" / "y")

    result = cli("fix", "--no-cache", root)

    expected, _ = expectations(CASES / "loop")
    assert (root / "responses_api_agents" / "y" / "app.py").read_bytes() == expected
    assert "Rewrote 2 self-calls in 2 files; none left to fix by hand." in result.stdout

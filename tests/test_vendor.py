"""`fix` with default settings leaves a repo that runs without selfcall-audit installed: it writes the
helper into the repo and imports it from there; `scan` reports a copy that was edited or is older.
The end-to-end tests (slow) run every command as a real process; the others run it in-process."""

from __future__ import annotations

import ast
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from selfcall_audit import __version__, api
from selfcall_audit.config import load_settings
from selfcall_audit.migrate import copies
from selfcall_audit.migrate.vendor import helper_source

AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body: dict) -> dict:
        response = await self.server_client.post(
            server_name=self.config.name, url_path="/v1/responses", json=body
        )
        return await response.json()
"""
APP = "responses_api_agents/echo/app.py"
COPY = "nemo_gym/inprocess.py"
REFRESH = f"selfcall-audit helper --write {COPY} --force"


def make_repo(root: Path, *, nemo_gym: bool = True, agents: tuple[str, ...] = (APP,)) -> Path:
    (root / "pyproject.toml").parent.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "toy"\n')
    if nemo_gym:
        (root / "nemo_gym").mkdir()
        (root / "nemo_gym" / "__init__.py").write_text("")
        (root / "nemo_gym" / "base_responses_api_agent.py").write_text(
            "class SimpleResponsesAPIAgent:\n    pass\n"
        )
    for rel in agents:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(AGENT)
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def imported(source: bytes) -> set[str]:
    """The top-level packages a module imports, at any depth of its code."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def python_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.py"))}


# fix writes the helper and imports it from the repo ----------------------------------------------


@pytest.mark.slow
def test_fix_writes_the_helper_into_nemo_gym_and_imports_it_from_there(repo: Path, command) -> None:
    done = command("fix", "--no-cache", repo)

    assert done.returncode == 0, done.stderr
    assert f"{COPY}: wrote the in-process helper the rewritten calls import\n" in done.stdout
    assert (repo / COPY).read_bytes() == helper_source(COPY)
    app = (repo / APP).read_text()
    assert "from nemo_gym.inprocess import responses_in_process\n" in app
    assert "await responses_in_process(\n            self," in app
    assert not [rel for rel, data in python_files(repo).items() if "selfcall_audit" in imported(data)]


@pytest.mark.slow
def test_the_migrated_repo_imports_with_selfcall_audit_unavailable(repo: Path, command) -> None:
    command("fix", "--no-cache", repo)
    code = (
        "import sys; sys.modules['selfcall_audit'] = None\n"  # any import of it raises ImportError
        "import nemo_gym.inprocess, responses_api_agents.echo.app as app\n"
        "assert app.responses_in_process is nemo_gym.inprocess.responses_in_process\n"
    )

    done = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_a_second_fix_and_a_scan_find_nothing_to_do(repo: Path, command) -> None:
    command("fix", "--no-cache", repo)
    after = python_files(repo)

    again = command("fix", "--no-cache", repo)
    scan = command("scan", "--no-cache", repo)

    assert (again.returncode, scan.returncode) == (0, 0), scan.stdout
    assert "Nothing to rewrite" in again.stdout and "inprocess.py" not in again.stdout
    assert python_files(repo) == after


@pytest.mark.slow
def test_diff_and_check_say_the_helper_would_be_written_and_write_nothing(repo: Path, command) -> None:
    before = python_files(repo)

    diff = command("fix", "--no-cache", "--diff", repo)
    check = command("fix", "--no-cache", "--check", repo)

    assert (diff.returncode, check.returncode) == (1, 1)
    assert f"{COPY}: would write the in-process helper" in diff.stderr
    assert "+from nemo_gym.inprocess import responses_in_process" in diff.stdout
    assert f"{COPY}: would write the in-process helper" in check.stdout
    assert python_files(repo) == before


TEST_OF_ECHO = """\
from unittest.mock import AsyncMock, MagicMock

from responses_api_agents.echo.app import EchoAgent


async def test_run_answers_from_its_own_route() -> None:
    client = MagicMock()
    client.post = AsyncMock(return_value=MagicMock(json=AsyncMock(return_value={"ok": True})))
    agent = EchoAgent()
    agent.server_client, agent.config = client, MagicMock()

    assert await agent.run({}) == {"ok": True}
    assert client.post.await_args.kwargs["url_path"] == "/v1/responses"
"""


@pytest.mark.slow
def test_the_diff_is_the_whole_migration(tmp_path: Path, command) -> None:
    """`fix --diff | git apply` gives the tree `fix` writes: the new helper file and the updated
    test included; then scan and a second fix find nothing to do."""
    repo = make_repo(tmp_path / "repo")
    (repo / "responses_api_agents/echo/tests").mkdir()
    (repo / "responses_api_agents/echo/tests/test_app.py").write_text(TEST_OF_ECHO)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy)

    diff = command("fix", "--no-cache", "--diff", cwd=repo)
    applied = subprocess.run(
        ["git", "apply", "-"], input=diff.stdout, text=True, capture_output=True, cwd=repo
    )
    fixed = command("fix", "--no-cache", cwd=copy)

    assert applied.returncode == 0, applied.stderr
    assert f"diff --git a/{COPY} b/{COPY}\nnew file mode 100644\n--- /dev/null\n+++ b/{COPY}\n" in diff.stdout
    assert fixed.returncode == 0, fixed.stdout
    assert python_files(repo) == python_files(copy)
    assert "@patch(" in (repo / "responses_api_agents/echo/tests/test_app.py").read_text()
    assert command("scan", "--no-cache", cwd=repo).returncode == 0
    again = command("fix", "--no-cache", cwd=repo)
    assert "Nothing to rewrite" in again.stdout
    assert python_files(repo) == python_files(copy)


@pytest.mark.slow
def test_the_updated_test_passes_where_the_test_left_as_it_was_fails(repo: Path, command) -> None:
    test = repo / "responses_api_agents/echo/tests/test_app.py"
    test.parent.mkdir()
    test.write_text(TEST_OF_ECHO)
    pytest_run = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "asyncio_mode=auto",
        test,
    ]

    before = subprocess.run(pytest_run, cwd=repo, capture_output=True, text=True, timeout=120)
    command("fix", "--no-cache", repo)
    updated = subprocess.run(pytest_run, cwd=repo, capture_output=True, text=True, timeout=120)
    test.write_text(TEST_OF_ECHO)  # the test as it was, against the migrated agent
    left = subprocess.run(pytest_run, cwd=repo, capture_output=True, text=True, timeout=120)

    assert before.returncode == 0, before.stdout
    assert updated.returncode == 0, updated.stdout
    assert left.returncode == 1, left.stdout


@pytest.mark.slow
def test_without_nemo_gym_the_helper_goes_beside_the_rewritten_file(tmp_path: Path, command) -> None:
    repo = make_repo(tmp_path / "repo", nemo_gym=False)

    done = command("fix", "--no-cache", repo)

    assert done.returncode == 0, done.stderr
    assert (repo / "responses_api_agents/echo/inprocess.py").read_bytes() == helper_source(
        "responses_api_agents/echo/inprocess.py"
    )
    assert (
        "from responses_api_agents.echo.inprocess import responses_in_process\n" in (repo / APP).read_text()
    )


@pytest.mark.slow
def test_without_a_common_package_fix_refuses_and_writes_nothing(tmp_path: Path, command) -> None:
    repo = make_repo(tmp_path / "repo", nemo_gym=False, agents=(APP, "agents/other/app.py"))
    before = python_files(repo)

    done = command("fix", "--no-cache", repo)

    assert done.returncode == 2
    assert (
        'set `helper = "PACKAGE.inprocess:responses_in_process"` under [tool.selfcall-audit]' in done.stderr
    )
    assert "Traceback" not in done.stderr
    assert python_files(repo) == before


@pytest.mark.slow
def test_the_helper_setting_chooses_where_the_copy_goes(repo: Path, command) -> None:
    (repo / "shared").mkdir()
    (repo / "pyproject.toml").write_text(
        '[tool.selfcall-audit]\nhelper = "shared.loopback:responses_in_process"\n'
    )

    done = command("fix", "--no-cache", repo)

    assert done.returncode == 0, done.stderr
    assert (repo / "shared/loopback.py").read_bytes() == helper_source("shared/loopback.py")
    assert not (repo / COPY).exists()
    assert "from shared.loopback import responses_in_process\n" in (repo / APP).read_text()


@pytest.mark.slow
def test_the_installed_helper_is_imported_when_asked_for(repo: Path, command) -> None:
    done = command("fix", "--no-cache", "--helper", "selfcall_audit.inprocess:responses_in_process", repo)

    assert done.returncode == 0, done.stderr
    assert not (repo / COPY).exists()
    assert "from selfcall_audit.inprocess import responses_in_process\n" in (repo / APP).read_text()


@pytest.mark.slow
def test_a_file_of_the_repo_at_the_default_place_is_never_overwritten(repo: Path, command) -> None:
    (repo / COPY).write_text("# our own module\n")
    before = python_files(repo)

    done = command("fix", "--no-cache", repo)

    assert done.returncode == 2
    assert f"{COPY} exists and is not the vendored helper" in done.stderr
    assert python_files(repo) == before


@pytest.mark.slow
def test_a_nemo_gym_folder_linked_outside_the_project_gets_no_helper(tmp_path: Path, command) -> None:
    repo = make_repo(tmp_path / "repo")
    outside = tmp_path / "outside"
    (repo / "nemo_gym").rename(outside)
    (repo / "nemo_gym").symlink_to(outside, target_is_directory=True)
    before = python_files(repo)

    done = command("fix", "--no-cache", repo)

    assert done.returncode == 2
    assert f"{COPY} resolves outside the project root" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (outside / "inprocess.py").exists()
    assert python_files(repo) == before


# scan reports a copy that is not the tool's helper (SCA004) ----------------------------------------


@pytest.mark.slow
def test_scan_reports_an_edited_copy_with_the_command_that_refreshes_it(repo: Path, command) -> None:
    command("fix", "--no-cache", repo)
    copy = repo / COPY
    copy.write_bytes(copy.read_bytes() + b"\nTUNED = True\n")

    scan = command("scan", "--no-cache", "--format", "concise", ".", cwd=repo)
    hook = command("scan", "--no-cache", "--format", "concise", APP, cwd=repo)  # as pre-commit runs it

    line = f"{COPY}:1:1: SCA004 the vendored in-process helper was edited since selfcall-audit "
    assert scan.returncode == 1 and scan.stdout.startswith(line)
    assert f"refresh it with `{REFRESH}`" in scan.stdout
    assert hook.returncode == 1 and hook.stdout.startswith(line)

    refresh = command(*REFRESH.split()[1:], cwd=repo)
    assert refresh.returncode == 0, refresh.stderr
    assert command("scan", "--no-cache", repo).returncode == 0


def test_a_copy_reformatted_or_headed_by_the_repo_stays_current(repo: Path, cli) -> None:
    """What the repo's pre-commit does to the copy (reformat at another width, sort imports another
    way, add a header) changes no code: scan stays clean and fix leaves the copy as it is."""
    cli("fix", "--no-cache", repo)
    copy = repo / COPY
    subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--isolated", "--line-length", "72", copy], check=True
    )
    subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "I", "--fix", "--config",
         "lint.isort.force-single-line = true", copy],
        check=True,
    )  # fmt: skip
    copy.write_bytes(b"# Copyright (c) 2026 Example Org. Apache-2.0\n" + copy.read_bytes())
    reformatted = copy.read_bytes()
    assert reformatted.count(b"\n") > helper_source(COPY).count(b"\n")  # the width changed the layout

    scan = cli("scan", "--no-cache", repo)
    again = cli("fix", "--no-cache", repo)

    assert scan.exit_code == 0, scan.stdout
    assert again.exit_code == 0 and copy.read_bytes() == reformatted


def test_a_copy_is_digested_once_and_its_edits_at_once(repo: Path, cli, monkeypatch) -> None:
    """Every run of a migrated project checks its copy of the helper: the digests of its code and of
    the shipped helper's are kept in the cache (and a language server's memory), worked out again
    only for bytes not seen before."""
    cli("fix", repo)
    digested: list[bytes] = []

    def code_digest(data: bytes) -> str | None:
        digested.append(data)
        return copies.code_digest(data)

    monkeypatch.setattr(api, "code_digest", code_digest)
    copy = repo / COPY
    current = copy.read_bytes()
    runs = []
    for data in (current, current, current + b"\nTUNED = True\n", current):
        copy.write_bytes(data)
        digested.clear()
        runs.append((cli("scan", "--format", "concise", repo).exit_code, len(digested)))
    session = api.Session(repo, load_settings(repo))
    for _ in range(2):
        digested.clear()
        runs.append((len(session.analyze().findings), len(digested)))

    # the copy and the shipped helper; neither; the edited copy (SCA004); neither, the copy's
    # bytes as before; then the session's two analyses
    assert runs == [(0, 2), (0, 0), (1, 1), (0, 0), (0, 2), (0, 0)]


@pytest.mark.slow
def test_scan_reports_a_copy_an_older_version_wrote(repo: Path, command) -> None:
    command("fix", "--no-cache", repo)
    copy = repo / COPY
    older = b'"""An older helper."""\n'
    digest = hashlib.blake2b(older, digest_size=16).hexdigest()
    copy.write_bytes(
        f"# Vendored from selfcall-audit 0.0.9 (selfcall_audit/inprocess.py, blake2b {digest}).\n# ...\n".encode()
        + older
    )

    scan = command("scan", "--no-cache", "--format", "json", repo)

    assert scan.returncode == 1
    assert '"code": "SCA004"' in scan.stdout
    assert "is the helper of selfcall-audit 0.0.9, not of the installed" in scan.stdout
    assert command("scan", "--no-cache", "--ignore", "SCA004", repo).returncode == 0


def test_a_module_that_only_shares_the_name_is_not_a_copy(repo: Path, cli) -> None:
    (repo / "nemo_gym" / "inprocess.py").write_text('"""Our own in-process utilities."""\n')

    scan = cli("scan", "--no-cache", "--format", "concise", ".", cwd=repo)

    assert scan.stdout.count("SCA") == 1 and "SCA001" in scan.stdout  # the unmigrated call, not SCA004


def test_explain_describes_sca004(cli) -> None:
    done = cli("explain", "SCA004")

    assert done.exit_code == 0
    assert "selfcall-audit helper --write PATH --force" in done.stdout
    # its examples show the line on where the copy came from as the tool writes it, digest elided
    written = next(line for line in helper_source().decode().splitlines() if line.startswith("# Vendored"))
    shown = written.replace(__version__, "0.1.0").replace(copies.shipped_code(), "9f3c...")
    assert done.stdout.count(shown) == 2


def test_an_updated_test_fakes_the_helper_under_the_name_the_agent_module_imports_it_as(
    tmp_path: Path, command
) -> None:
    """The agent module already imports the helper under a name of its own: the rewritten call
    uses that name, and so does the test `fix` updates (it patches what the module calls)."""
    repo = make_repo(tmp_path / "repo")
    app = repo / APP
    app.write_text("from nemo_gym.inprocess import responses_in_process as call_self\n" + AGENT)
    (repo / "responses_api_agents/echo/tests").mkdir()
    (repo / "responses_api_agents/echo/tests/test_app.py").write_text(TEST_OF_ECHO)

    fixed = command("fix", "--no-cache", cwd=repo)

    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "response = await call_self(" in app.read_text()
    updated = (repo / "responses_api_agents/echo/tests/test_app.py").read_text()
    assert '"responses_api_agents.echo.app.call_self"' in updated, updated

"""A whole scan keeps the bytes only of the files that name an agent base, and of those it reads
again: the others are let go once their content key is worked out (they were most of a cold
scan's memory). The prefilter's later rounds read them again to search them, and a file read
again must be the file its key is of: one changed meanwhile is an SCA900 entry, not facts of
other bytes than the key says."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfcall_audit.config import Settings
from selfcall_audit.ftypes import InputError
from selfcall_audit.orchestration.inputs import Inputs
from selfcall_audit.orchestration.project import Project
from selfcall_audit.workspace.workers import Workers

AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class EchoAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        return await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
"""
# names no agent base: let go after its first reading, found by the second round (it names EchoAgent)
SUBCLASS = "from pkg.agent import EchoAgent\n\n\nclass LouderAgent(EchoAgent):\n    pass\n"
QUIET = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class QuietAgent{n}(SimpleResponsesAPIAgent):
    pass
"""
QUIET_AGENTS = 24  # parsed in the first round: enough for the workers to start (with 2 jobs)
OTHER = "def helper():\n    return 1\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    files = {
        "pyproject.toml": '[project]\nname = "kept"\n',
        "nemo_gym/__init__.py": "",
        "pkg/__init__.py": "",
        "pkg/agent.py": AGENT,
        "pkg/louder.py": SUBCLASS,
        "pkg/other.py": OTHER,
        **{f"pkg/quiet_{n}.py": QUIET.format(n=n) for n in range(QUIET_AGENTS)},
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


@pytest.mark.parametrize("jobs", [1, 2])  # the later round reads files again here, or in the workers
def test_a_whole_scan_keeps_the_bytes_of_the_files_it_parses_only(root: Path, jobs: int) -> None:
    project = Project(root, Settings(jobs=jobs))

    report = project.analyze()

    assert [(f.code, f.path, f.line) for f in report.findings] == [("SCA001", "pkg/agent.py", 6)]
    assert report.errors == [] and report.files_parsed == 2 + QUIET_AGENTS  # and the subclass read again
    kept = {rel for rel in project.listed_sources if project.inputs.peek(rel) is not None}
    assert kept == {"pkg/agent.py", "pkg/louder.py", *(f"pkg/quiet_{n}.py" for n in range(QUIET_AGENTS))}


def test_a_file_changed_before_it_is_read_again_is_an_error_and_nothing_is_stored(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    search = Inputs.naming

    def changed_first(self: Inputs, rels: list[str], names: set[str], pool: Workers) -> list[str]:
        (root / "pkg/louder.py").write_text(SUBCLASS + "# edited\n")  # after its first reading
        return search(self, rels, names, pool)

    monkeypatch.setattr(Inputs, "naming", changed_first)
    project = Project(root, Settings(jobs=1))

    report = project.analyze()

    assert report.errors == [InputError("pkg/louder.py", "file changed during the scan", "unreadable")]
    assert report.files_parsed == 1 + QUIET_AGENTS  # not the changed file
    assert not (root / ".selfcall_audit_cache").exists() or not project.cache.recent()


def test_a_file_gone_before_it_is_read_again_is_an_error_saying_so(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    search = Inputs.naming

    def removed_first(self: Inputs, rels: list[str], names: set[str], pool: Workers) -> list[str]:
        (root / "pkg/louder.py").unlink()  # after its first reading
        return search(self, rels, names, pool)

    monkeypatch.setattr(Inputs, "naming", removed_first)

    report = Project(root, Settings(jobs=1)).analyze()

    assert report.errors == [InputError("pkg/louder.py", "file vanished during the scan", "unreadable")]

"""The word index: which files name a class, for a one-file run looking for the subclasses of a
mixin. Answers are those of searching every file; only files whose content changed since are
searched again (every file's content key is worked out by the run anyway)."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
from fixture_annotations import NOT_COPIED

from selfcall_audit.config import Settings
from selfcall_audit.orchestration import inputs, jobs
from selfcall_audit.orchestration.cache import FactsCache
from selfcall_audit.orchestration.indexes import _MAX_NAMES, Indexes
from selfcall_audit.orchestration.keys import content_key
from selfcall_audit.workspace.discovery import discover, read_file
from selfcall_audit.workspace.workers import Workers

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CACHE_DIR = Settings().cache_dir
FILES = {
    "pkg/mixins.py": "class Mixin:\n    pass\n",
    "pkg/agent.py": "from pkg.mixins import Mixin\n\nclass Agent(Mixin):\n    pass\n",
    "pkg/other.py": "class MixinTwo:  # a longer word\n    pass\n",
    "pkg/notes.py": "# Mixin is mentioned in a comment only\n",
}


class _Recording(inputs.Inputs):
    """The project's files, as a run reads them, with the paths read and some unreadable."""

    def __init__(self, root: Path, cache: FactsCache | None, unreadable: frozenset[str], log: list[str]):
        super().__init__(root, Settings(max_file_size=1 << 20), cache)
        self.unreadable = unreadable
        self.log = log

    def read(self, rel: str) -> bytes | None:
        self.log.append(rel)
        return None if rel in self.unreadable else read_file(self.root / rel, 1 << 20)

    def key(self, rel: str) -> str | None:
        return None if rel in self.unreadable else content_key(rel, read_file(self.root / rel, 1 << 20))


class Run:
    """One run's index over the project as it is now, with the files it read to search them."""

    def __init__(
        self,
        root: Path,
        cached: bool = True,
        unreadable: frozenset[str] = frozenset(),
        cache_dir: str = ".cache",
        include_tests: bool = True,
    ):
        self.read_files: list[str] = []
        files = discover(root, (), include_tests, ())
        self.cache = FactsCache.open(root, cache_dir) if cached else None
        self.indexes = Indexes(_Recording(root, self.cache, unreadable, self.read_files), files, Workers(1))

    def naming(self, *names: str) -> list[str]:
        found = self.indexes.naming(names)
        if self.cache:
            self.cache.save(prune=False)
        return found


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def _uncached(root: Path, *names: str, include_tests: bool = True) -> list[str]:
    return Run(root, cached=False, include_tests=include_tests).naming(*names)


def test_a_name_asked_again_is_answered_without_reading_unchanged_files(project: Path) -> None:
    first = Run(project)
    assert first.naming("Mixin") == ["pkg/agent.py", "pkg/mixins.py", "pkg/notes.py"]
    assert sorted(first.read_files) == sorted(FILES)

    again = Run(project)
    assert again.naming("Mixin") == _uncached(project, "Mixin")
    assert again.read_files == []


@pytest.mark.parametrize(
    ("rel", "text", "named"),
    [
        ("pkg/other.py", "from pkg.mixins import Mixin\n\nclass Other(Mixin):\n    pass\n", True),
        ("pkg/agent.py", "class Agent:\n    pass\n", False),
        ("pkg/new.py", "from pkg import mixins\n\nclass New(mixins.Mixin):\n    pass\n", True),
    ],
    ids=["starts naming it", "stops naming it", "a new file"],
)
def test_only_a_changed_or_new_file_is_read_again(project: Path, rel: str, text: str, named: bool) -> None:
    Run(project).naming("Mixin")
    (project / rel).write_text(text)

    run = Run(project)
    found = run.naming("Mixin")

    assert run.read_files == [rel]
    assert (rel in found) is named
    assert found == _uncached(project, "Mixin")


def test_a_new_name_reads_every_file_once_and_old_answers_stay_right(project: Path) -> None:
    Run(project).naming("Mixin")
    (project / "pkg/notes.py").write_text("# nothing here\n")

    new = Run(project)
    assert new.naming("Agent") == ["pkg/agent.py"]
    assert sorted(new.read_files) == sorted(FILES)

    old = Run(project)
    assert old.naming("Mixin") == _uncached(project, "Mixin") == ["pkg/agent.py", "pkg/mixins.py"]
    assert old.read_files == []


def test_files_naming_any_of_several_names_are_found_in_one_look(project: Path) -> None:
    Run(project).naming("Mixin")

    run = Run(project)
    assert run.naming("Agent", "MixinTwo") == ["pkg/agent.py", "pkg/other.py"]
    assert sorted(run.read_files) == sorted(FILES)  # two new names: every file read once
    again = Run(project)
    assert again.naming("MixinTwo", "Mixin") == [
        "pkg/agent.py",
        "pkg/mixins.py",
        "pkg/notes.py",
        "pkg/other.py",
    ]
    assert again.read_files == []


def test_a_file_that_could_not_be_read_is_read_again_next_time(project: Path) -> None:
    blocked = Run(project, unreadable=frozenset({"pkg/agent.py"}))
    assert blocked.naming("Mixin") == ["pkg/mixins.py", "pkg/notes.py"]

    run = Run(project)
    assert run.naming("Mixin") == ["pkg/agent.py", "pkg/mixins.py", "pkg/notes.py"]
    assert run.read_files == ["pkg/agent.py"]


def test_the_index_keeps_a_bounded_number_of_names(project: Path) -> None:
    full = Run(project)
    full.indexes.keep_names([f"Name{n}" for n in range(_MAX_NAMES)], {})
    full.cache.save(prune=False)

    forgotten = Run(project)
    assert forgotten.naming("Mixin") == _uncached(project, "Mixin")
    assert sorted(forgotten.read_files) == sorted(FILES)
    asked, _ = forgotten.cache.names()
    assert asked == ["Mixin"]


def _scanned_demo(cli, tmp_path: Path) -> tuple[Path, list[str], list[str]]:
    """The demo project after a whole scan: its root, the agent names the scan searched every
    file for, and the files naming one of them."""
    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / "demo-gym", root, ignore=NOT_COPIED)
    cli("scan", root, "--format", "json")
    asked, _ = Run(root, cache_dir=CACHE_DIR, include_tests=False).cache.names()
    return root, asked, _uncached(root, *asked, include_tests=False)


def test_a_whole_scan_answers_for_every_agent_it_found(cli, tmp_path: Path) -> None:
    """The whole scan searched every file for each agent name it found: a one-file run asking
    which files name an agent (its subclasses' files) reads only the few naming an agent, and
    the answers are those of a search."""
    root, asked, naming_agents = _scanned_demo(cli, tmp_path)
    assert {"RemoteAgent", "MultiTurnAgent", "SWEAgent", "JudgeAgent", "MathTutorAgent"} <= set(asked)
    assert "resources_servers/math_verify/app.py" not in naming_agents  # names no agent: not read

    for name in asked:
        run = Run(root, cache_dir=CACHE_DIR, include_tests=False)
        assert run.naming(name) == _uncached(root, name, include_tests=False)
        assert sorted(run.read_files) == naming_agents


def test_an_edit_after_a_whole_scan_reads_the_edited_file_and_those_naming_agents(
    cli, tmp_path: Path
) -> None:
    root, _, naming_agents = _scanned_demo(cli, tmp_path)
    edited = "responses_api_agents/judge_agent/later.py"
    (root / edited).write_text("from .app import JudgeAgent\n\n\nclass Later(JudgeAgent):\n    pass\n")

    run = Run(root, cache_dir=CACHE_DIR, include_tests=False)
    found = run.naming("JudgeAgent")
    assert edited in found and found == _uncached(root, "JudgeAgent", include_tests=False)
    assert sorted(run.read_files) == sorted([*naming_agents, edited])


def test_a_whole_scan_after_an_edit_takes_the_word_index_answers(cli, tmp_path: Path, monkeypatch) -> None:
    """The facts of unchanged files come from the cache, and so do the word index's answers: no
    file is read again to search it for the agents' names, and none whose facts are cached is
    read to load them (a file is read at most twice: for the prefilter, or its content key when
    it changed, and once more to be searched or parsed)."""
    root, _, _ = _scanned_demo(cli, tmp_path)
    edited = root / "responses_api_agents/judge_agent/app.py"
    edited.write_text("import os\n" + edited.read_text())
    reads: Counter[str] = Counter()

    def counted(path, limit):
        reads[os.path.relpath(path, root)] += 1
        return read_file(path, limit)

    def searched(search):
        raise AssertionError(f"{search.rels} read again to search them")

    monkeypatch.setattr(inputs, "read_file", counted)
    monkeypatch.setattr(jobs, "read_file", counted)
    monkeypatch.setattr(inputs, "files_naming", searched)
    report = json.loads(cli("scan", root, "--format", "json").stdout)

    assert reads and max(reads.values()) <= 2, reads.most_common(3)
    assert report["summary"]["files_parsed"] == 1
    monkeypatch.undo()
    uncached = json.loads(cli("scan", root, "--format", "json", "--no-cache").stdout)
    assert report["findings"] == uncached["findings"] and report["errors"] == uncached["errors"]


MIXIN_USER = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from mixins import CachingMixin


class WarmAgent(CachingMixin, SimpleResponsesAPIAgent):
    pass
"""


def _one_file(cli, path: Path, *options: str) -> list[tuple]:
    report = json.loads(cli("scan", path, "--format", "json", *options).stdout)
    return sorted((f["code"], f["path"], f["line"]) for f in report["findings"])


def test_a_cached_one_file_run_sees_an_agent_that_started_using_the_mixin(cli, tmp_path: Path) -> None:
    """The scan of a mixin's file asks which files name the mixin; the answer is kept. An agent
    added later, or edited to use the mixin no more, changes what is reported, as without a
    cache."""
    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / "mixins-decorators", root, ignore=NOT_COPIED)
    folder = root / "responses_api_agents" / "review_agent"
    mixins = folder / "mixins.py"
    warm_line = ("SCA001", "responses_api_agents/review_agent/mixins.py", 14)

    cli("scan", root, "--format", "json")
    before = _one_file(cli, mixins)
    assert warm_line not in before and len(before) == 1

    (folder / "warm_agent.py").write_text(MIXIN_USER)
    using = _one_file(cli, mixins)
    assert warm_line in using
    assert using == _one_file(cli, mixins, "--no-cache")

    (folder / "warm_agent.py").write_text(
        MIXIN_USER.replace("CachingMixin, ", "").replace(", CachingMixin", "")
    )
    assert _one_file(cli, mixins) == before == _one_file(cli, mixins, "--no-cache")


def test_without_a_cache_every_file_is_read(project: Path) -> None:
    run = Run(project, cached=False)
    assert run.naming("Mixin") == ["pkg/agent.py", "pkg/mixins.py", "pkg/notes.py"]
    assert sorted(run.read_files) == sorted(FILES)

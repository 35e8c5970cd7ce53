"""The prefilter: which files a scan parses, decided on bytes, and the matchers it uses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fixture_annotations import fixture_projects
from hypothesis import given, settings
from hypothesis import strategies as st

from selfcall_audit.workspace.prefilter import import_lines, importers, names_found, word_matcher

AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent
from notes import remember


class NoteAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        remember(self.config.name, "/v1/responses")
        response = await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
        return await response.json()
"""
NOTES = """\
def remember(name, path):
    return f"{name}{path}"
"""
FILLER = """\
class Unrelated:
    def method(self, value):
        return value
"""


def _project(root: Path) -> Path:
    files = {
        "pyproject.toml": "[project]\nname = 'p'\n",
        "responses_api_agents/note/app.py": AGENT,
        "responses_api_agents/note/notes.py": NOTES,
        **{f"lib/filler_{n}.py": FILLER for n in range(20)},
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_only_files_that_can_matter_are_parsed(cli, tmp_path: Path) -> None:
    """The agent is parsed; the fillers name no agent, and the helper module it calls never calls
    a server client, so neither is parsed."""
    root = _project(tmp_path)

    report = json.loads(cli("scan", root, "--format", "json", "--no-cache").stdout)

    assert [(f["code"], f["path"], f["line"]) for f in report["findings"]] == [
        ("SCA001", "responses_api_agents/note/app.py", 8)
    ]
    assert report["summary"]["files_parsed"] == 1
    assert report["summary"]["files_scanned"] == 22


names = st.lists(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True), min_size=1, max_size=12)
texts = st.lists(
    st.one_of(
        st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True), st.sampled_from([" ", ".", "(", "\n"])
    ),
    max_size=40,
).map("".join)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, derandomize=True)
@given(names=names, text=texts)
def test_word_matcher_agrees_with_a_plain_word_search(names: list[str], text: str) -> None:
    expected = any(re.search(rf"\b{re.escape(name)}\b", text) for name in names)

    assert word_matcher(names)(text.encode()) is expected


# Agent names mostly share a part (`Agent`): the matcher searches for it first, group by group.
sharing = st.lists(
    st.tuples(
        st.sampled_from(["", "Simple", "A", "Agen"]), st.sampled_from(["Agent", "Agents", "Wrapper", ""])
    )
    .map("".join)
    .filter(bool),
    min_size=1,
    max_size=12,
)
sharing_texts = st.lists(
    st.one_of(sharing.map(" ".join), st.sampled_from([" ", ".", "_", "Agen", "tAgent", "\n"])), max_size=20
).map("".join)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, derandomize=True)
@given(names=sharing, text=sharing_texts)
def test_word_matcher_agrees_with_a_plain_word_search_when_names_share_a_part(
    names: list[str], text: str
) -> None:
    expected = any(re.search(rf"\b{re.escape(name)}\b", text) for name in names)

    assert word_matcher(names)(text.encode()) is expected


words_and_others = st.lists(
    st.one_of(sharing.map("".join), st.sampled_from([" ", ".", "_", "é", "ß", "1", "Agen", "\n"])),
    max_size=24,
).map("".join)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, derandomize=True)
@given(names=sharing, text=words_and_others)
def test_names_found_are_the_names_the_word_matcher_finds(names: list[str], text: str) -> None:
    data = text.encode()

    assert names_found(names)(data) == {name for name in names if word_matcher([name])(data)}


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("x.Agent(", {"Agent"}),
        ("Agent_ SimpleAgent Agent1", set()),
        ("éAgent; Agents", {"Agent", "Agents"}),  # a non-ASCII letter is no word character here
        ("# Agen Agentt", set()),
    ],
)
def test_names_found_are_whole_words(text: str, found: set[str]) -> None:
    data = text.encode()
    names = ["Agent", "Agents", "Wrapper"]

    assert names_found(names)(data) == found == {name for name in names if word_matcher([name])(data)}


source_lines = st.lists(
    st.tuples(
        st.sampled_from(["", "    ", "\t", " # ", "x = "]),
        st.sampled_from(["from", "import", "fromage", "imports", "From", ""]),
        st.sampled_from([" ", "\t", "", "("]),
        st.sampled_from(["a.b import c", "os", "x \\", "(\n    y,\n)", "", "import"]),
        st.sampled_from(["\n", "\r\n", ""]),
    ).map("".join),
    max_size=12,
).map("".join)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, derandomize=True)
@given(text=source_lines)
def test_import_lines_are_the_lines_starting_with_from_or_import(text: str) -> None:
    """The word search finds exactly the lines a line-anchored regex finds, in order."""
    expected = b"\n".join(re.findall(rb"(?m)^[ \t]*(?:from|import)[ \t][^\n]*", text.encode()))

    assert import_lines(text.encode()) == expected


def test_importers_by_dotted_tail_and_by_sibling_name() -> None:
    files = [
        ("a/x.py", b"from pkg.constants import ROUTE\n"),
        ("pkg/y.py", b"from .constants import ROUTE\n"),
        ("pkg/z.py", b"import constants\n"),
        ("b/w.py", b"import constants\n"),  # another folder's `constants`
        ("c/v.py", b"ROUTE = 'pkg.constants'\n"),  # not an import line
    ]

    assert importers(["pkg/constants.py"], files) == ["a/x.py", "pkg/y.py", "pkg/z.py"]


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _findings(cli, *args: object) -> list[tuple]:
    report = json.loads(cli("scan", *args, "--format", "json", "--no-cache").stdout)
    return sorted(
        (f["code"], f["path"], f["line"], tuple(e["path"] for e in f["evidence"])) for f in report["findings"]
    )


@pytest.mark.slow
def test_a_scan_of_one_file_reports_what_the_whole_scan_reports_for_it(cli) -> None:
    """Pre-commit passes the changed files only: for each file of each fixture repo, scanning just
    that file gives the findings of the whole-project scan whose call or evidence is in it."""
    checked = 0
    for fixture in fixture_projects(shapes=False):
        whole = _findings(cli, fixture)
        for path in sorted(fixture.rglob("*")):
            rel = path.relative_to(fixture).as_posix()
            if path.suffix not in (".py", ".yaml") or "tests/" in rel or rel.startswith("tests"):
                continue
            expected = [f for f in whole if f[1] == rel or rel in f[3]]
            assert _findings(cli, path) == expected, rel
            checked += 1
    assert checked > 90

"""Every rule's documented examples, run through the analyzer (Fixit's VALID/INVALID cases): the bad
example placed in a minimal agent project gives exactly its rule's code, the good one gives nothing.

An example is a statement or a method; it is wrapped, unchanged, into an agent class of its own
project, every rule selected so that "nothing" means nothing at all.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from selfcall_audit.migrate.vendor import helper_source
from selfcall_audit.rules import FINDING_CODES, RULES

APP = "responses_api_agents/example_agent/app.py"
HEADER = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class ExampleAgent(SimpleResponsesAPIAgent):
"""


def _agent_source(example: str) -> tuple[str, int]:
    """The app.py holding the example, and the line where the example starts."""
    if example.lstrip().startswith(("def ", "async def ")):
        return HEADER + textwrap.indent(example, " " * 4) + "\n", HEADER.count("\n") + 1
    method = "    async def run(self, request, body):\n"
    return HEADER + method + textwrap.indent(example, " " * 8) + "\n", HEADER.count("\n") + 2


def _scan(cli, tmp_path: Path, example: str) -> tuple[dict, int]:
    root = tmp_path / "gym"
    app = root / APP
    app.parent.mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "example"\nversion = "0"\n')
    source, line = _agent_source(example)
    app.write_text(source)
    result = cli("scan", root, "--format", "json", "--no-cache", "--strict")
    return json.loads(result.stdout), line


def _reported(report: dict) -> list[tuple[str, str, int | None]]:
    findings = [(f["code"], f["path"], f["line"]) for f in report["findings"]]
    errors = [(e["code"], e["path"], None) for e in report["errors"]]
    return findings + errors


def test_every_rule_has_both_examples() -> None:
    for rule in RULES.values():
        assert rule.bad.strip() and rule.good.strip(), rule.code
        assert rule.bad != rule.good, rule.code


CODE_RULES = sorted(set(RULES) - {"SCA004"})
COPY = "nemo_gym/inprocess.py"


@pytest.mark.parametrize("code", CODE_RULES)
def test_the_bad_example_gives_exactly_its_code(cli, tmp_path: Path, code: str) -> None:
    report, line = _scan(cli, tmp_path, RULES[code].bad)

    where = line if code in FINDING_CODES else None
    assert _reported(report) == [(code, APP, where)]


@pytest.mark.parametrize("code", CODE_RULES)
def test_the_good_example_gives_nothing(cli, tmp_path: Path, code: str) -> None:
    report, _ = _scan(cli, tmp_path, RULES[code].good)

    assert _reported(report) == []
    assert report["summary"]["agents"] == 1


# SCA004 is about a file, not a call: its examples describe the vendored copy. The good one is the
# copy as the tool writes it; the bad one is that copy with the example's own edit (its last line).


def _vendored_copy(cli, tmp_path: Path, copy: bytes) -> dict:
    _scan(cli, tmp_path, RULES["SCA001"].good)  # an agent project around the copy
    (tmp_path / "gym" / "nemo_gym").mkdir()
    (tmp_path / "gym" / COPY).write_bytes(copy)
    return json.loads(cli("scan", tmp_path / "gym", "--format", "json", "--no-cache", "--strict").stdout)


def test_the_stale_helper_bad_example_gives_exactly_its_code(cli, tmp_path: Path) -> None:
    edit = RULES["SCA004"].bad.splitlines()[-1]
    report = _vendored_copy(cli, tmp_path, helper_source(COPY) + f"{edit}\n".encode())

    assert _reported(report) == [("SCA004", COPY, 1)]


def test_the_stale_helper_good_example_gives_nothing(cli, tmp_path: Path) -> None:
    assert "unchanged" in RULES["SCA004"].good
    report = _vendored_copy(cli, tmp_path, helper_source(COPY))

    assert _reported(report) == []

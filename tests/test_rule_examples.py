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


@pytest.mark.parametrize("code", sorted(RULES))
def test_the_bad_example_gives_exactly_its_code(cli, tmp_path: Path, code: str) -> None:
    report, line = _scan(cli, tmp_path, RULES[code].bad)

    where = line if code in FINDING_CODES else None
    assert _reported(report) == [(code, APP, where)]


@pytest.mark.parametrize("code", sorted(RULES))
def test_the_good_example_gives_nothing(cli, tmp_path: Path, code: str) -> None:
    report, _ = _scan(cli, tmp_path, RULES[code].good)

    assert _reported(report) == []
    assert report["summary"]["agents"] == 1

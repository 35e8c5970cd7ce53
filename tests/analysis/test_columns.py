"""Columns are counted in characters of the text Python reads, whatever the declared encoding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

AGENT = "responses_api_agents/enc_agent/app.py"
BASE = "nemo_gym/base_responses_api_agent.py"
CALL = 'return await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=b)'


def _project(root: Path, encoding: str, prefix: str) -> tuple[Path, int]:
    line = f"        note = {prefix!r}; {CALL}"
    source = (
        f"# -*- coding: {encoding} -*-\n"
        "from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent\n\n\n"
        "class EncAgent(SimpleResponsesAPIAgent):\n"
        "    async def run(self, b):\n"
        f"{line}\n"
    )
    (root / AGENT).parent.mkdir(parents=True)
    (root / AGENT).write_bytes(source.encode(encoding))
    (root / BASE).parent.mkdir(parents=True)
    (root / BASE).write_text("class SimpleResponsesAPIAgent:\n    pass\n")
    (root / "pyproject.toml").write_text('[project]\nname = "columns"\n')
    return root, line.index("self.server_client") + 1


@pytest.mark.parametrize(
    ("encoding", "prefix"),
    [("latin-1", "café crème"), ("euc-jp", "日本語のテキスト"), ("utf-8", "naïve ☃")],
)
def test_the_column_counts_characters_of_the_decoded_line(
    command, tmp_path: Path, encoding: str, prefix: str
) -> None:
    root, expected_column = _project(tmp_path / "repo", encoding, prefix)

    process = command("scan", "--format", "json", "--no-cache", root)

    assert process.returncode == 1, process.stderr
    [finding] = json.loads(process.stdout)["findings"]
    assert (finding["code"], finding["line"], finding["column"]) == ("SCA001", 7, expected_column)
    assert finding["end_line"] == 7

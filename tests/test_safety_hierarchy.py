"""A long inheritance chain, as a user runs the scan: no recursion error, work linear in the
classes, and the self-call at the bottom of the chain still reported on the class that makes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safety_support import make_project, run

CHAIN = 3000


@pytest.mark.slow
def test_a_chain_of_three_thousand_classes_is_scanned_to_its_end(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")
    chain = root / "responses_api_agents" / "chain" / "app.py"
    chain.parent.mkdir(parents=True)
    lines = ["from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent\n\n"]
    lines.append("class C0(SimpleResponsesAPIAgent):\n    pass\n")
    lines += [f"class C{i}(C{i - 1}):\n    pass\n" for i in range(1, CHAIN)]
    lines.append(
        f"class Last(C{CHAIN - 1}):\n"
        "    async def run(self, body):\n"
        '        return await self.server_client.post(server_name=self.config.name, url_path="/v1/responses")\n'
    )
    chain.write_text("".join(lines))

    done = run("scan", "--no-cache", "--format", "json", root, cwd=root, timeout=60)

    report = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr
    assert report["errors"] == []
    last = [f for f in report["findings"] if f["path"] == "responses_api_agents/chain/app.py"]
    assert [(f["code"], f["agent"], f["line"]) for f in last] == [("SCA001", "Last", 2 * CHAIN + 5)]

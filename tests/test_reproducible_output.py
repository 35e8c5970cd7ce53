"""The same input gives the same bytes in every format, whatever the interpreter's hash seed (an
agent with several YAML instances listed them in the order of a set of strings)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

FORMATS = ("text", "concise", "json", "sarif", "github", "gitlab", "junit")
SEEDS = ("1", "2", "3")
# Only the time a run took may differ: the text summary's "(0.61s)" or, under a tenth of a
# second, "(75 ms)", and JSON's "seconds".
_TIMING = re.compile(rb'\(\d+\.\d+s\)|\(\d+ ms\)|"seconds": \d+\.\d+')

# One agent, three instances in one file, each its own critic: three pieces of evidence.
TRIO = """\
judge_alpha:
  responses_api_agents:
    judge_agent:
      entrypoint: app.py
      critic:
        type: responses_api_agents
        name: judge_alpha  # SCA001 evidence
judge_beta:
  responses_api_agents:
    judge_agent:
      entrypoint: app.py
      critic:
        type: responses_api_agents
        name: judge_beta  # SCA001 evidence
judge_gamma:
  responses_api_agents:
    judge_agent:
      entrypoint: app.py
      critic:
        type: responses_api_agents
        name: judge_gamma  # SCA001 evidence
"""


def _output(root: Path, output_format: str, seed: str) -> bytes:
    done = subprocess.run(
        [sys.executable, "-m", "selfcall_audit", "scan", "--no-cache", "--format", output_format, "."],
        cwd=root,
        capture_output=True,
        env={**os.environ, "PYTHONHASHSEED": seed},
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    return _TIMING.sub(b"<time>", done.stdout)


@pytest.mark.slow  # 21 runs of the command
@pytest.mark.parametrize("output_format", FORMATS)
def test_output_does_not_follow_the_hash_seed(demo: Path, output_format: str) -> None:
    (demo / "responses_api_agents" / "judge_agent" / "configs" / "trio.yaml").write_text(TRIO)

    outputs = {seed: _output(demo, output_format, seed) for seed in SEEDS}

    assert outputs["1"] == outputs["2"] == outputs["3"]
    if output_format not in ("concise", "gitlab", "junit"):  # these name no evidence
        assert outputs["1"].index(b"judge_alpha") < outputs["1"].index(b"judge_beta")
        assert outputs["1"].index(b"judge_beta") < outputs["1"].index(b"judge_gamma")

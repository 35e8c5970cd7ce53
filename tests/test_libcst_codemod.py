"""The per-file rewrite under LibCST's own codemod runner writes what `fix` writes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_annotations import NOT_COPIED

REPO = Path(__file__).resolve().parents[1]
APP = "responses_api_agents/simple_agent/app.py"
HELPER = "selfcall_audit.inprocess:responses_in_process"


def _copy(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(REPO / "fixtures" / "demo-gym", root, ignore=NOT_COPIED)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.mark.slow
def test_libcst_tool_codemod_rewrites_a_file_as_fix_does(tmp_path: Path) -> None:
    by_tool, by_fix = _copy(tmp_path, "tool"), _copy(tmp_path, "fix")
    before = (by_tool / APP).read_text()

    tool = subprocess.run(
        [sys.executable, "-m", "libcst.tool", "codemod", "--no-format", "-x",
         "selfcall_audit.frontends.libcst_codemod.FixSelfCalls", "--helper", HELPER, APP],
        cwd=by_tool, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    fixed = subprocess.run(
        [sys.executable, "-m", "selfcall_audit", "fix", "--no-cache", "--helper", HELPER, APP],
        cwd=by_fix, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert tool.returncode == 0, tool.stderr
    assert fixed.returncode in (0, 1), fixed.stderr
    after = (by_tool / APP).read_text()
    assert after != before and "responses_in_process(" in after
    assert after == (by_fix / APP).read_text()

"""Smoke tests of the scan benchmark: the generated tree is deterministic and exactly known, and the
benchmark script runs end to end (quick mode), skipping peers that are not installed with a note."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
TINY = 40  # .py files: every self-call form once, plus a little filler


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch):
    """The benchmark modules, imported the way the scripts import each other."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import gen_tree
    import scan_vs_peers

    return gen_tree, scan_vs_peers


def test_same_size_and_seed_give_the_same_tree_and_another_seed_does_not(bench) -> None:
    gen_tree, _ = bench
    first, again, other = (
        gen_tree.build(TINY, seed=7),
        gen_tree.build(TINY, seed=7),
        gen_tree.build(TINY, seed=8),
    )

    assert first.files == again.files
    assert first.expected == again.expected
    assert first.files != other.files


def test_tree_has_the_requested_number_of_valid_python_files_and_marks_every_self_call(bench) -> None:
    gen_tree, _ = bench
    tree = gen_tree.build(TINY, seed=1)
    sources = {path: text for path, text in tree.files.items() if path.endswith(".py")}

    assert len(sources) == TINY
    for path, text in sources.items():
        ast.parse(text, filename=path)
        assert "#<<" not in text, path
    # One agent per form: the two clean forms yield nothing, the shared path and the inherited
    # forms two self-calls each, the other eight one each.
    assert len(gen_tree.FORMS) == 12
    assert len(tree.expected) == 12
    assert {code for code, _, _ in tree.expected} == {"SCA001", "SCA002"}
    for _, path, line in tree.expected:
        assert "server_client.post(" in sources[path].splitlines()[line - 1], (path, line)


def test_too_small_a_tree_is_refused(bench) -> None:
    gen_tree, _ = bench
    with pytest.raises(ValueError, match="too small"):
        gen_tree.build(10)


def test_scan_of_a_generated_git_tree_reports_exactly_the_expected_list(bench, tmp_path: Path) -> None:
    gen_tree, _ = bench
    expected = gen_tree.generate(tmp_path / "tree", TINY, seed=2, git=True)

    result = subprocess.run(
        [sys.executable, "-m", "selfcall_audit.frontends.launch", "scan", "--format", "json", "--no-cache"],
        cwd=tmp_path / "tree",
        capture_output=True,
        text=True,
    )

    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert sorted([f["code"], f["path"], f["line"]] for f in report["findings"]) == sorted(expected)
    assert json.loads((tmp_path / "tree" / gen_tree.EXPECTED_FILE).read_text()) == expected
    assert report["errors"] == []


def _values(output: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line and " " not in line)


def test_quick_benchmark_runs_end_to_end_and_measures_or_skips_each_peer(bench) -> None:
    _, scan_vs_peers = bench
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "scan_vs_peers.py"), "--quick"], capture_output=True, text=True
    )

    assert result.returncode == 0, result.stdout + result.stderr
    values = _values(result.stdout)
    assert values["exact"] == "yes"
    assert values["findings"] == values["expected"] == "12"
    for key in ("sca_cold_s", "sca_warm_s", "sca_one_file_s", "sca_one_edit_s", "sca_other_edit_s"):
        assert float(values[key]) > 0
    for peer, keys in {
        "semgrep": ["semgrep_s"],
        "ruff": ["ruff_cold_s", "ruff_warm_s"],
        "flake8": ["flake8_s"],
    }.items():
        installed = scan_vs_peers.find_tool(peer) is not None
        assert all(key in values for key in keys) == installed, peer
        assert (f"skipped {peer}: not installed" in result.stdout) == (not installed), peer
    if "flake8_s" in values:
        assert "flake8 --select SCA" in result.stdout


def test_peers_that_are_not_installed_are_skipped_with_a_note(bench, monkeypatch, capsys) -> None:
    _, scan_vs_peers = bench
    real = scan_vs_peers.find_tool
    monkeypatch.setattr(
        scan_vs_peers, "find_tool", lambda name: real(name) if name == "selfcall-audit" else None
    )

    assert scan_vs_peers.main(["--quick", "--repeat", "1"]) == 0

    output = capsys.readouterr().out
    for peer in ("semgrep", "ruff", "flake8"):
        assert f"skipped {peer}: not installed" in output
    values = _values(output)
    assert values["exact"] == "yes"
    assert not {"semgrep_s", "ruff_warm_s", "flake8_s", "warm_vs_ruff_warm"} & set(values)

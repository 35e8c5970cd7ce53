"""Smoke tests of the scan benchmark: the generated tree is deterministic and exactly known, and the
benchmark script runs end to end (quick mode), skipping peers that are not installed or do not work
with a note."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
DEMO = BENCHMARKS.parent / "fixtures" / "demo-gym"
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


@pytest.mark.slow
def test_scan_of_a_generated_git_tree_reports_exactly_the_expected_list(bench, tmp_path: Path) -> None:
    gen_tree, _ = bench
    expected = gen_tree.generate(tmp_path / "tree", TINY, seed=2, git=True)

    result = subprocess.run(
        [sys.executable, "-m", "selfcall_audit", "scan", "--format", "json", "--no-cache"],
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


@pytest.mark.slow
def test_quick_benchmark_runs_end_to_end_and_measures_or_skips_each_peer(bench) -> None:
    _, scan_vs_peers = bench
    sca = scan_vs_peers.find_tool("selfcall-audit")
    result = subprocess.run(  # against itself: the rows of "another install" run in a copy of the tree
        [sys.executable, str(BENCHMARKS / "scan_vs_peers.py"), "--quick", "--against", sca],
        capture_output=True,
        text=True,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    values = _values(result.stdout)
    assert values["exact"] == "yes"
    assert values["findings"] == values["expected"] == "12"
    for key in (
        "sca_cold_s",
        "sca_warm_s",
        "sca_one_file_s",
        "sca_one_edit_s",
        "sca_other_edit_s",
        "sca_edit_whole_s",
    ):
        assert float(values[key]) > 0
    assert float(values["sca_one_file_click_s"]) > 0  # the same scan through click's command line
    assert float(values["one_file_through_click_vs_quick"]) > 0
    assert "cold_peak_mb: " in result.stdout
    for key in ("sca_cold", "sca_warm", "sca_one_file", "sca_one_edit", "sca_other_edit", "sca_edit_whole"):
        assert float(values[f"against_{key}_s"]) > 0 and float(values[f"{key}_vs_against"]) > 0
    assert "--against differs" not in result.stdout
    assert float(values["python_stdlib_s"]) > 0 and float(values["stdlib_vs_python_pass"]) > 0
    if values["git"] == "yes":
        assert float(values["python_listing_s"]) > 0 and float(values["listing_vs_python_pass"]) > 0
        assert float(values["python_git_s"]) > 0 and float(values["git_listing_vs_python_pass"]) > 0
    for peer, keys in {
        "semgrep": ["semgrep_s"],
        "ruff": ["ruff_cold_s", "ruff_warm_s"],
        "flake8": ["flake8_s"],
    }.items():
        path = scan_vs_peers.find_tool(peer)
        installed = path is not None
        assert (f"skipped {peer}: not installed" in result.stdout) == (not installed), peer
        assert (f"\n{peer}: {path}\n" in result.stdout) == installed, peer
        for key in keys:  # measured, or left out with a note saying why
            skipped = f"skipped {key.removesuffix('_s')}: it failed" in result.stdout
            assert (key in values) == (installed and not skipped), key
    if "flake8_s" in values:
        assert "flake8 --select SCA" in result.stdout


def test_a_commands_peak_memory_is_its_own_not_the_benchmarks(bench, tmp_path: Path) -> None:
    _, scan_vs_peers = bench
    ballast = bytearray(300 * 2**20)  # the benchmark's process grows large
    ballast[:: 2**12] = b"x" * len(ballast[:: 2**12])
    allocating = "b = bytearray(100 * 2**20); b[::4096] = b'x' * len(b[::4096]); exit(3)"

    small = scan_vs_peers.run([sys.executable, "-c", "print('small')"], tmp_path, launched=True)
    large = scan_vs_peers.run([sys.executable, "-c", allocating], tmp_path, launched=True)
    # a row takes its times from the measured rounds and its peak from one more run, launched
    row = scan_vs_peers.Measure("large", "large", [sys.executable, "-c", allocating], ok_codes=(3,))
    scan_vs_peers.warm_up([row], tmp_path, [])
    row.once(tmp_path, record=True)
    row.once(tmp_path, record=True)
    assert row.max_rss_kb == 0
    row.once(tmp_path, record=False, peak=True)

    assert small.max_rss_kb < 100 * 2**10 and small.stdout == "small\n" and small.returncode == 0
    assert 100 * 2**10 < large.max_rss_kb < 300 * 2**10 and large.returncode == 3
    assert 0 < small.seconds < 60
    assert 100 * 2**10 < row.max_rss_kb < 300 * 2**10 and len(row.seconds) == 2
    with pytest.raises(scan_vs_peers.BenchmarkError, match="cannot run /no/such/tool: FileNotFoundError"):
        scan_vs_peers.run(["/no/such/tool"], tmp_path, launched=True)
    del ballast


def test_the_stdlib_floor_imports_the_standard_library_modules_the_run_loaded_and_nothing_else(
    bench, tmp_path: Path
) -> None:
    _, scan_vs_peers = bench
    ours = scan_vs_peers.Measure("one", "one", [sys.executable, "-c", "import selfcall_audit.config, json"])
    floor = scan_vs_peers.stdlib_floor(ours, tmp_path)

    imported = floor.command[-1].removeprefix("import ").split(", ")
    assert {"json", "keyword", "pathlib"} <= set(imported)  # json asked for; the rest loaded by config
    assert not {name for name in imported if name.split(".")[0] in ("selfcall_audit", "yaml")}
    assert scan_vs_peers.run(floor.command, tmp_path).returncode == 0
    # A run that is not selfcall-audit's tells nothing about it.
    other = scan_vs_peers.Measure("other", "other", [sys.executable, "-c", "import json"])
    assert scan_vs_peers.stdlib_floor(other, tmp_path) is None


def test_the_listing_floors_list_with_git_then_look_at_each_listed_file_alone_and_while_the_modules_load(
    bench, tmp_path: Path
) -> None:
    _, scan_vs_peers = bench
    stdlib = scan_vs_peers.Measure("python_stdlib", "floor", [sys.executable, "-c", "import json, pathlib"])
    assert scan_vs_peers.listing_floors(stdlib, tmp_path) == []  # not a checkout: the tool walks it
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "app.py").write_text("x = 1\n")
    (tmp_path / "gone.py").write_text("y = 2\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)

    alone, loading = scan_vs_peers.listing_floors(stdlib, tmp_path)

    assert (alone.key, loading.key) == ("python_git", "python_listing")
    assert alone.command[-1] == scan_vs_peers.LISTING_FLOOR  # nothing imported
    assert loading.command[-2:] == ["json", "pathlib"]
    for floor in (alone, loading):
        assert scan_vs_peers.run(floor.command, tmp_path).returncode == 0
    (tmp_path / "gone.py").unlink()  # still listed by git's index: its status cannot be taken
    for floor in (alone, loading):
        failed = scan_vs_peers.run(floor.command, tmp_path)
        assert failed.returncode == 1 and "gone.py" in failed.stderr


@pytest.mark.slow
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


# gym_e2e: the benchmark on the real NeMo Gym agents (its real run is a script, not a test) ------------


@pytest.fixture
def gym_e2e(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import gym_e2e

    return gym_e2e


def fake_run(
    gym_e2e,
    seconds: float,
    latencies: list[float],
    self_calls: int = 0,
    failures: int = 0,
    cpu: float = 0.1,
    loopback: int = 0,
    outputs: list | None = None,
):
    rollouts = len(latencies)
    stats = {"requests": 3 * rollouts, "self_calls": 0, "peak_sockets": 9, "cpu": 0.1}
    agent = stats | {"requests": rollouts + loopback, "self_calls": self_calls, "cpu": cpu}
    return gym_e2e.Run(
        seconds, latencies, outputs or [], failures, {"agent": agent, "model": stats, "resources": stats}
    )


def test_the_summary_line_has_the_documented_fields_and_ratios_to_the_baseline(gym_e2e) -> None:
    off, on = gym_e2e.Tally(), gym_e2e.Tally()
    # two rounds with capture off: the candidate's CPU per rollout is below the baseline's in the first only
    off.runs["baseline"] = [fake_run(gym_e2e, 2.0, [0.010] * 100, self_calls=100, loopback=100, cpu=1.0)] * 2
    off.runs["candidate"] = [
        fake_run(gym_e2e, 1.6, [0.008] * 99 + [0.020], cpu=0.6),
        fake_run(gym_e2e, 1.6, [0.008] * 99 + [0.020], cpu=1.0),
    ]
    off.runs["direct"] = [fake_run(gym_e2e, 1.0, [0.005] * 100, cpu=0.5)] * 2
    on.runs["baseline"] = [fake_run(gym_e2e, 2.0, [0.010] * 100, self_calls=100, loopback=100, cpu=1.0)]
    on.runs["candidate"] = [
        fake_run(gym_e2e, 2.0, [0.010] * 100, self_calls=2, loopback=3, failures=1, cpu=0.9)
    ]
    on.runs["direct"] = [fake_run(gym_e2e, 1.0, [0.005] * 100, cpu=0.5)]
    on.identical["candidate"] = False

    line = gym_e2e.summary_line("simple_agent", 64, {(False, 64): off, (True, 64): on})

    assert line == (
        "agent=simple_agent concurrency=64 rollouts_per_s_ratio=1.250 p50_ratio=0.800 p99_ratio=2.000 "
        "failures=1 self_call_sockets=2 outputs_identical=0 cpu_per_rollout_ratio=0.800 loopback_requests=3 "
        "cpu_below_baseline_rounds=2/3 direct_cpu_per_rollout_ratio=0.500 direct_outputs_identical=1"
    )


def test_a_rounds_chunks_add_up_to_one_pass(gym_e2e) -> None:
    first = fake_run(
        gym_e2e, 1.0, [0.1, 0.2], self_calls=2, loopback=2, cpu=0.4, outputs=[(200, 1), (200, 2)]
    )
    second = fake_run(
        gym_e2e, 3.0, [0.3], self_calls=1, loopback=1, cpu=0.2, outputs=[(500, "x")], failures=1
    )
    second.stats["agent"]["peak_sockets"] = 30

    run = gym_e2e.merged([first, second])

    assert (run.seconds, run.latencies, run.outputs, run.failures) == (
        4.0,
        [0.1, 0.2, 0.3],
        [(200, 1), (200, 2), (500, "x")],
        1,
    )
    assert run.stats["agent"] == {
        "requests": 6,
        "self_calls": 3,
        "peak_sockets": 30,
        "cpu": pytest.approx(0.6),
    }
    assert run.stats["model"]["requests"] == 9


def test_the_anchor_is_compared_on_the_rows_the_baseline_answered_200(gym_e2e, capsys) -> None:
    baseline = [(200, {"reward": 1.0}), (500, "wrapped twice")]
    done = {
        "baseline": fake_run(gym_e2e, 1.0, [0.1, 0.1], outputs=baseline),
        "candidate": fake_run(gym_e2e, 1.0, [0.1, 0.1], outputs=[baseline[0], (500, "wrapped once")]),
        "direct": fake_run(gym_e2e, 1.0, [0.1, 0.1], outputs=[baseline[0], (500, "wrapped once")]),
    }

    assert gym_e2e.same_outputs("simple_agent", done, "direct")
    assert not gym_e2e.same_outputs("simple_agent", done, "candidate")
    assert "candidate answers row 1 differently (1 rows)" in capsys.readouterr().err

    done["direct"] = fake_run(gym_e2e, 1.0, [0.1, 0.1], outputs=[(200, {"reward": 0.0}), baseline[1]])
    assert not gym_e2e.same_outputs("simple_agent", done, "direct")


def test_the_run_stops_when_an_agent_process_imported_code_from_another_tree(
    gym_e2e, tmp_path, capsys
) -> None:
    setup, tree, elsewhere = gym_e2e.AGENTS[0], tmp_path / "gym-candidate", tmp_path / "other-checkout"
    files = {
        "agent": str(tree / "responses_api_agents" / "simple_agent" / "app.py"),
        "nemo_gym": str(tree / "nemo_gym" / "__init__.py"),
        "helper": str(tree / "nemo_gym" / "inprocess.py"),
    }
    gym_e2e.check_modules(setup, "candidate", tree, files)
    assert f"simple_agent candidate: helper imported from {files['helper']}" in capsys.readouterr().out

    for key in files:
        moved = files | {key: files[key].replace(str(tree), str(elsewhere))}
        with pytest.raises(
            SystemExit, match=f"simple_agent \\(candidate\\): {key} was imported from .*other-checkout"
        ):
            gym_e2e.check_modules(setup, "candidate", tree, moved)
    # the original agent must not call a helper at all; the migrated one must call the tree's
    with pytest.raises(SystemExit, match="helper was imported from"):
        gym_e2e.check_modules(setup, "baseline", tree, files)
    with pytest.raises(SystemExit, match="helper was imported from None"):
        gym_e2e.check_modules(setup, "candidate", tree, files | {"helper": None})


def test_outputs_are_compared_without_times_and_random_ids(gym_e2e) -> None:
    first = {
        "reward": 1.0,
        "created_at": 1.5,
        "trace": {"duration_ms": 3, "id": "4f1c2a9e-0b7d-4c11-9a2e-1d2c3b4a5f60"},
    }
    second = {
        "reward": 1.0,
        "created_at": 9.0,
        "trace": {"duration_ms": 7, "id": "0e9d8c7b-6a5f-4e3d-2c1b-0a9f8e7d6c5b"},
    }

    assert gym_e2e.normalised(first) == gym_e2e.normalised(second)
    assert gym_e2e.normalised(first) != gym_e2e.normalised(second | {"reward": 0.0})


def test_a_row_is_correct_with_reward_1_or_as_the_failure_path_it_asks_for(gym_e2e) -> None:
    setup = gym_e2e.AGENTS[0]
    normal, failing = setup.row(0), setup.row(gym_e2e.FAIL_EVERY - 1)

    assert gym_e2e.correct(normal, 200, {"reward": 1.0})
    assert not gym_e2e.correct(normal, 200, {"reward": 0.0})
    assert not gym_e2e.correct(normal, 500, "boom")
    assert gym_e2e.correct(failing, 500, "the mock model failed")
    assert not gym_e2e.correct(failing, 200, {"reward": 1.0})


def test_a_servers_cpu_time_leaves_out_its_socket_sampler(monkeypatch) -> None:
    """The sampler lists the process's descriptors, more of them where the HTTP self-call holds
    sockets: its CPU time is the benchmark's, not the server's."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import gym_e2e_serve

    class Slept(Exception):
        """Ends the sampler's loop after one listing."""

    def sleep(_: float) -> None:
        raise Slept

    samplers = []
    clock = SimpleNamespace(
        process_time=iter([100.0, 101.0]).__next__,  # at reset, then at the snapshot
        thread_time=iter([5.0, 5.25]).__next__,  # one listing: 0.25 s of the sampler's thread
        sleep=sleep,
    )
    monkeypatch.setattr(gym_e2e_serve, "time", clock)
    monkeypatch.setattr(
        gym_e2e_serve,
        "threading",
        SimpleNamespace(
            Lock=threading.Lock,
            Thread=lambda target, daemon: SimpleNamespace(start=lambda: samplers.append(target)),
        ),
    )
    stats = gym_e2e_serve.Stats(None)
    with pytest.raises(Slept):
        samplers[0]()

    assert json.loads(stats.snapshot())["cpu"] == 0.75


def test_the_mock_model_walks_the_counter_tools_then_answers_and_fails_on_request(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from gym_e2e import COUNTER_TOOLS
    from gym_e2e_serve import model_answer

    user = {"role": "user", "content": "add 4 then add 5 then get the count"}

    def step(done: int) -> tuple[int, dict]:
        outputs = [
            {"type": "function_call_output", "call_id": f"call_{i}", "output": "{}"} for i in range(done)
        ]
        return model_answer({"input": [user, *outputs], "tools": COUNTER_TOOLS})

    calls = [step(done)[1]["output"][0] for done in range(4)]

    assert [(c["type"], c.get("name"), c.get("arguments")) for c in calls] == [
        ("function_call", "increment_counter", '{"count": 4}'),
        ("function_call", "increment_counter", '{"count": 5}'),
        ("function_call", "get_counter_value", "{}"),
        ("message", None, None),
    ]
    assert step(1) == step(1)  # deterministic, ids included
    assert model_answer({"input": "FAIL500 please"})[0] == 500


def test_the_agent_is_capped_with_cgroup_v1_or_v2_and_left_uncapped_where_neither_can_be_written(
    gym_e2e, tmp_path: Path
) -> None:
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1")
    cap = gym_e2e.CpuCap.create("agent", 0.5, v1)
    assert (cap.folder / "cpu.cfs_period_us").read_text() == "100000"
    assert (cap.folder / "cpu.cfs_quota_us").read_text() == "50000"
    cap.add(1234)
    assert (cap.folder / "cgroup.procs").read_text() == "1234"

    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpuset cpu io memory\n")
    cap = gym_e2e.CpuCap.create("agent", 0.5, v2)
    assert (cap.folder / "cpu.max").read_text() == "50000 100000"
    assert (v2 / "cgroup.subtree_control").read_text() == "+cpu"

    without_cpu = tmp_path / "none"
    without_cpu.mkdir()
    (without_cpu / "cgroup.controllers").write_text("io memory\n")
    assert gym_e2e.CpuCap.create("agent", 0.5, without_cpu) is None
    assert gym_e2e.CpuCap.create("agent", 0.5, tmp_path / "missing") is None
    assert gym_e2e.CpuCap.create("agent", 0.5, v1) is None  # its folder exists: not another's to take


def test_the_placement_says_whether_the_agent_is_capped(gym_e2e) -> None:
    capped = gym_e2e.Placement(frozenset({0}), frozenset({1}), 0.5)
    uncapped = gym_e2e.Placement(frozenset({0}), frozenset({1}), None)

    assert (
        capped.describe()
        == "agent on CPU 0; model, resources and client on 1; the agent capped at 50% of a CPU"
    )
    assert "the agent not capped" in uncapped.describe()
    assert capped.env("agent") == {"GYM_E2E_CPUS": "0"} and capped.env("model") == {"GYM_E2E_CPUS": "1"}


@pytest.mark.parametrize(
    ("script", "missing"),
    [("gym_e2e.py", "responses_api_agents/"), ("gym_call_cost.py", "responses_api_agents/simple_agent/")],
)
@pytest.mark.slow
def test_the_scripts_refuse_a_folder_that_is_not_a_nemo_gym_checkout(
    tmp_path: Path, script: str, missing: str
) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--gym", str(tmp_path), "--gym-python", sys.executable],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2
    assert f"is not a NeMo Gym checkout (no {missing})" in done.stderr


@pytest.mark.parametrize(
    ("code", "check", "why"),
    [
        (
            "import sys; sys.exit('ImportError: no engine')",
            None,
            "semgrep exited 1:\n  ImportError: no engine",
        ),
        ("pass", lambda outcome: len(json.loads(outcome.stdout)), "semgrep printed what cannot be read"),
    ],
    ids=["exits-1", "prints-nothing"],
)
def test_a_peer_that_fails_in_the_first_round_is_left_out_with_a_note(
    bench, tmp_path: Path, code: str, check, why: str
) -> None:
    _, scan_vs_peers = bench
    broken = scan_vs_peers.Measure(
        "semgrep",
        "semgrep",
        [sys.executable, "-c", code],
        ok_codes=(0,),
        check=check or (lambda outcome: None),
        optional=True,
    )
    working = scan_vs_peers.Measure("ruff_cold", "ruff", [sys.executable, "-c", "pass"], optional=True)
    notes: list[str] = []

    kept = scan_vs_peers.warm_up([broken, working], tmp_path, notes)

    assert kept == [working]
    assert len(notes) == 1 and notes[0].startswith(f"skipped semgrep: it failed: {why}")
    assert working.seconds == []  # the first round is not measured


def test_selfcall_audit_failing_in_the_first_round_stops_the_benchmark(bench, tmp_path: Path) -> None:
    _, scan_vs_peers = bench
    ours = scan_vs_peers.Measure(
        "sca_cold", "selfcall-audit cold", [sys.executable, "-c", "raise SystemExit(2)"]
    )

    with pytest.raises(scan_vs_peers.BenchmarkError, match="selfcall-audit cold exited 2"):
        scan_vs_peers.warm_up([ours], tmp_path, [])


@pytest.mark.parametrize(
    ("stdout", "count"),
    [
        ("All checks passed!\n", 0),
        ("a.py:1:8: F401 [*] `os` imported but unused\nFound 1 error.\n[*] 1 fixable with `--fix`.\n", 1),
        ("...\nFound 1,2 errors.\n", None),
        ("", None),
    ],
    ids=["clean", "one-error", "garbled", "silent"],
)
def test_ruff_counts_come_from_its_closing_line_and_a_ruff_that_did_not_lint_is_unreadable(
    bench, stdout: str, count: int | None
) -> None:
    _, scan_vs_peers = bench
    outcome = scan_vs_peers.Outcome(seconds=0.1, max_rss_kb=0, returncode=1, stdout=stdout, stderr="")

    if count is None:
        with pytest.raises(ValueError, match="Found N errors"):
            scan_vs_peers.ruff_diagnostics(outcome)
    else:
        assert scan_vs_peers.ruff_diagnostics(outcome) == count


def test_a_ruff_shim_with_no_interpreter_behind_it_is_left_out(bench, tmp_path: Path) -> None:
    _, scan_vs_peers = bench
    shim = 'import sys; sys.exit("pyenv: version `3.13.14\' is not installed")'
    ruff = scan_vs_peers.Measure(
        "ruff_cold", "ruff", [sys.executable, "-c", shim], check=scan_vs_peers.ruff_diagnostics, optional=True
    )
    notes: list[str] = []

    assert scan_vs_peers.warm_up([ruff], tmp_path, notes) == []
    assert notes == [
        "skipped ruff_cold: it failed: ruff printed what cannot be read "
        "(ValueError(\"no 'Found N errors.' or 'All checks passed!' line\"))"
    ]


def test_the_latency_benchmarks_edits_go_where_at_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """`end` leaves every line where it was, `call` edits the first diagnostic's line alone, and
    `top` moves every line by one more each edit (what the server keeps is then of no use)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import lsp_latency
    from lsprotocol import types as lsp

    text = "class A:\n    def run(self):\n        post(x)\r\n"
    call = [lsp.Diagnostic(lsp.Range(lsp.Position(2, 8), lsp.Position(2, 15)), "a self-call")]

    assert lsp_latency.edited(text, "end", call, 3) == text + "# edit 3\n"
    assert lsp_latency.edited(text, "call", call, 3) == text.replace("(x)", "(x)  # edit 3")
    assert lsp_latency.edited(text, "top", call, 1) == "# edit 0\n# edit 1\n" + text


def test_the_language_server_latency_benchmark_runs_on_a_small_project() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "lsp_latency.py"), "--repo", str(DEMO), "--edits", "3"],
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 0, done.stderr
    assert "first analysis (didOpen)" in done.stdout
    assert "re-diagnose after an edit, cpu: median" in done.stdout
    assert "x the 20 ms target" in done.stdout
    assert "quick fix after the edits: what `fix` writes (responses_api_agents/" in done.stdout


def run_on_demo(script: str) -> list[str]:
    """The lines a benchmark script prints run once on the demo tree; it must succeed."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), str(DEMO), "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_parse_cost_benchmark_parses_the_files_a_scan_parses() -> None:
    report = json.loads(
        subprocess.run(
            [sys.executable, "-m", "selfcall_audit", "scan", "--no-cache", "--format", "json", str(DEMO)],
            capture_output=True,
            text=True,
        ).stdout
    )
    lines = run_on_demo("parse_cost.py")

    assert lines[0].startswith(f"{report['summary']['files_parsed']} files parsed by the scan, ")
    assert [line.split()[0] for line in lines[1:3]] == ["ast.parse", "libcst.parse_module"]


def test_the_walk_cost_benchmark_times_each_walk_over_the_same_nodes() -> None:
    lines = run_on_demo("walk_cost.py")

    assert lines[0] == f"files={len(list(DEMO.glob('responses_api_agents/*/app.py')))}"
    assert int(lines[1].removeprefix("nodes=")) > 1000  # the walks met the same nodes, or it stops
    assert [line.rsplit(maxsplit=3)[0] for line in lines[2:]] == [
        "libcst visit",
        "matchers.findall",
        "migrate.walk.descendants",
    ]
    assert lines[-1].endswith(" 1.00x")


def test_the_fix_floor_benchmark_counts_libcsts_work_in_fix_and_adds_it_up() -> None:
    lines = run_on_demo("fix_floor.py")
    pairs = dict(line.split("=") for line in lines if "=" in line and " " not in line)
    counted = next(line for line in lines if line.startswith("libcst's work in fix --jobs 1: "))

    # each of libcst's costs was caught where fix calls it: none is zero
    assert all(f" {part} 0 ms" not in counted for part in ("parse", "positions", "generation", "set-up"))
    work = float(pairs["libcst_work_ms"]) / 1000
    load = float(pairs["libcst_load_ms"]) / 1000
    cores = os.cpu_count() or 1
    assert work > 0 and load > 0
    assert float(pairs["floor_s"]) == pytest.approx(float(pairs["cold_s"]) + load + work / cores, abs=0.003)
    ratio = float(pairs["floor_s"]) / float(pairs["cold_s"])  # both printed to the millisecond
    assert float(pairs["floor_vs_cold"]) == pytest.approx(ratio, rel=0.01)


def test_the_deferred_imports_are_found_written_absolute_with_the_functions_making_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import deferred_imports

    files = {
        "pkg/__init__.py": "def load():\n    from . import sub\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/mod.py": (
            "import json\n\n"  # at the top: not deferred
            "def run():\n    from ..other import thing\n    from .sibling import a, b\n\n"
            "class C:\n    def method(self):\n        import yaml\n        from ..other import thing\n"
        ),
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)

    assert deferred_imports.deferred(tmp_path / "pkg") == {
        "from pkg import sub": {"pkg.load"},
        "from pkg.other import thing": {"pkg.sub.mod.run", "pkg.sub.mod.method"},
        "from pkg.sub.sibling import a, b": {"pkg.sub.mod.run"},
        "import yaml": {"pkg.sub.mod.method"},
    }


def test_a_deferred_import_is_timed_in_the_process_that_loaded_the_warm_modules_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import deferred_imports

    statement = "import sys\nassert 'json' in sys.modules and 'no_such_module' not in sys.modules"
    done = subprocess.run(
        deferred_imports.timed(["json", "no_such_module"], statement), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr  # the modules first, one this platform lacks passed over
    assert float(done.stdout) >= 0  # the statement's CPU ms, the only line printed
    failing = deferred_imports.timed([], "import no_such_module")
    assert subprocess.run(failing, capture_output=True).returncode != 0


def test_the_deferred_imports_benchmark_measures_the_imports_the_architecture_test_lists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import deferred_imports
    from test_architecture import DEFERRED_IMPORTS

    import selfcall_audit

    found = deferred_imports.deferred(Path(selfcall_audit.__file__).parent)
    makers = {
        maker.rsplit(".", 1)[0].removeprefix("selfcall_audit.") for where in found.values() for maker in where
    }
    assert {module for module, _ in DEFERRED_IMPORTS} <= makers
    assert len(found) >= len({target for _, target in DEFERRED_IMPORTS})


def test_the_annotation_cost_benchmark_runs_each_module_the_architecture_test_lists_both_ways(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import annotation_cost
    from test_architecture import EVALUATED_ANNOTATIONS

    assert tuple(f"selfcall_audit.{name}" for name in EVALUATED_ANNOTATIONS) == annotation_cost.MODULES
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "annotation_cost.py"), "--rounds", "1"],
        capture_output=True,
        text=True,
    )

    assert result.returncode == 0, result.stderr
    modules = json.loads(result.stdout.splitlines()[-1].removeprefix("modules="))
    assert sorted(modules) == sorted(name.rsplit(".", 1)[-1] for name in EVALUATED_ANNOTATIONS)
    assert all(times["evaluated_ms"] > 0 and times["postponed_ms"] > 0 for times in modules.values())

"""The cache: a warm run answers from it without loading the analysis, and never goes stale."""

from __future__ import annotations

import json
import marshal
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixture_annotations import NOT_COPIED, annotated_findings

from selfcall_audit.analysis.extract import extract
from selfcall_audit.orchestration import codec
from selfcall_audit.orchestration.cache import FactsCache
from selfcall_audit.orchestration.codec import decode, encode

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

WARM_RUN = """\
import sys
from pathlib import Path

from selfcall_audit.config import load_settings
from selfcall_audit.orchestration.project import Project

root = Path(sys.argv[1])
report = Project(root, load_settings(root)).analyze([root])
loaded = sorted(m for m in sys.modules if m.startswith(("selfcall_audit.", "yaml", "libcst")))
print(len(report.findings), report.files_parsed, *loaded)
"""


def _run(root: Path) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", WARM_RUN, str(root)], capture_output=True, text=True, check=True
    )
    return result.stdout.split()


def test_a_warm_run_answers_from_the_cache_without_loading_the_analysis(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo-gym", root, ignore=NOT_COPIED)
    expected = len(annotated_findings(root))

    cold = _run(root)
    warm = _run(root)

    assert cold[0] == warm[0] == str(expected)
    assert int(cold[1]) > 0 and warm[1] == "0"
    assert "selfcall_audit.analysis.facts" in cold and "yaml" in cold
    for module in (
        "selfcall_audit.analysis.facts",
        "selfcall_audit.analysis.resolve",
        "selfcall_audit.analysis.gym_config",
        "selfcall_audit.analysis.yaml_nodes",
        "yaml",
        "libcst",
    ):
        assert module not in warm
    for module in (  # what a run that parses needs: the workers, the facts store, the reuse check
        "selfcall_audit.orchestration.analysing",
        "selfcall_audit.orchestration.stages",
        "selfcall_audit.workspace.workers",
        "selfcall_audit.orchestration.store",
        "selfcall_audit.orchestration.indexes",
        "selfcall_audit.orchestration.resolving",
        "selfcall_audit.orchestration.reuse",
        "selfcall_audit.orchestration.comments",
    ):
        assert module in cold
        assert module not in warm


def test_a_state_the_checkout_goes_back_to_answers_from_its_own_result(tmp_path: Path) -> None:
    """pre-commit scans the staged files, the user the work tree; a checkout goes from one branch to
    another and back: each state answers from the result kept for it, though another came between."""
    root = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo-gym", root, ignore=NOT_COPIED)
    app = root / "responses_api_agents" / "simple_agent" / "app.py"
    original = app.read_bytes()
    analysis = ("selfcall_audit.analysis.facts", "selfcall_audit.analysis.resolve")

    first = _run(root)
    app.write_bytes(original.replace(b"name=self.config.name,", b"name=self.config.resources_server.name,"))
    other = _run(root)  # the self-call posts elsewhere now: analysed again
    app.write_bytes(original)
    back = _run(root)

    assert int(other[0]) == int(first[0]) - 1
    assert all(module in other for module in analysis)
    assert back[:2] == [first[0], "0"]
    assert not any(module in back for module in analysis)


def test_the_last_four_states_are_kept_and_an_older_one_is_analysed_again(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo-gym", root, ignore=NOT_COPIED)
    app = root / "responses_api_agents" / "simple_agent" / "app.py"
    original = app.read_bytes()
    expected = str(len(annotated_findings(root)))
    cache = root / ".selfcall_audit_cache"

    for state in range(6):  # six states: a comment changes no finding, only the listing's fingerprint
        app.write_bytes(original + f"# state {state}\n".encode())
        assert _run(root)[0] == expected
        if state == 0:
            (snapshots,) = cache.glob("v*/snapshots")
            (snapshots / "notes.dat").write_bytes(b"not the tool's\n")
    kept = sorted(p.name for p in snapshots.iterdir())
    app.write_bytes(original + b"# state 1\n")
    again = _run(root)  # dropped: brought up to date from the last result
    newest_first = FactsCache.open(root, ".selfcall_audit_cache").recent()
    app.write_bytes(original + b"# state 4\n")
    kept_one = _run(root)

    assert len(kept) == 5 and "notes.dat" in kept  # four results, and a file the tool did not write
    assert again[0] == expected and len(sorted(snapshots.iterdir())) == 5
    assert kept_one[:2] == [expected, "0"]
    assert (
        FactsCache.open(root, ".selfcall_audit_cache").recent() == newest_first
    )  # answered, not stored anew


def test_a_scan_from_the_command_line_never_loads_the_codemod(tmp_path: Path) -> None:
    """libcst takes longer to import than a warm scan takes to run: only `fix` may load it."""
    root = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo-gym", root, ignore=NOT_COPIED)
    script = (
        "import sys\n"
        "from selfcall_audit.frontends.cli import main\n"
        "code = main(['scan', '--format', 'json', sys.argv[1]])\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('libcst', 'selfcall_audit.migrate.codemod')))\n"
        "print(code, *loaded, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(root)], capture_output=True, text=True, check=True
    )
    assert done.stderr.splitlines()[-1] == "1", done.stderr  # findings: it analysed, and loaded neither


def test_a_changed_file_is_analysed_again(cli, tmp_path: Path) -> None:
    root = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo-gym", root, ignore=NOT_COPIED)
    app = root / "responses_api_agents" / "simple_agent" / "app.py"

    def findings() -> list[tuple[str, int]]:
        report = json.loads(cli("scan", root, "--format", "json").stdout)
        return [
            (f["path"], f["line"]) for f in report["findings"] if f["path"].endswith("simple_agent/app.py")
        ]

    before = findings()
    app.write_text("# a new first line\n" + app.read_text())

    assert findings() == [(path, line + 1) for path, line in before]
    assert before


def test_the_facts_of_every_fixture_come_back_from_the_cache_as_they_went_in() -> None:
    for path in sorted(FIXTURES.rglob("*.py")):
        facts = extract(path.relative_to(FIXTURES).as_posix(), path.read_bytes())

        stored = marshal.loads(marshal.dumps(encode(facts), 4))

        assert decode(stored, "ModuleFacts") == facts, path


def _bodies_replaced(encoded: object, body: tuple) -> object:
    """The encoded facts with every function's encoded body replaced by `body`."""
    if isinstance(encoded, tuple):
        if encoded[:1] == ("FunctionBody",):
            return body
        return tuple(_bodies_replaced(item, body) for item in encoded)
    return encoded


def test_a_cached_function_body_is_decoded_when_first_read_and_travels_to_workers_encoded() -> None:
    """A one-file run looks up many modules but evaluates few bodies: each body stays encoded until
    one of its fields is read, then equals what was extracted, also after pickling (to a worker)."""
    path = FIXTURES / "demo-gym" / "responses_api_agents" / "remote_agent" / "app.py"
    facts = extract("app.py", path.read_bytes())
    method = next(m for k in facts.classes for m in k.methods if m.calls)
    encoded = marshal.loads(marshal.dumps(encode(facts), 4))

    stored = decode(encoded, "ModuleFacts")
    cached = next(m for k in stored.classes for m in k.methods if m.name == method.name)

    assert pickle.loads(pickle.dumps(cached)) == method
    assert cached.calls == method.calls and cached.calls is cached.calls  # decoded once, kept
    assert cached == method and hash(cached) == hash(method)
    assert cached.defaults == method.defaults and cached.returns == method.returns

    # bodies that cannot be decoded: nothing notices until one is read, pickled or not
    broken = decode(_bodies_replaced(encoded, ("FunctionBody", "too few fields")), "ModuleFacts")
    cached = next(m for k in broken.classes for m in k.methods if m.name == method.name)
    assert cached.name == method.name and cached.params == method.params and cached.span == method.span
    for function in (cached, pickle.loads(pickle.dumps(cached))):
        with pytest.raises(ValueError, match="FunctionBody with 1 fields where 4 were expected"):
            function.calls  # noqa: B018


def test_every_field_holding_a_cached_class_is_encoded_as_one() -> None:
    """A new field of a finding that holds a value type (a blocker, evidence) must be in the codec's
    schema, or the first snapshot holding one cannot be stored."""
    schema = codec._REPORT_SCHEMA
    names = set(schema.types)
    for cls in schema.types.values():
        for name in cls._fields:
            held = names & set(re.findall(r"\w+", str(cls.__annotations__[name])))
            assert not held or name in schema.nested.get(cls, {}), (cls.__name__, name, held)

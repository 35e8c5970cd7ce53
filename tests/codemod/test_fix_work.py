"""`fix` does work in proportion to the file: doubling a file's self-calls, its lines or the
prompt a call carries at most doubles what `fix` reads and compares, so a quadratic step fails
here whatever the machine's speed (nothing is timed). And it leaves out the work a rewrite does
not need: the nodes away from a change are not rebuilt, a file that cannot spell the helper's name
is not searched for it, a test module's other tests are not parsed by libcst.

The work is counted where a step that reads the whole file again for each rewrite, or compares
two texts character by character, spends it:

- `parsed`: characters libcst parses;
- `compared`: pairs of equal lines or characters difflib's matcher visits (for each position of
  one side searched, the places its line or character stands on the other side);
- `walked`: children of `ast` nodes listed (every `ast.walk`, and any scan of a node's children);
- `placed`: positions of libcst nodes compared while finding a reported call in the tree;
- `matched`: findings compared with each other.

The files are the benchmark's (`benchmarks/fix_cost.py`): a class of self-calling methods, a long
module with four self-calls, one self-call carrying a long prompt string.
"""

from __future__ import annotations

import ast
import difflib
import functools
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import libcst
import pytest
from cli_support import run_main
from libcst.codemod import CodemodContext

from selfcall_audit.frontends.libcst_codemod import FixSelfCalls
from selfcall_audit.ftypes import Finding
from selfcall_audit.migrate import flow, locate, rewrite, scope, test_update

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
CASES = Path(__file__).parent / "cases"
HELPER = "selfcall_audit.inprocess:responses_in_process"
DOUBLING = 2.3  # at most this much more work for twice the input (2 when exactly linear)


@pytest.fixture
def fix_cost(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import fix_cost

    return fix_cost


def counted_work(monkeypatch: pytest.MonkeyPatch, work: Counter) -> None:
    """Count the work (see the module's docstring) into `work` while the test runs."""
    parse = libcst.parse_module

    def parse_module(source: str, *args: object, **kwargs: object) -> libcst.Module:
        work["parsed"] += len(source)
        return parse(source, *args, **kwargs)

    find = difflib.SequenceMatcher.find_longest_match

    def find_longest_match(
        self: difflib.SequenceMatcher,
        alo: int = 0,
        ahi: int | None = None,
        blo: int = 0,
        bhi: int | None = None,
    ) -> difflib.Match:
        high = len(self.a) if ahi is None else ahi
        work["compared"] += (high - alo) + sum(len(self.b2j.get(x, ())) for x in self.a[alo:high])
        return find(self, alo, ahi, blo, bhi)

    children = ast.iter_child_nodes

    def iter_child_nodes(node: ast.AST) -> Iterator[ast.AST]:
        for child in children(node):
            work["walked"] += 1
            yield child

    point = locate._point

    def counted_point(position: object) -> tuple[int, int]:
        work["placed"] += 1
        return point(position)  # type: ignore[arg-type]

    equal = Finding.__eq__

    def finding_eq(self: Finding, other: object) -> bool:
        work["matched"] += 1
        return equal(self, other)

    monkeypatch.setattr(libcst, "parse_module", parse_module)
    monkeypatch.setattr(difflib.SequenceMatcher, "find_longest_match", find_longest_match)
    monkeypatch.setattr(ast, "iter_child_nodes", iter_child_nodes)
    monkeypatch.setattr(locate, "_point", counted_point)
    monkeypatch.setattr(Finding, "__eq__", finding_eq)


def fix_work(root: Path, source: str, project: Callable[[Path, str], None], calls: int) -> Counter:
    """The work of `fix` on a project whose `app.py` is `source`, every self-call rewritten."""
    project(root, source)
    work: Counter = Counter()
    with pytest.MonkeyPatch.context() as patch:
        counted_work(patch, work)
        done = run_main(["fix", "--no-cache", "--jobs", "1", "-q", str(root)])
    assert done.exit_code == 0, done.stdout + done.stderr
    rewritten = (root / "app.py").read_text()
    assert (rewritten.count("await responses_in_process("), rewritten.count("server_client")) == (calls, 0)
    return work


def assert_linear(small: Counter, large: Counter) -> None:
    """Each kind of work at most `DOUBLING` times larger for twice the input."""
    for kind in ("parsed", "compared", "walked", "placed", "matched"):
        assert large[kind] <= DOUBLING * small[kind], (kind, small, large)


@pytest.mark.slow  # fix on 600 self-calls, about 20 s
def test_twice_the_self_calls_is_twice_the_work(fix_cost, tmp_path: Path) -> None:
    small = fix_work(tmp_path / "200", fix_cost.many_calls(200), fix_cost.project, 200)
    large = fix_work(tmp_path / "400", fix_cost.many_calls(400), fix_cost.project, 400)

    assert_linear(small, large)


@pytest.mark.slow  # fix on 45,000 lines, about 20 s
def test_twice_the_lines_is_twice_the_work(fix_cost, tmp_path: Path) -> None:
    small = fix_work(tmp_path / "15000", fix_cost.long_file(15_000), fix_cost.project, 4)
    large = fix_work(tmp_path / "30000", fix_cost.long_file(30_000), fix_cost.project, 4)

    assert_linear(small, large)


def test_twice_the_prompt_is_twice_the_work(fix_cost, tmp_path: Path) -> None:
    small = fix_work(tmp_path / "5", fix_cost.long_prompt(5), fix_cost.project, 1)
    large = fix_work(tmp_path / "10", fix_cost.long_prompt(10), fix_cost.project, 1)

    assert_linear(small, large)


def rewritten_case(root: Path, source: str) -> tuple[libcst.Module, libcst.Module]:
    """An agent module `source` in a small project, as libcst read it and as the rewrite left it
    (the tree itself, not a copy: see `rewrite._transformed`)."""
    (root / "pyproject.toml").write_text(
        '[tool.selfcall-audit]\nhelper = "selfcall_audit.inprocess:responses_in_process"\n'
    )
    (root / "nemo_gym").mkdir()
    (root / "nemo_gym" / "__init__.py").write_text("")
    app = root / "responses_api_agents" / "x" / "app.py"
    app.parent.mkdir(parents=True)
    app.write_text(source)
    module = libcst.parse_module(source)
    command = FixSelfCalls(CodemodContext(filename=str(app)), helper=HELPER)
    return module, rewrite._transformed(command, module)


def test_statements_away_from_a_rewrite_come_out_as_they_went_in(tmp_path: Path) -> None:
    """A libcst transformer builds anew every node it visits: only the paths down to the rewritten
    calls and the dropped aliases are visited, so every other statement of a method comes out of
    the rewrite as the very node that went in (visiting whole methods was a fifth of `fix`'s
    rewriting on NeMo Gym)."""
    module, rewritten = rewritten_case(tmp_path, (CASES / "client_alias" / "before.py").read_text())

    assert rewritten.code.encode() == (CASES / "client_alias" / "after.py").read_bytes()
    (agent,) = [s for s in module.body if isinstance(s, libcst.ClassDef)]
    (agent_after,) = [s for s in rewritten.body if isinstance(s, libcst.ClassDef)]
    for method, method_after in zip(agent.body.body, agent_after.body.body, strict=True):
        before, after = method.body.body, method_after.body.body
        kept = [s for s in before if any(s is t for t in after)]
        # the statement holding the call is rebuilt; in `replay`, the alias `post = ...` goes too
        assert len(kept) == len(before) - {"run": 1, "replay": 2}[method.name.value]


@pytest.mark.parametrize(("comment", "searched"), [("# café", 0), ("# \uff52esponses_in_process", 1)])
def test_a_file_that_cannot_spell_the_helpers_name_is_not_searched_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, comment: str, searched: int
) -> None:
    """Whether anything binds the helper's name is a walk of the whole module: a file that does
    not spell the name, NFKC-normalised as Python reads identifiers, is spared it, whatever else
    its non-ASCII text holds (on NeMo Gym, 10 of the 24 files `fix` rewrites)."""
    walks: list[str] = []
    search = scope.helper_bindings
    monkeypatch.setattr(scope, "helper_bindings", lambda *args: walks.append(args[2]) or search(*args))
    source = (CASES / "client_alias" / "before.py").read_text() + comment + "\n"

    _, rewritten = rewritten_case(tmp_path, source)

    assert walks == ["responses_in_process"] * searched
    assert "await responses_in_process(" in rewritten.code


def test_a_method_that_never_binds_self_is_searched_once_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether `self` is rebound in the method, and which parts of it to search for bindings of
    `self`: one walk of the body answers both when nothing in it binds `self` (the rebinding's
    search of the method's own scope would find less)."""
    walks: list[tuple[str, ...]] = []
    rebindings: list[tuple[str, ...]] = []
    search = scope.bindings

    def counted(into: list, node: libcst.CSTNode, name: str, own_scope: bool = False) -> list[libcst.CSTNode]:
        into.append((type(node).__name__, name))
        return search(node, name, own_scope)

    monkeypatch.setattr(flow, "bindings", functools.partial(counted, walks))
    monkeypatch.setattr(scope, "bindings", functools.partial(counted, rebindings))  # the planner's

    _, rewritten = rewritten_case(tmp_path, (CASES / "client_alias" / "before.py").read_text())

    assert rewritten.code.encode() == (CASES / "client_alias" / "after.py").read_bytes()
    assert walks.count(("IndentedBlock", "self")) == 2  # the bodies of `run` and `replay`, once each
    assert ("IndentedBlock", "self") not in rebindings


def updated_tests(root: Path, tests_source: str) -> tuple[str, Counter]:
    """The test module `fix` writes for the `tests_routing_fake` case's tests, given as
    `tests_source`, and the work it did."""
    case = CASES / "tests_routing_fake"
    root.mkdir(exist_ok=True)
    shutil.copyfile(case / "pyproject.toml", root / "pyproject.toml")
    (root / "nemo_gym").mkdir()
    (root / "nemo_gym" / "__init__.py").write_text("")
    agent = root / "responses_api_agents" / "x" / "app.py"
    (agent.parent / "tests").mkdir(parents=True)
    shutil.copyfile(CASES / "plain" / "before.py", agent)
    tests = agent.parent / "tests" / "test_app.py"
    tests.write_text(tests_source)
    work: Counter = Counter()
    with pytest.MonkeyPatch.context() as patch:
        counted_work(patch, work)
        done = run_main(["fix", "--no-cache", "--jobs", "1", "-q", str(root)])
    assert done.exit_code == 0, done.stdout + done.stderr
    return tests.read_text(), work


def test_a_test_update_reads_the_tests_it_updates_not_the_whole_module(tmp_path: Path) -> None:
    """libcst reads a test module's top and the definitions of the tests it updates; the other
    tests (here 300 of them) are blanked for it, and come out byte for byte as they were."""
    case = CASES / "tests_routing_fake"
    others = "".join(f"\n\ndef test_unrelated_{i}() -> None:\n    assert {i} == {i}\n" for i in range(300))

    updated, work = updated_tests(tmp_path, (case / "tests_before.py").read_text() + others)

    assert updated == (case / "tests_after.py").read_text() + others
    assert work["parsed"] < len(others) / 2


OTHER_TESTS = "".join(
    f"\n\ndef test_unrelated_{i}() -> None:\n    assert {i} == {i}  # é\n" for i in range(3)
)
BEFORE = (CASES / "tests_routing_fake" / "tests_before.py").read_text()


@pytest.mark.parametrize(
    "source",
    [
        pytest.param((BEFORE + OTHER_TESTS).replace("\n", "\r\n"), id="crlf"),
        pytest.param((BEFORE + OTHER_TESTS).replace("    ", "\t"), id="tabs"),
        pytest.param((BEFORE + OTHER_TESTS).replace("\n\nclass", "\n\x0c\nclass"), id="form-feed"),
        pytest.param((BEFORE + OTHER_TESTS).rstrip("\n"), id="no-last-newline"),
        pytest.param(BEFORE.replace("    @pytest", "    # above\n    @pytest") + OTHER_TESTS, id="comment"),
        pytest.param(
            BEFORE
            + "\n\nclass TestGrader:\n    def test_run_dispatches_to_its_own_route(self):\n        pass\n",
            id="redefined",
        ),
    ],
)
def test_a_test_module_updated_with_its_other_tests_blanked_is_as_if_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    updated, _ = updated_tests(tmp_path / "blanked", source)
    monkeypatch.setattr(test_update, "region", lambda *args: None)
    whole, _ = updated_tests(tmp_path / "whole", source)

    assert updated == whole != source


def test_a_test_module_whose_first_block_is_blanked_and_indented_otherwise_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libcst indents the code it adds (the shim's body) as the module's first block: where that
    block is blanked and the others indent otherwise, the whole module is read, as without blanking."""
    source = (CASES / "tests_routing_fake" / "tests_before.py").read_text()
    first = "\n\nCONSTANT = 1\n\n\ndef _two(x):\n  return x\n\n\ndef _make_agent()"
    source = source.replace("\n\ndef _make_agent()", first)

    updated, _ = updated_tests(tmp_path / "blanked", source)
    monkeypatch.setattr(test_update, "region", lambda *args: None)
    whole, _ = updated_tests(tmp_path / "whole", source)

    assert updated == whole
    assert "\n  return await agent.server_client.post(" in updated  # the first block's two spaces


@pytest.mark.parametrize("blanked", [True, False])
def test_a_test_module_with_a_byte_order_mark_is_updated_and_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, blanked: bool
) -> None:
    """Read with the definitions it does not update blanked, or whole."""
    if not blanked:
        monkeypatch.setattr(test_update, "region", lambda *args: None)
    case = CASES / "tests_routing_fake"

    updated, _ = updated_tests(tmp_path, "\ufeff" + (case / "tests_before.py").read_text())

    assert updated == "\ufeff" + (case / "tests_after.py").read_text()


EVERY_BLOCK = """\
import a
from b.c import d
from . import local


def f():
    import e
    try:
        from g import h
    except ImportError:
        import i
    else:
        import j
    finally:
        import k


class T:
    def m(self):
        with x:
            if y:
                import l
            else:
                import m
        match z:
            case 1:
                import n
        for _ in ():
            import o
        while False:
            import p


async def g():
    async with q:
        import r
    return lambda: __import__("s")
"""


def test_the_modules_a_test_module_imports_are_read_from_its_statements_in_every_block() -> None:
    """Which name a test patches the agent module by: its statements are read wherever they stand,
    not the expressions in them, where no import stands."""
    found = test_update._imported_modules(ast.parse(EVERY_BLOCK))

    assert found == {"a", "b.c", "e", "g", "i", "j", "k", "l", "m", "n", "o", "p", "r"}

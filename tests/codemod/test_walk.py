"""The rewrite's searches read a tree's fields instead of letting libcst build each node again:
they meet exactly the nodes libcst's own visit meets, and each node's children as libcst lists
them (in another order)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import hypothesmith
import libcst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from selfcall_audit.migrate.walk import children, descendants

CASES = Path(__file__).parent / "cases"
# Every construct that binds a name, and the nodes whose fields libcst visits in another order
# than it declares them (decorators, `x if c else y`, keyword arguments, format specs).
EVERY_FORM = """\
from a import *
from . import b as c, d
import e.f
type Alias[T] = list[T]


@decorate(key=value)
class K[T](Base, metaclass=Meta):
    x: int = 1

    @property
    async def m(self, /, p: int = 2, *args, q, **kw) -> None:
        global g
        nonlocal_ = lambda y=1: y
        async with open(p) as (h, i):
            async for j in k:
                del j
        try:
            pass
        except* ValueError as err:
            raise
        match p:
            case [1, *rest] | {"k": v, **others} if (w := v):
                z += 1
            case Point(x=0) as pt:
                pass
        return [n for n in range(3) if n for m in n] or f"{p!r:>{width}}" if p else {**kw}
"""


def libcst_visit(module: libcst.Module) -> Counter[int]:
    """The nodes libcst's visit meets, by identity."""
    met: Counter[int] = Counter()

    class Meet(libcst.CSTVisitor):
        def on_visit(self, node: libcst.CSTNode) -> bool:
            met[id(node)] += 1
            return True

    module.visit(Meet())
    return met


def assert_walks_as_libcst(module: libcst.Module) -> None:
    assert Counter(id(node) for node in descendants(module)) == libcst_visit(module)
    for node in descendants(module):
        assert Counter(map(id, children(node))) == Counter(map(id, node.children))


@pytest.mark.parametrize(
    "source",
    [EVERY_FORM, *(path.read_text() for path in sorted(CASES.glob("*/before.py")))],
    ids=["every-form", *(path.parent.name for path in sorted(CASES.glob("*/before.py")))],
)
def test_the_walk_meets_the_nodes_libcst_meets(source: str) -> None:
    assert_walks_as_libcst(libcst.parse_module(source))


@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
@given(program=st.deferred(hypothesmith.from_grammar))
def test_the_walk_meets_the_nodes_libcst_meets_in_grammar_programs(program: str) -> None:
    try:
        module = libcst.parse_module(program)
    except (libcst.ParserSyntaxError, ValueError, RecursionError):
        return  # what libcst cannot read, the rewrite never walks
    assert_walks_as_libcst(module)

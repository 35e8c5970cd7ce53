"""The analysis' values (expression nodes, references to what a name stands for) are named tuples
that equal only values of their own type: two node types with the same fields, or a node and a
plain tuple, are never the same value, as dict keys or in a comparison of facts."""

from __future__ import annotations

import pickle

import pytest

from selfcall_audit.analysis.expr import SELF, Alt, Attr, Global, Or, SelfRef, Seq, Str, Unknown
from selfcall_audit.analysis.index import ClassRef, External, FunctionRef, ModuleRef
from selfcall_audit.analysis.values import (
    HOLE,
    PARAM,
    ConfigRef,
    FromParam,
    Marker,
    NamedServer,
    OwnName,
    Unresolved,
)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (Seq((Str("a"),)), Alt((Str("a"),))),
        (Alt((Str("a"),)), Or((Str("a"),))),
        (Global("m.py", "X"), ClassRef("m.py", "X")),
        (ModuleRef("m"), External("m")),
        (Str("a"), ("a",)),
    ],
)
def test_values_of_two_types_with_equal_fields_differ(one: object, other: object) -> None:
    assert one != other and other != one
    assert (one == other) is False and (other == one) is False
    assert len({one: 1, other: 2}) == 2


def test_equal_values_of_one_type_are_one_key() -> None:
    assert Attr(SELF, "config") == Attr(SelfRef(), "config")
    assert {FunctionRef("a.py", None, "f"): 1}[FunctionRef("a.py", None, "f")] == 1


def test_any_unknown_equals_any_other_whatever_stopped_it() -> None:
    assert Unknown("evaluation_depth") == Unknown() and hash(Unknown("evaluation_depth")) == hash(Unknown())
    assert Unknown() != Str("")


def test_the_node_without_fields_is_true_and_values_survive_pickling() -> None:
    assert bool(SELF)
    value = Attr(Seq((SELF, Unknown("helper_depth"))), "x")
    assert pickle.loads(pickle.dumps(value)) == value


def test_markers_of_one_kind_are_equal_whatever_their_label_and_no_text_equals_one() -> None:
    assert Marker(HOLE.name, "rollout_id") == HOLE and hash(
        Marker(HOLE.name, "x", "evaluation_depth")
    ) == hash(HOLE)
    assert HOLE != PARAM and HOLE != "unknown" and HOLE != ("unknown",)
    assert PARAM in ("/v1/", Marker(PARAM.name, "prefix")) and PARAM not in ("parameter",)


def test_servers_of_two_kinds_differ_and_every_one_is_true() -> None:
    assert ConfigRef("x") != NamedServer("x") and len({ConfigRef("x"), NamedServer("x")}) == 2
    assert Unresolved("evaluation_depth") == Unresolved()
    assert all([OwnName(), FromParam(), Unresolved()])

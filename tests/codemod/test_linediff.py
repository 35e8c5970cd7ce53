"""The splice's line comparison: its blocks are lines equal on both sides, in order, and the
opcodes read from them turn one side into the other, whatever the lines repeat."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from selfcall_audit.migrate.linediff import Matcher

LINES = st.lists(
    st.sampled_from(["a\n", "b\n", "\n", ")\n", "def f():\n", "x = 1\n", "y = 2\n"]), max_size=40
)


@given(LINES, LINES)
def test_the_opcodes_turn_one_side_into_the_other(a: list[str], b: list[str]) -> None:
    rebuilt = []
    for tag, i1, i2, j1, j2 in Matcher(a, b).get_opcodes():
        if tag == "equal":
            assert a[i1:i2] == b[j1:j2]
        rebuilt += b[j1:j2]

    assert rebuilt == b


def test_rewrites_spread_over_a_class_are_each_one_change() -> None:
    """Methods told apart by their `def` lines, each with a call of four lines that becomes one:
    each call is one change, every other line is matched (difflib's own matcher, past 200
    lines, leaves the last method's closing lines unmatched)."""
    method = "    async def respond_{i}(self, body):\n        payload = body\n        r = await post(\n            name,\n            payload,\n        )\n        return r\n\n"
    rewritten = "    async def respond_{i}(self, body):\n        payload = body\n        r = await helper(self, payload)\n        return r\n\n"
    old = "".join(method.format(i=i) for i in range(50)).splitlines(keepends=True)
    new = "".join(rewritten.format(i=i) for i in range(50)).splitlines(keepends=True)

    changes = [op for op in Matcher(old, new).get_opcodes() if op[0] != "equal"]

    assert changes == [("replace", 8 * i + 2, 8 * i + 6, 5 * i + 2, 5 * i + 3) for i in range(50)]

"""Reading a libcst tree without building it again.

libcst's walks (`visit`, `children`, `matchers.findall`) construct each node they pass anew, even
for a visitor that only reads: on NeMo Gym's agent modules that costs 3.2 times as much as reading
the nodes' fields (`benchmarks/walk_cost.py`). The searches of the rewrite's checks read the fields
instead. They meet the nodes in no particular order: what they find is used as a set or a count,
or placed by its line.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from functools import cache

import libcst as cst


@cache
def _fields(kind: type[cst.CSTNode]) -> tuple[str, ...]:
    """The names of a node class's fields, worked out once per class."""
    return tuple(field.name for field in fields(kind))


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes right below `node`: those libcst's `children` lists, in no particular order."""
    found: list[cst.CSTNode] = []
    for name in _fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            found.append(value)
        elif isinstance(value, (tuple, list)):
            found += [item for item in value if isinstance(item, cst.CSTNode)]
    return found


def descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every node below it, in no particular order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack += children(current)

"""Local aliases that only the rewritten calls used (`config = self.config`, `post = client.post`):
removed, since linters would flag them (pyflakes F841), unless the function may read them by
name through `locals()`, `vars()`, `eval` or `exec`."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from .imports import ident
from .locate import Plan
from .scope import binds, reads_locals
from .walk import children, descendants


def unused_aliases(
    plans: Iterable[Plan],
) -> tuple[set[cst.BaseStatement], list[tuple[cst.BaseStatement, str]]]:
    """The statements to drop, and each with the name it bound."""
    by_method: dict[cst.FunctionDef, list[Plan]] = {}
    for plan in plans:
        by_method.setdefault(plan.method, []).append(plan)
    dropped: set[cst.BaseStatement] = set()
    removed = []
    for method, method_plans in by_method.items():
        if reads_locals(method):
            continue
        gone = [node for plan in method_plans for node in plan.removed]
        candidates = {name for node in gone if (name := _root_name(node)) is not None}
        candidates |= {name for plan in method_plans for name in plan.bindings}
        candidates -= {plan.self_name for plan in method_plans}
        for name in sorted(candidates):
            if _count_uses(method, name) - sum(_count_uses(node, name) for node in gone) != 1:
                continue
            statement = _sole_binding(method, name)
            if statement is not None:
                dropped.add(statement)
                removed.append((statement, name))
    return dropped, removed


def _root_name(node: cst.CSTNode) -> str | None:
    while isinstance(node, cst.Attribute):
        node = node.value
    return ident(node.value) if isinstance(node, cst.Name) else None


def _is_plain_value(node: cst.BaseExpression) -> bool:
    """A name, an attribute chain or a string: dropping its evaluation changes nothing."""
    if isinstance(node, cst.Attribute):
        return _is_plain_value(node.value)
    return isinstance(node, (cst.Name, cst.SimpleString))


def _count_uses(node: cst.CSTNode, name: str) -> int:
    """The name's occurrences as a variable: attribute names and keywords are not uses."""
    name = ident(name)
    count = 0
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.Attribute, cst.Arg)):
            stack.append(current.value)
            continue
        count += isinstance(current, cst.Name) and ident(current.value) == name
        stack += children(current)
    return count


def _sole_binding(method: cst.FunctionDef, name: str) -> cst.SimpleStatementLine | None:
    """The statement `name = <plain value>` in the method, when removing it leaves a valid block."""
    for block in descendants(method):
        if not isinstance(block, cst.IndentedBlock):
            continue
        body = block.body
        for index, statement in enumerate(body):
            if not (
                isinstance(statement, cst.SimpleStatementLine)
                and len(statement.body) == 1
                and isinstance(assign := statement.body[0], cst.Assign)
                and len(assign.targets) == 1
                and binds(assign.targets[0].target, name)
            ):
                continue
            if not _is_plain_value(assign.value) or len(body) == 1:
                return None
            if index == len(body) - 1 and any(line.comment for line in statement.leading_lines):
                return None  # the comment above it would have no statement to stay with
            return statement
    return None

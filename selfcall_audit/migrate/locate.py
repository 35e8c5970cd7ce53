"""Finding a reported call in the syntax tree, and reading what it is from the tree itself.

The analysis reports where a call starts and ends; the codemod finds the Call node there and
checks that it is the call the analysis described (or, without a description, describes it
from the tree with the same rules), so that nothing is rewritten on a position alone.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst
from libcst.metadata import CodePosition, CodeRange

from ..analysis import policy
from ..analysis.calls import ROUTING_KWARGS
from ..ftypes import CallArgument, CallDescription, CallReceiver, Finding
from .imports import dotted_name, ident
from .scope import enclosing_method

if TYPE_CHECKING:
    from ..ftypes import CallContext, ReceiverKind


_BLANK = cst.Module(body=())  # renders a node in the default layout


class LocateError(Exception):
    """A located call is missing from its own syntax tree: a bug."""


@dataclass(frozen=True)
class Plan:
    """How one call is rewritten: the callee's new name, `self`, and the arguments' fate."""

    callee: str
    self_name: str
    drop: frozenset[int]  # argument indexes removed (server_name, method)
    # arguments spelled with another keyword: a positional url path becomes `url_path=`, and an
    # argument of a forwarding helper takes the client's name for it (`payload=` becomes `json=`)
    keywords: tuple[tuple[int, str], ...]
    method: cst.FunctionDef
    removed: tuple[cst.CSTNode, ...]  # the expressions that disappear with the rewrite
    bindings: frozenset[str]  # local names the analysis says the removed parts read
    ancestors: tuple[cst.CSTNode, ...]


@dataclass(frozen=True)
class Site:
    """A reported call in the tree, with the path from the module down to it."""

    call: cst.Call
    ancestors: tuple[cst.CSTNode, ...]  # outermost first; the call's parent last


def locate(
    paths: Paths, findings: Sequence[Finding], code: str, source_lines: Sequence[bytes]
) -> dict[Finding, Site]:
    """The Call node each finding points at, in the module whose text libcst prints as `code`. A
    column may be counted in characters or, for a file in another encoding than UTF-8, as the
    analysis counts it from the UTF-8 byte offset."""
    positions = paths.positions
    by_lines: dict[tuple[int, int], list[cst.Call]] = {}
    for node, where in positions.items():
        if isinstance(node, cst.Call):
            by_lines.setdefault((where.start.line, where.end.line), []).append(node)
    lines = re.split(r"\r\n|\r|\n", code)  # as Python counts lines: not at form feeds
    sites = {}
    for finding in findings:
        wanted = (finding.column - 1, finding.end_column - 1)
        candidates = by_lines.get((finding.line, finding.end_line), [])
        for columns in (_char_columns, _analysis_columns):
            found = [call for call in candidates if columns(positions[call], lines, source_lines) == wanted]
            if len(found) == 1:
                sites[finding] = Site(found[0], paths.to(found[0]))
                break
    return sites


def _char_columns(where: CodeRange, lines: Sequence[str], raw: Sequence[bytes]) -> tuple[int, int]:
    return where.start.column, where.end.column


def _analysis_columns(where: CodeRange, lines: Sequence[str], raw: Sequence[bytes]) -> tuple[int, int]:
    """ast's UTF-8 byte offset, cut from the file's own bytes and decoded as UTF-8."""

    def column(position: CodePosition) -> int:
        if not 0 < position.line <= min(len(lines), len(raw)):
            return -1
        offset = len(lines[position.line - 1][: position.column].encode("utf-8", "surrogatepass"))
        prefix = raw[position.line - 1][:offset]
        return offset if prefix.isascii() else len(prefix.decode("utf-8", "replace"))

    return column(where.start), column(where.end)


def _point(position: CodePosition) -> tuple[int, int]:
    return position.line, position.column


class Paths:
    """Paths from the module down to its nodes, found by position rather than by a full walk (a
    decorator lies outside its function's range: there, the children are searched). Each node's
    children are listed once, however many paths pass it (a class's 800 methods)."""

    def __init__(self, module: cst.Module, positions: Mapping[cst.CSTNode, CodeRange]):
        self.module = module
        self.positions = positions
        self._children: dict[cst.CSTNode, _Children] = {}

    def to(self, target: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
        """The path from the module down to `target`'s parent, outermost first."""
        start, end = _point(self.positions[target].start), _point(self.positions[target].end)
        path: list[cst.CSTNode] = []
        node: cst.CSTNode = self.module
        while node is not target:
            path.append(node)
            if node not in self._children:
                self._children[node] = _Children(node.children, self.positions)
            found = self._children[node].holding(target, start, end)
            if found is None:
                rest = _path_to(node, target)
                if rest is None:
                    raise LocateError("a located node is missing from its own syntax tree")
                return (*path, *rest[1:])
            node = found
        return tuple(path)


class _Children:
    """A node's children, with where each starts: the one holding a range is found by halving
    (a class's 800 methods are listed once, not read whole for each of its calls)."""

    def __init__(self, nodes: Sequence[cst.CSTNode], positions: Mapping[cst.CSTNode, CodeRange]):
        self.nodes = nodes
        self.positions = positions
        self.placed = [(i, positions[n]) for i, n in enumerate(nodes) if n in positions]
        self.starts = [_point(where.start) for _, where in self.placed]

    def holding(
        self, target: cst.CSTNode, start: tuple[int, int], end: tuple[int, int]
    ) -> cst.CSTNode | None:
        """The first child that is `target` or whose range holds `start` to `end`."""
        # children do not overlap: one holding the range is the last to start at or before it
        index = bisect.bisect_right(self.starts, start) - 1
        if index >= 0:
            at, where = self.placed[index]
            if end <= _point(where.end):
                return self.nodes[at]
        for child in self.nodes:  # none does (a decorator's call): as before, child by child
            where = self.positions.get(child)
            if child is target or (
                where is not None and _point(where.start) <= start and end <= _point(where.end)
            ):
                return child
        return None


def _path_to(node: cst.CSTNode, target: cst.CSTNode) -> list[cst.CSTNode] | None:
    """`node` and its descendants down to `target`'s parent, by a walk (no recursion)."""
    stack: list[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]] = [(node, ())]
    while stack:
        current, above = stack.pop()
        for child in current.children:
            if child is target:
                return [*above, current]
            stack.append((child, (*above, current)))
    return None


def describe(site: Site) -> CallDescription:
    """The call as the tree shows it, in the terms the analysis uses."""
    call = site.call
    _, self_name, _ = enclosing_method(site.ancestors)
    kind: ReceiverKind
    match call.func:
        case cst.Attribute(value=value, attr=attr):
            client_method = attr.value
            on_self = isinstance(value, cst.Attribute) and _is_name(value.value, self_name)
            kind = "self_attribute" if on_self else "alias"
        case cst.Name():
            client_method = _bound_method(site, call.func.value)
            kind = "bound_method"
        case _:
            client_method, kind = "", "alias"
    arguments = []
    positional = 0
    for index, arg in enumerate(call.args):
        keyword = arg.keyword.value if arg.keyword is not None else None
        if arg.star:
            arguments.append(CallArgument(index, "other", None, arg.star))
            continue
        role = policy.role_of(client_method, positional, keyword)
        arguments.append(
            CallArgument(index, role, keyword, text=_text(arg.value) if role in ROUTING_KWARGS else "")
        )
        positional += keyword is None
    return CallDescription(
        receiver=CallReceiver(kind, client_method, dotted_name(call.func) or ""),
        arguments=tuple(arguments),
        self_name=self_name,
        context=_context(site),
    )


def _text(node: cst.BaseExpression) -> str:
    """The expression as Python reads it: what the analysis recorded of it (`ast.unparse`)."""
    code = _BLANK.code_for_node(node)
    try:
        return ast.unparse(ast.parse(f"(\n{code}\n)", mode="eval").body)
    except SyntaxError:  # a form libcst reads and ast does not: it matches no recorded text
        return code


def _is_name(node: cst.CSTNode, name: str | None) -> bool:
    return isinstance(node, cst.Name) and ident(node.value) == name


def _bound_method(site: Site, name: str) -> str:
    """`post` for a callee bound by `name = <client>.post` in the enclosing function; "" if unknown."""
    for node in reversed(site.ancestors):
        if not isinstance(node, cst.FunctionDef):
            continue
        for statement in node.body.body:
            match statement:
                case cst.SimpleStatementLine(
                    body=[cst.Assign(targets=[cst.AssignTarget(target=cst.Name(value=target))], value=value)]
                ) if target == name and isinstance(value, cst.Attribute):
                    return value.attr.value
        return ""
    return ""


def _context(site: Site) -> CallContext:
    """Where the call is evaluated: a default value or a decorator runs once, at definition."""
    path = (*site.ancestors, site.call)
    for index, node in enumerate(path[:-1]):
        child = path[index + 1]
        if isinstance(node, cst.Decorator):
            return "decorator"
        if isinstance(node, cst.Param) and child is not node.name:
            return "default"
    parent = site.ancestors[-1]
    outer = site.ancestors[-2] if len(site.ancestors) > 1 else None
    if isinstance(parent, cst.WithItem) or (
        isinstance(parent, cst.Await) and isinstance(outer, cst.WithItem)
    ):
        return "with"
    return "expression"


def mismatch(described: CallDescription, seen: CallDescription) -> bool:
    """Is the call in the tree another one than the analysis described (the file moved on)? Its
    arguments, its receiver and what its server name, path and method say must be the same."""
    shape = [(a.index, a.keyword, a.star) for a in described.arguments]
    if shape != [(a.index, a.keyword, a.star) for a in seen.arguments]:
        return True
    if any(a.text and a.text != b.text for a, b in zip(described.arguments, seen.arguments, strict=True)):
        return True
    return described.receiver.kind != "helper" and described.receiver.text not in ("", seen.receiver.text)

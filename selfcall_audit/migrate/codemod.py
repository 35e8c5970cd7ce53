"""The `fix` codemod: rewrite fixable SCA001 self-calls to the shared in-process helper.

Only the call expression changes (its callee and its arguments) and the helper's import is
added once, so the code around the call keeps working and every other byte stays as it was.
Each call is located by the analysis' position, checked again on the syntax tree, and left
alone with a reason where the rewrite could change behaviour. A file is written atomically,
only when its new text parses and its bytes on disk are still the ones that were analysed.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import io
import keyword
import os
import stat
import sys
import tempfile
import tokenize
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst
import libcst.matchers as m
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from ..analysis.project import Progress, Project, Report
from ..config import Settings
from ..ftypes import Finding

DEFAULT_HELPER = "selfcall_audit.inprocess:responses_in_process"
# Positional parameters of the server client's methods, as the analysis reads them.
_SIGNATURES = {"post": ("server_name", "url_path"), "request": ("server_name", "url_path", "method")}
_HELPER_KEYWORDS = frozenset({"url_path", "json", "cookies", "headers"})
_DROPPED = frozenset({"server_name", "method"})
_FUTURE, _STDLIB, _THIRD_PARTY, _FIRST_PARTY, _LOCAL = range(5)


class CodemodError(Exception):
    """The codemod produced text that does not parse: a bug; the file is left as it was."""


@dataclass(frozen=True)
class Helper:
    """The function a self-call is rewritten to, as `MODULE:NAME`."""

    module: str
    name: str

    @classmethod
    def parse(cls, spec: str) -> Helper:
        module, sep, name = spec.strip().partition(":")
        if not sep or not _is_dotted(module) or not _is_dotted(name) or "." in name:
            raise ValueError(f"the helper must be given as MODULE:NAME (like {DEFAULT_HELPER}), not {spec!r}")
        return cls(module, name)


def _is_dotted(text: str) -> bool:
    return bool(text) and all(part.isidentifier() and not keyword.iskeyword(part) for part in text.split("."))


@dataclass(frozen=True)
class Outcome:
    """One SCA001 finding after the codemod looked at it: rewritten when `reason` is None."""

    finding: Finding
    reason: str | None = None


# --------------------------------------------------------------------------------------------
# Rewriting one file
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Site:
    call: cst.Call
    ancestors: tuple[cst.CSTNode, ...]  # outermost first; the call's parent last


def _locate(
    module: cst.Module,
    positions: Mapping[cst.CSTNode, CodeRange],
    wanted: dict[tuple[int, int], tuple[int, int]],
) -> dict[tuple[int, int], _Site]:
    """The Call nodes that start and end where the findings say, with their ancestors."""
    sites = {}
    for node, where in positions.items():
        if isinstance(node, cst.Call):
            start = (where.start.line, where.start.column)
            if wanted.get(start) == (where.end.line, where.end.column):
                sites[start] = _Site(node, _ancestors(module, node, positions))
    return sites


def _point(position: CodePosition) -> tuple[int, int]:
    return position.line, position.column


def _ancestors(module: cst.Module, target: cst.CSTNode, positions: Mapping[cst.CSTNode, CodeRange]) -> tuple:
    """The path from the module down to `target`, found by position rather than by a full walk."""
    start, end = _point(positions[target].start), _point(positions[target].end)
    path: list[cst.CSTNode] = []
    node: cst.CSTNode = module
    while node is not target:
        path.append(node)
        for child in node.children:
            where = positions.get(child)
            if child is target or (
                where is not None and _point(where.start) <= start and end <= _point(where.end)
            ):
                node = child
                break
        else:
            raise CodemodError("a located call is missing from its own syntax tree")
    return tuple(path)


@dataclass(frozen=True)
class _Plan:
    """How one call is rewritten: the callee's new name, `self`, and the arguments' fate."""

    callee: str
    self_name: str
    drop: frozenset[int]  # argument indexes removed (server_name, method)
    to_keyword: frozenset[int]  # positional url_path, which becomes `url_path=`
    method: cst.FunctionDef
    removed: tuple[cst.CSTNode, ...]  # the expressions that disappear with the rewrite
    ancestors: tuple[cst.CSTNode, ...]


class _Rewriter:
    """The rewrite of one module: checks each call, then transforms the tree once."""

    def __init__(self, module: cst.Module, helper: Helper, first_party: Callable[[str], bool]):
        self.module = module
        self.helper = helper
        self.first_party = first_party
        self.positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        self.imported_as = _imported_name(module, helper)
        self.callee = self.imported_as or helper.name
        self.module_clash = None if self.imported_as else _module_binding(module, helper, self.callee)

    def run(self, findings: Sequence[Finding]) -> tuple[cst.Module, list[Outcome], list[tuple[int, str]]]:
        wanted = {(f.line, f.column - 1): (f.end_line, f.end_column - 1) for f in findings}
        sites = _locate(self.module, self.positions, wanted)
        plans: dict[cst.Call, _Plan] = {}
        outcomes = []
        for finding in findings:
            site = sites.get((finding.line, finding.column - 1))
            if site is None:
                outcomes.append(Outcome(finding, "the call is not where the analysis found it"))
                continue
            plan = self.plan(site)
            if isinstance(plan, str):
                outcomes.append(Outcome(finding, plan))
            else:
                plans[site.call] = plan
                outcomes.append(Outcome(finding))
        if not plans:
            return self.module, outcomes, []
        dropped, removed_aliases = self.unused_aliases(plans.values())
        spine = {node for plan in plans.values() for node in plan.ancestors}
        module = self.module.visit(_Apply(plans, dropped, spine))
        if self.imported_as is None:
            module = _add_import(module, self.helper, self.first_party)
        return module, outcomes, removed_aliases

    def plan(self, site: _Site) -> _Plan | str:
        call = site.call
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _SIGNATURES:
            signature = _SIGNATURES[func.attr.value]
        elif isinstance(func, cst.Name):  # a bound method kept in a local: `post = client.post`
            signature = ()
        else:
            return "the call is not a `.post(...)` or `.request(...)` of the server client"
        parent = site.ancestors[-1]
        outer = site.ancestors[-2] if len(site.ancestors) > 1 else None
        if isinstance(parent, cst.WithItem) or (
            isinstance(parent, cst.Await) and isinstance(outer, cst.WithItem)
        ):
            return "the response is used as an async context manager"

        names: dict[str, int] = {}
        for index, arg in enumerate(call.args):
            if arg.star:
                return f"arguments come from a `{arg.star}` expansion it cannot see through"
            if arg.keyword is None:
                if index >= len(signature):
                    return "it passes positional arguments the in-process helper does not take"
                name = signature[index]
            else:
                name = arg.keyword.value
            if name not in _HELPER_KEYWORDS | _DROPPED or (
                name == "method" and signature == _SIGNATURES["post"]
            ):
                return f"the in-process helper takes no `{name}` argument"
            names[name] = index
        if "server_name" not in names or "url_path" not in names:
            return "it does not name both the server and the url path"

        method, self_name = _enclosing_method(site.ancestors)
        if method is None or self_name is None:
            return "the call is not inside a method that has `self`"
        clash = self.module_clash or next(iter(_bindings(method, self.callee)), None)
        if clash is not None:
            line = self.positions[clash].start.line
            return (
                f"`{self.callee}` already names something else here (line {line}); "
                "choose the helper's name with --helper MODULE:NAME"
            )
        streamed = _streamed_response(site, method)
        if streamed:
            return f"the response body is streamed (`{streamed}`); the in-process helper buffers it"

        removed: list[cst.CSTNode] = [call.args[names["server_name"]].value]
        if "method" in names:
            removed.append(call.args[names["method"]].value)
        if not (isinstance(func, cst.Attribute) and _is_self(func.value, self_name)):
            removed.append(func)
        url_index = names["url_path"]
        return _Plan(
            callee=self.callee,
            self_name=self_name,
            drop=frozenset(names[n] for n in _DROPPED if n in names),
            to_keyword=frozenset({url_index} if call.args[url_index].keyword is None else ()),
            method=method,
            removed=tuple(removed),
            ancestors=site.ancestors,
        )

    def unused_aliases(self, plans: Iterable[_Plan]) -> tuple[set[cst.BaseStatement], list[tuple[int, str]]]:
        """Local aliases (`config = self.config`, `me = ...`) that only the rewritten calls used."""
        by_method: dict[cst.FunctionDef, list[_Plan]] = {}
        for plan in plans:
            by_method.setdefault(plan.method, []).append(plan)
        dropped: set[cst.BaseStatement] = set()
        removed_aliases = []
        for method, method_plans in by_method.items():
            removed = [node for plan in method_plans for node in plan.removed]
            candidates = {name for node in removed if (name := _root_name(node)) is not None}
            candidates -= {plan.self_name for plan in method_plans}
            for name in sorted(candidates):
                uses = _count_uses(method, name)
                gone = sum(_count_uses(node, name) for node in removed)
                if uses - gone != 1:
                    continue
                statement = _sole_binding(method, name)
                if statement is not None:
                    dropped.add(statement)
                    removed_aliases.append((self.positions[statement].start.line, name))
        return dropped, sorted(removed_aliases)


class _Apply(cst.CSTTransformer):
    """Rewrites the planned calls and drops the unused aliases, entering only the nodes around them."""

    def __init__(
        self, plans: dict[cst.Call, _Plan], dropped: set[cst.BaseStatement], spine: set[cst.CSTNode]
    ):
        super().__init__()
        self.plans = plans
        self.dropped = dropped
        self.spine = spine
        self.methods = {plan.method for plan in plans.values()}
        self._in_method = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node in self.methods:
            self._in_method += 1
        return (self._in_method > 0 or node in self.spine) and super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        if original_node in self.methods:
            self._in_method -= 1
        return super().on_leave(original_node, updated_node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        plan = self.plans.get(original_node)
        return updated_node if plan is None else _rewritten_call(updated_node, plan)

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        if not any(statement in self.dropped for statement in original_node.body):
            return updated_node
        body: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []
        for original, updated in zip(original_node.body, updated_node.body, strict=True):
            if original in self.dropped:
                carried.extend(updated.leading_lines)  # type: ignore[attr-defined]
                continue
            if carried:
                updated = updated.with_changes(leading_lines=[*carried, *updated.leading_lines])
                carried = []
            body.append(updated)
        return updated_node.with_changes(body=body)


def _rewritten_call(call: cst.Call, plan: _Plan) -> cst.Call:
    args = list(call.args)
    self_arg = cst.Arg(value=cst.Name(plan.self_name))
    kept: list[cst.Arg] = []
    placed = False
    for index, arg in enumerate(args):
        if index in plan.drop:
            if index == 0:  # server_name first, as usual: `self` takes its place and its layout
                kept.append(
                    self_arg.with_changes(comma=arg.comma, whitespace_after_arg=arg.whitespace_after_arg)
                )
                placed = True
            continue
        if index in plan.to_keyword:
            arg = arg.with_changes(
                keyword=cst.Name("url_path"),
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
                ),
            )
        kept.append(arg)
    if len(args) - 1 in plan.drop:
        kept[-1] = kept[-1].with_changes(comma=args[-1].comma)  # the last argument keeps the old ending
    if not placed:
        first_comma = args[0].comma
        comma = (
            first_comma
            if isinstance(first_comma, cst.Comma)
            else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        )
        kept.insert(0, self_arg.with_changes(comma=comma))
    return call.with_changes(func=cst.Name(plan.callee), args=kept)


def _enclosing_method(ancestors: Sequence[cst.CSTNode]) -> tuple[cst.FunctionDef | None, str | None]:
    """The innermost method around the call and its `self`, unless a closure in between rebinds it."""
    for index in range(len(ancestors) - 1, 1, -1):
        node = ancestors[index]
        if isinstance(node, cst.FunctionDef) and isinstance(ancestors[index - 2], cst.ClassDef):
            decorators = {_dotted_name(d.decorator) for d in node.decorators}
            params = [*node.params.posonly_params, *node.params.params]
            if decorators & {"staticmethod", "classmethod"} or not params:
                return node, None
            self_name = params[0].name.value
            for inner in ancestors[index + 1 :]:
                if isinstance(inner, (cst.FunctionDef, cst.Lambda)) and self_name in _param_names(
                    inner.params
                ):
                    return node, None
            return node, self_name
    return None, None


def _param_names(params: cst.Parameters) -> set[str]:
    names = {p.name.value for p in [*params.posonly_params, *params.params, *params.kwonly_params]}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return names


def _dotted_name(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def _is_self(node: cst.BaseExpression, self_name: str) -> bool:
    """`self.server_client` (the common receiver), as opposed to a local alias of it."""
    return (
        isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == self_name
    )


def _root_name(node: cst.CSTNode) -> str | None:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def _is_plain_value(node: cst.BaseExpression) -> bool:
    """A name, an attribute chain or a string: dropping its evaluation changes nothing."""
    if isinstance(node, cst.Attribute):
        return _is_plain_value(node.value)
    return isinstance(node, (cst.Name, cst.SimpleString))


class _Uses(cst.CSTVisitor):
    """Counts a name's occurrences as a variable: attribute names and keywords are not uses."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name
        self.count = 0

    def visit_Name(self, node: cst.Name) -> None:
        self.count += node.value == self.name

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False


def _count_uses(node: cst.CSTNode, name: str) -> int:
    uses = _Uses(name)
    node.visit(uses)
    return uses.count


def _sole_binding(method: cst.FunctionDef, name: str) -> cst.SimpleStatementLine | None:
    """The statement `name = <plain value>` in the method, when removing it leaves a valid block."""
    for block in m.findall(method, m.IndentedBlock()):
        body = block.body  # type: ignore[attr-defined]
        for index, statement in enumerate(body):
            if not (
                isinstance(statement, cst.SimpleStatementLine)
                and len(statement.body) == 1
                and isinstance(assign := statement.body[0], cst.Assign)
                and len(assign.targets) == 1
                and m.matches(assign.targets[0].target, m.Name(name))
            ):
                continue
            if not _is_plain_value(assign.value) or len(body) == 1:
                return None
            if index == len(body) - 1 and any(line.comment for line in statement.leading_lines):
                return None  # the comment above it would have no statement to stay with
            return statement
    return None


def _bindings(node: cst.CSTNode, name: str) -> list[cst.CSTNode]:
    """The places in `node` that bind `name`: parameters, targets, `as` names, imports, defs, classes."""
    target = m.Name(name)
    binder = (
        m.Param(name=target)
        | m.AssignTarget(target=target)
        | m.AnnAssign(target=target)
        | m.AugAssign(target=target)
        | m.NamedExpr(target=target)
        | m.For(target=target)
        | m.CompFor(target=target)
        | m.AsName(name=target)
        | m.Element(value=target)
        | m.StarredElement(value=target)
        | m.ImportAlias(name=target, asname=None)
        | m.FunctionDef(name=target)
        | m.ClassDef(name=target)
    )
    return m.findall(node, binder)


def _module_binding(module: cst.Module, helper: Helper, name: str) -> cst.CSTNode | None:
    """A module-level binding of `name` other than the helper's own import."""
    for statement in module.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            if statement.name.value == name:
                return statement
        elif not (
            _is_import_line(statement)
            and all(
                isinstance(s, cst.ImportFrom) and _module_name(s) == helper.module for s in statement.body
            )
        ):
            found = _bindings(statement, name)
            if found:
                return found[0]
    return None


def _streamed_response(site: _Site, method: cst.FunctionDef) -> str | None:
    """`r.content.iter_chunked(...)` and the like on the response bound by `r = await <call>`."""
    ancestors = site.ancestors
    parent = ancestors[-1]
    holder = ancestors[-2] if isinstance(parent, cst.Await) and len(ancestors) > 1 else parent
    if isinstance(holder, cst.Assign) and len(holder.targets) == 1:
        target = holder.targets[0].target
    elif isinstance(holder, cst.AnnAssign):
        target = holder.target
    else:
        return None
    if not isinstance(target, cst.Name):
        return None
    content = m.Attribute(value=m.Name(target.value), attr=m.Name("content"))
    reads = len(m.findall(method, m.Attribute(value=content, attr=m.Name("read"))))
    if len(m.findall(method, content)) > reads:
        return f"{target.value}.content"
    return None


# --------------------------------------------------------------------------------------------
# The import
# --------------------------------------------------------------------------------------------


def _module_name(node: cst.ImportFrom) -> str | None:
    if node.relative or node.module is None:
        return None
    return _dotted_name(node.module)


def _imported_name(module: cst.Module, helper: Helper) -> str | None:
    """The local name of a top-level `from <helper module> import <helper name> [as x]`, if any."""
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.ImportFrom) and _module_name(small) == helper.module:
                    for alias in small.names if not isinstance(small.names, cst.ImportStar) else ():
                        if _dotted_name(alias.name) == helper.name:
                            return alias.evaluated_alias or helper.name
    return None


def _is_import_line(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
    )


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _section(module_name: str, relative: bool, first_party: Callable[[str], bool]) -> int:
    """isort's sections, as ruff's defaults classify them."""
    top = module_name.split(".")[0]
    if relative:
        return _LOCAL
    if top == "__future__":
        return _FUTURE
    if top in sys.stdlib_module_names:
        return _STDLIB
    return _FIRST_PARTY if first_party(top) else _THIRD_PARTY


def _sort_key(statement: cst.SimpleStatementLine, first_party: Callable[[str], bool]) -> tuple[int, int, str]:
    small = statement.body[0]
    if isinstance(small, cst.Import):
        name = _dotted_name(small.names[0].name) or ""
        return _section(name, False, first_party), 0, name.lower()
    assert isinstance(small, cst.ImportFrom)
    name = _dotted_name(small.module) if small.module is not None else ""
    return _section(name or "", bool(small.relative), first_party), 1, (name or "").lower()


def _blank_prefix(lines: Sequence[cst.EmptyLine]) -> int:
    count = 0
    for line in lines:
        if line.comment is not None:
            break
        count += 1
    return count


def _add_import(module: cst.Module, helper: Helper, first_party: Callable[[str], bool]) -> cst.Module:
    """Merge the helper into an import of its module, or add the line where isort would put it."""
    body = list(module.body)
    for index, statement in enumerate(body):
        if not _is_import_line(statement):
            continue
        for position, small in enumerate(statement.body):  # type: ignore[attr-defined]
            if (
                isinstance(small, cst.ImportFrom)
                and _module_name(small) == helper.module
                and not isinstance(small.names, cst.ImportStar)
            ):
                smalls = list(statement.body)  # type: ignore[attr-defined]
                smalls[position] = _with_name(small, helper.name)
                body[index] = statement.with_changes(body=smalls)
                return module.with_changes(body=body)

    line = cst.SimpleStatementLine(
        body=[
            cst.ImportFrom(
                module=cst.parse_expression(helper.module),  # type: ignore[arg-type]
                names=[cst.ImportAlias(name=cst.Name(helper.name))],
            )
        ]
    )
    imports = [i for i, s in enumerate(body) if _is_import_line(s)]
    if not imports:
        at = 1 if body and _is_docstring(body[0]) else 0
        if at:
            line = line.with_changes(leading_lines=[cst.EmptyLine()])
        if at < len(body):
            following = body[at]
            wanted = 2 if isinstance(following, (cst.FunctionDef, cst.ClassDef)) else 1
            missing = wanted - _blank_prefix(following.leading_lines)
            if missing > 0:
                body[at] = following.with_changes(
                    leading_lines=[*(cst.EmptyLine() for _ in range(missing)), *following.leading_lines]
                )
        body.insert(at, line)
        return module.with_changes(body=body)

    run = []
    for index in range(imports[0], len(body)):
        if not _is_import_line(body[index]):
            break
        run.append(index)
    ours = (_section(helper.module, False, first_party), 1, helper.module.lower())
    keys = {i: _sort_key(body[i], first_party) for i in run}  # type: ignore[arg-type]
    same = [i for i in run if keys[i][0] == ours[0]]
    if same:
        later = [i for i in same if keys[i] > ours]
        if later:
            return module.with_changes(body=_insert_before(body, later[0], line))
        body.insert(same[-1] + 1, line)
        return module.with_changes(body=body)
    earlier = [i for i in run if keys[i][0] < ours[0]]
    if earlier:
        body.insert(earlier[-1] + 1, line.with_changes(leading_lines=[cst.EmptyLine()]))
        return module.with_changes(body=body)
    body = _insert_before(body, run[0], line)
    following = body[run[0] + 1]
    if _blank_prefix(following.leading_lines) == 0:
        body[run[0] + 1] = following.with_changes(leading_lines=[cst.EmptyLine(), *following.leading_lines])
    return module.with_changes(body=body)


def _insert_before(
    body: list[cst.BaseStatement], index: int, line: cst.SimpleStatementLine
) -> list[cst.BaseStatement]:
    """The new line takes over the blank lines above `body[index]`; its comments stay with it."""
    following = body[index]
    blank = _blank_prefix(following.leading_lines)
    line = line.with_changes(leading_lines=following.leading_lines[:blank])
    body[index] = following.with_changes(leading_lines=following.leading_lines[blank:])
    return [*body[:index], line, *body[index:]]


def _member_key(name: str) -> tuple[int, str]:
    """ruff's order-by-type: CONSTANTS, then Classes, then everything else."""
    if name.isupper() and len(name) > 1:
        return 0, name
    return (1, name) if name[:1].isupper() else (2, name.lower())


def _with_name(node: cst.ImportFrom, name: str) -> cst.ImportFrom:
    names = list(node.names)  # type: ignore[arg-type]
    keys = [_member_key(_dotted_name(alias.name) or "") for alias in names]
    at = len(names)
    if keys == sorted(keys):
        at = next((i for i, key in enumerate(keys) if key > _member_key(name)), len(names))
    single_space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    alias = cst.ImportAlias(name=cst.Name(name))
    if at < len(names):
        neighbour = names[at - 1] if at else names[at]
        comma = neighbour.comma if isinstance(neighbour.comma, cst.Comma) else single_space
        names.insert(at, alias.with_changes(comma=comma))
        return node.with_changes(names=names)
    last = names[-1]
    if isinstance(last.comma, cst.Comma):  # a trailing comma: the new name ends the same way
        if len(names) > 1:
            between = names[-2].comma
        elif node.lpar is not None:
            between = cst.Comma(whitespace_after=node.lpar.whitespace_after)
        else:
            between = single_space
        names[-1] = last.with_changes(comma=between)
        names.append(alias.with_changes(comma=last.comma))
    else:
        names[-1] = last.with_changes(comma=single_space)
        names.append(alias)
    return node.with_changes(names=names)


def rewrite_source(
    source: bytes,
    findings: Sequence[Finding],
    helper: Helper,
    first_party: Callable[[str], bool] = lambda name: False,
) -> tuple[bytes, list[Outcome], list[tuple[int, str]]]:
    """The file's new bytes, what became of each fixable finding, and the (line, name) of each
    local alias removed because only the rewritten calls used it.

    Raises CodemodError when the result does not parse, which would be a bug in the codemod.
    """
    try:
        module = cst.parse_module(source)
    except (cst.ParserSyntaxError, UnicodeDecodeError, LookupError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return source, [Outcome(f, f"libcst cannot parse the file: {detail}") for f in findings], []
    new_module, outcomes, removed_aliases = _Rewriter(module, helper, first_party).run(findings)
    if new_module is module:
        return source, outcomes, removed_aliases
    result = new_module.bytes
    try:
        with warnings.catch_warnings():  # the user's own invalid escapes are not ours to report
            warnings.simplefilter("ignore", SyntaxWarning)
            ast.parse(result)
        cst.parse_module(result)
    except (SyntaxError, ValueError, cst.ParserSyntaxError) as exc:
        raise CodemodError(f"the rewritten file would not parse ({exc}); it was left as it was") from exc
    return result, outcomes, removed_aliases


# --------------------------------------------------------------------------------------------
# A whole project
# --------------------------------------------------------------------------------------------


@dataclass
class FileFix:
    """One file with SCA001 findings: its bytes as analysed and after the rewrite."""

    path: str
    before: bytes
    after: bytes
    outcomes: list[Outcome]
    removed_aliases: list[tuple[int, str]] = field(default_factory=list)
    write_error: str | None = None  # why the new bytes were not written

    @property
    def changed(self) -> bool:
        return self.after != self.before

    @property
    def rewritten(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.reason is None] if self.changed else []

    def diff(self) -> str:
        encoding = tokenize.detect_encoding(io.BytesIO(self.before).readline)[0]
        old = self.before.decode(encoding, "replace").splitlines(keepends=True)
        new = self.after.decode(encoding, "replace").splitlines(keepends=True)
        lines = difflib.unified_diff(old, new, f"a/{self.path}", f"b/{self.path}")
        return "".join(
            line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n" for line in lines
        )


@dataclass
class FixPlan:
    """The analysis and the rewrite of every file it found self-calls in, before anything is written."""

    root: Path
    report: Report
    files: list[FileFix]
    errors: list[str] = field(default_factory=list)  # internal or I/O errors: exit status 2

    @property
    def rewritten(self) -> list[tuple[FileFix, Outcome]]:
        return [(f, o) for f in self.files if f.write_error is None for o in f.rewritten]

    @property
    def not_fixed(self) -> list[tuple[Finding, str]]:
        """Self-calls the codemod leaves in place, each with the reason."""
        result = []
        seen = {
            (o.finding.path, o.finding.line, o.finding.column) for file in self.files for o in file.outcomes
        }
        for file in self.files:
            for outcome in file.outcomes:
                if outcome.reason is not None:
                    result.append((outcome.finding, outcome.reason))
                elif file.write_error is not None:
                    result.append((outcome.finding, file.write_error))
        for finding in self.report.findings:
            if (finding.path, finding.line, finding.column) not in seen:
                result.append((finding, f"{finding.message}; {finding.code} is not rewritten automatically"))
        return sorted(result, key=lambda item: item[0].sort_key)

    def write(self) -> None:
        """Write every changed file; a refusal or an I/O error is kept as the file's `write_error`."""
        for file in self.files:
            if not file.changed:
                continue
            try:
                _write_checked(self.root, file)
            except _Refused as exc:
                file.write_error = str(exc)
            except OSError as exc:
                file.write_error = f"cannot write the file: {exc.strerror or exc}"
                self.errors.append(f"{file.path}: {file.write_error}")


class _Refused(Exception):
    pass


def _blocker(finding: Finding, helper: Helper) -> str:
    reason = finding.fix_blocker or "it cannot be rewritten safely"
    if "through the helper" in reason:  # an agent method that forwards its arguments to the client
        reason += f"; rewrite this call by hand to call `{helper.name}(self, url_path=..., ...)` directly"
    return reason


def plan_fix(
    root: Path, settings: Settings, paths: Iterable[Path], helper: Helper, progress: Progress | None = None
) -> FixPlan:
    """Analyse the project and compute the new text of every file with fixable self-calls."""
    project = Project(root, settings, progress=progress)
    report = project.analyze(paths)
    by_path: dict[str, dict[tuple[int, int], Finding]] = {}
    for finding in report.findings:
        if finding.code == "SCA001":
            by_path.setdefault(finding.path, {}).setdefault((finding.line, finding.column), finding)

    def first_party(name: str) -> bool:
        return any((base / name).is_dir() or (base / f"{name}.py").is_file() for base in (root, root / "src"))

    plan = FixPlan(root, report, [])
    for path, sites in sorted(by_path.items()):
        findings = list(sites.values())
        source = project.read(path)
        if source is None:
            outcomes = [Outcome(f, "the file could not be read again") for f in findings]
            plan.files.append(FileFix(path, b"", b"", outcomes))
            continue
        outcomes = [Outcome(f, _blocker(f, helper)) for f in findings if not f.fixable]
        fixable = [f for f in findings if f.fixable]
        after, removed_aliases = source, []
        try:
            if fixable:
                after, done, removed_aliases = rewrite_source(source, fixable, helper, first_party)
                outcomes += done
        except CodemodError as exc:
            plan.errors.append(f"{path}: {exc}")
            outcomes += [Outcome(f, "internal error: the rewrite would not parse") for f in fixable]
        outcomes.sort(key=lambda o: o.finding.sort_key)
        plan.files.append(FileFix(path, source, after, outcomes, removed_aliases))
    return plan


def _write_checked(root: Path, file: FileFix) -> None:
    """Atomic replace of a file inside the root whose bytes are still the analysed ones."""
    target = (root / file.path).resolve()
    if not target.is_relative_to(root.resolve()):
        raise _Refused("the file resolves outside the project root; it was not written")
    try:
        current = target.read_bytes()
    except FileNotFoundError:
        raise _Refused("the file was removed since it was analysed") from None
    if current != file.before:
        raise _Refused("the file changed since it was analysed; run `selfcall-audit fix` again")
    atomic_write(target, file.after, stat.S_IMODE(target.stat().st_mode))


def atomic_write(target: Path, data: bytes, mode: int) -> None:
    """Write a temporary file next to `target`, then rename it over: readers never see half a file."""
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise

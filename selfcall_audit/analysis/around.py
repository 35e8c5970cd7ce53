"""What the syntax tree around a self-call shows, read with Python's own `ast`: the facts of
`policy.Site` that `fix` reads from libcst's tree before it rewrites a call (a rebound or
shadowed `self`, a name the helper would collide with, a `:=` or a call in a part the rewrite
removes, a streamed response, and which bindings reach the names it relies on). `scan` asks
`policy.site_blocker` the same question on these facts, so that a finding it marks fixable is
one `fix` rewrites; this module never imports libcst.
"""

from __future__ import annotations

import ast
import bisect
import io
import re
import tokenize
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

from ..config import HELPER_NAME, helper_parts
from ..ftypes import CallDescription
from . import policy
from .names import COMPREHENSIONS, FUNCTIONS, bindings, binds, dotted, enclosing_method, ident, read_names
from .parsing import parse
from .policy import Reach
from .reaching import Flows, line_of
from .responses import bound_response, judged, unreached, wrapped_by

_NEW_SCOPES = (*FUNCTIONS, ast.Lambda, ast.ClassDef)
_LINE_BREAK = re.compile("\r\n|\r|\n")
_VENDORED = "inprocess"  # the module `fix` writes the helper to when no `helper` setting names one


class Tree:
    """One parsed module, with what the questions about its calls need worked out once (the
    helper's name, the flows of names, each method's rebindings and attribute reads): a file with
    hundreds of self-calls stays linear."""

    def __init__(self, source: bytes, span: tuple[int, int] | None = None):
        """`span`: the first and last line of the method whose calls are asked about: only those
        lines are parsed (a cold scan of NeMo Gym parsed 24 agent modules again for 25 calls), and
        `read_module` says whether an answer needed more of the module than they hold."""
        encoding = tokenize.detect_encoding(io.BytesIO(source).readline)[0]
        self.text = source.decode(encoding, "replace")
        self.lines = _LINE_BREAK.split(self.text)  # as Python counts lines (not `str.splitlines`)
        self.partial = span is not None
        self.module = parse(source) if span is None else _method_module(self.lines, *span)
        self.flows = Flows(self.module)
        self._helper_named = False
        self._helpers: dict[str, tuple[str, int | None]] = {}
        self._rebound: dict[tuple[ast.AST, str], int | None] = {}

    def helper(self, spec: str) -> tuple[str, int | None]:
        """See `_helper`."""
        if spec not in self._helpers:
            self._helper_named |= _names_helper(spec, self.text)
            self._helpers[spec] = _helper(self.module, spec, self.text)
        return self._helpers[spec]

    @property
    def read_module(self) -> bool:
        """Did an answer of a tree of one method's lines depend on the rest of the module (a
        global's bindings, or what binds the helper's name)? Then it is asked of the whole one."""
        return self.partial and (self._helper_named or self.flows.globals_read)

    def rebound(self, method: ast.AST, name: str) -> int | None:
        """The line of a statement of the method's own scope that binds `name` again."""
        if (method, name) not in self._rebound:
            found = self.flows.in_body(method, name)
            self._rebound[method, name] = line_of(found[0]) if found else None
        return self._rebound[method, name]

    def call_at(self, line: int, column: int) -> tuple[ast.Call, tuple[ast.AST, ...]] | None:
        """The call that starts at a 1-based line and character column, and its ancestors
        (outermost first, the module first): found by descending only into nodes that span the
        line, not by walking the module."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        stack: list[tuple[ast.AST, tuple[ast.AST, ...]]] = [(self.module, ())]
        while stack:
            node, ancestors = stack.pop()
            if (
                isinstance(node, ast.Call)
                and node.lineno == line
                and _column(text, node.col_offset) == column
            ):
                return node, ancestors
            stack.extend((child, (*ancestors, node)) for child in _spanning(node, line))
        return None


def _spanning(node: ast.AST, line: int) -> Iterator[ast.AST]:
    """The children of `node` whose lines hold `line`, and those without lines (`arguments`,
    `comprehension`, ...), in order. A list of statements is searched by halving, so that a class
    of 800 methods is not read whole for each of its calls."""
    for _, value in ast.iter_fields(node):
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            # statements follow each other: those starting by `line` and ending at or after it
            end = bisect.bisect_right(value, line, key=_first_line)
            start = end
            while start > 0 and value[start - 1].end_lineno >= line:  # type: ignore[operator]
                start -= 1
            yield from value[start:end]
            continue
        for child in value if isinstance(value, list) else (value,):
            if isinstance(child, ast.AST):
                first = getattr(child, "lineno", None)
                if first is None or first <= line <= (child.end_lineno or first):  # type: ignore[attr-defined]
                    yield child


def _first_line(statement: ast.stmt) -> int:
    return statement.lineno


class MethodSite(NamedTuple):
    """What `site_blocker` reads of the method around a call: `policy.Site` but for the module's
    part (the helper's name and what binds it, the globals' bindings), which is read again every
    run. `reaches`: for `self` and each name in `names`, None for a global."""

    self_rebinding: int | None
    self_shadowed: bool
    walrus: tuple[str, ...]
    dropped_call: str | None
    streamed: str | None
    unserved: tuple[str, ...]
    passed_on: tuple[str, ...]
    names: tuple[str, ...]
    reaches: tuple[Reach | None, ...]


class Sites:
    """The method part of the self-call sites of one file (`MethodSite`), kept between the runs
    of a long-lived process by what it is worked out from: the text of the method's lines, the
    call's place in them (its line counted from their first, its column), the method's `self`, the
    role of each argument of the call's description and how the module names NeMo Gym's readers.
    An edit to another method, below it, above it (its lines move, and the lines the answer names
    move with them) or to another file leaves it standing; an edit to its own lines works it out
    again. Each run keeps the entries it used, so one version of the file is kept, not every
    keystroke's."""

    def __init__(self, previous: Sites | None = None):
        self._previous = previous._entries if previous is not None else {}
        self._entries: dict[tuple, tuple[MethodSite, int]] = {}  # and the line the method started at

    def get(self, key: tuple, first: int, work_out: Callable[[], MethodSite]) -> MethodSite:
        """The answer for the method starting at line `first`."""
        site, then = self._entries.get(key) or self._previous.get(key) or (work_out(), first)
        if then != first:
            site = _moved(site, first - then)
        self._entries[key] = site, first
        return site


def _moved(site: MethodSite, lines: int) -> MethodSite:
    """The answer for the same method `lines` further down the file: each line it names moves as
    much (a definition without a line, 0, has none)."""

    def move(line: int | None) -> int | None:
        return line + lines if line else line

    return site._replace(
        self_rebinding=move(site.self_rebinding),
        reaches=tuple(
            None
            if reach is None
            else reach._replace(
                definitions=tuple(d._replace(line=move(d.line)) for d in reach.definitions),
                nonlocal_line=move(reach.nonlocal_line),
                global_line=move(reach.global_line),
            )
            for reach in site.reaches
        ),
    )


def site_blocker(
    tree: Tree, line: int, column: int, call: CallDescription, helper: str, sites: Sites | None = None
) -> policy.Blocker | None:
    """Why the call at `line`:`column`, described by `call`, cannot be rewritten where it stands
    (`helper`: the `helper` setting, MODULE:NAME or empty); None when `fix` would rewrite it, or
    when it is not found (the description decides alone). `sites`: the method parts of the file
    worked out before (a long-lived process)."""
    found = tree.call_at(line, column)
    if found is None:
        return None
    node, ancestors = found
    method, self_name, at = enclosing_method(ancestors)
    if method is None or self_name is None or self_name != call.self_name:
        return None  # `policy.blocker` said so already
    roles = tuple((argument.role, argument.index) for argument in call.arguments)
    if sites is None:
        local = _method_site(tree, node, ancestors, method, self_name, at, roles, call.readers)
    else:
        first = min([method.lineno, *(d.lineno for d in method.decorator_list)])  # type: ignore[attr-defined]
        text = "\n".join(tree.lines[first - 1 : method.end_lineno])  # type: ignore[attr-defined]
        local = sites.get(
            (text, line - first, column, self_name, roles, call.readers),
            first,
            lambda: _method_site(tree, node, ancestors, method, self_name, at, roles, call.readers),
        )
    callee, clash = tree.helper(helper)
    facts = policy.Site(
        callee=callee,
        self_name=self_name,
        self_rebinding=local.self_rebinding,
        self_shadowed=local.self_shadowed,
        helper_binding=clash,
        walrus=local.walrus,
        dropped_call=local.dropped_call,
        streamed=local.streamed,
        unserved=local.unserved,
        passed_on=local.passed_on,
        reaches=tuple(
            reach or tree.flows.global_reach(name)
            for name, reach in zip(local.names, local.reaches, strict=True)
        ),
    )
    return policy.site_blocker(facts)


def wrappers_at(tree: Tree, line: int, column: int) -> tuple[str, ...]:
    """NeMo Gym's wrappers the response of the call at `line`:`column` comes back through (see
    `responses.wrapped_by`); none when the call is not found."""
    found = tree.call_at(line, column)
    return () if found is None else wrapped_by(*found)


def _method_site(
    tree: Tree,
    node: ast.Call,
    ancestors: tuple[ast.AST, ...],
    method: ast.AST,
    self_name: str,
    at: int,
    roles: tuple[tuple[str, int], ...],
    readers: tuple[str, ...],
) -> MethodSite:
    """What the method around the call shows: read from the method's tree alone, the role of each
    argument of the call as written (`roles`: role and index, from its description) and how the
    module names NeMo Gym's readers (`readers`, from its description too: not a name the method
    binds itself)."""
    written = sorted([*node.args, *node.keywords], key=lambda a: (a.lineno, a.col_offset))
    index = dict(roles)
    dropped = [
        node.func,
        *(_value(written[index[r]]) for r in policy.DROPPED_ROLES if r in index and index[r] < len(written)),
    ]
    nested = [n for n in ancestors[at + 1 :] if isinstance(n, _NEW_SCOPES + COMPREHENSIONS)]
    names = tuple(dict.fromkeys([self_name, *read_names(dropped)]))
    bound = bound_response(node, ancestors)
    streamed, unserved, passed_on = judged(
        node,
        bound,
        ancestors,
        lambda: tree.flows.walked(method),
        lambda: unreached(tree.flows, method, nested, bound),
        policy.readers_unbound(readers, lambda name: tree.rebound(method, name)),
    )
    return MethodSite(
        self_rebinding=tree.rebound(method, self_name),
        self_shadowed=_shadows(nested, self_name),
        walrus=tuple(dict.fromkeys(n.target.id for part in dropped for n in _preorder(part) if _walrus(n))),  # type: ignore[attr-defined]
        dropped_call=_first_call(dropped),
        streamed=streamed,
        unserved=unserved,
        passed_on=passed_on,
        names=names,
        reaches=tuple(tree.flows.local_reach([method, *nested], ancestors, node, name) for name in names),
    )


def _column(text: str, offset: int) -> int:
    """The 1-based character column of ast's offset, which counts UTF-8 bytes of the line."""
    return len(text.encode("utf-8", "surrogatepass")[:offset].decode("utf-8", "replace")) + 1


def _value(argument: ast.AST) -> ast.AST:
    return argument.value if isinstance(argument, ast.keyword) else argument


def _helper(module: ast.Module, spec: str, text: str) -> tuple[str, int | None]:
    """The name a rewritten call would call (the helper's, or the local name a top-level import of
    it gives), and the line of anything else in the file that binds that name."""
    helper_module, name = helper_parts(spec) if spec else (None, HELPER_NAME)
    if not _names_helper(spec, text):
        return name, None
    provides: dict[ast.alias, str] = {}
    for statement in ast.walk(module):
        if isinstance(statement, ast.ImportFrom) and not statement.level and statement.module:
            named = statement.module == helper_module or (
                helper_module is None and statement.module.rsplit(".", 1)[-1] == _VENDORED
            )
            for alias in statement.names if named else ():
                if alias.name == name:
                    provides[alias] = alias.asname or name
    top = [a for s in module.body if isinstance(s, ast.ImportFrom) for a in s.names if a in provides]
    callee = ident(provides[top[0]]) if top else name
    clash = next((n for n in bindings(module, callee) if n not in provides), None)
    return callee, None if clash is None else line_of(clash)


def _names_helper(spec: str, text: str) -> bool:
    """Does the file's text hold the helper's name? (NFKC: an identifier not in ASCII may be the
    name as Python reads it.)"""
    name = helper_parts(spec)[1] if spec else HELPER_NAME
    return name in (text if text.isascii() else unicodedata.normalize("NFKC", text))


def _method_module(lines: list[str], first: int, last: int) -> ast.Module:
    """A method's lines parsed alone where they stand: blank lines above them and a class
    statement on the line before, so that lines and columns are the module's. (It never starts on
    the first two lines, where a comment would be read as the file's encoding.)"""
    if first < 3 or last < first:
        raise ValueError("not a method's lines")
    text = "\n" * (first - 2) + "class _:\n" + "\n".join(lines[first - 1 : last]) + "\n"
    return parse(text.encode())


def _shadows(scopes: Sequence[ast.AST], name: str) -> bool:
    """Does a function, lambda, class or comprehension between the method and the call bind `name`?"""
    for scope in scopes:
        if isinstance(scope, COMPREHENSIONS):
            if any(binds(generator.target, name) for generator in scope.generators):
                return True
        elif bindings(scope, name, own_scope=True):
            return True
    return False


def _preorder(root: ast.AST) -> list[ast.AST]:
    found, stack = [], [root]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return found


def _walrus(node: ast.AST) -> bool:
    return isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name)


def _first_call(parts: Sequence[ast.AST]) -> str | None:
    """The first call, `await` or `yield` inside `parts`: work that removing them would skip."""
    for part in parts:
        for node in _preorder(part):
            if isinstance(node, ast.Call):
                return f"{dotted(node.func) or '...'}()"
            if isinstance(node, ast.Await):
                return "await"
            if isinstance(node, (ast.Yield, ast.YieldFrom)):
                return "yield"
    return None

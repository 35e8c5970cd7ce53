"""The tests `fix` names, updated so that they check through the helper what they checked over HTTP.

A named test fakes `server_client.post` for the agent's own route, or asserts what the self-call
posted. After the rewrite the agent calls the helper, which that fake never sees. The test gets
its view back with a fake of the helper: for that test only, the helper's name in the agent
module is patched with a small function of the test module that sends the call to the agent's
server client as the agent did before, so the test's fake answers it and its assertions see it,
and a test that the self-call went through `server_client.post` now checks that it went through
the helper. One decorator per agent module the test exercises, the function and the `patch`
import added once; every other byte of the file stays (libcst), and a second run adds nothing.
"""

from __future__ import annotations

import ast
import codecs
import contextlib
import io
import tokenize
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import libcst as cst

from ..workspace.workers import Workers
from .fixes import Helper
from .imports import add_import, imported_name
from .region import Region, region
from .splice import SpliceError, spliced
from .test_impact import ImpactedTest

SHIM = "_self_call_through_server_client"
_SHIM_HEAD = f'''async def {SHIM}(agent, **kwargs):
    """The agent's self-call, sent to its server client as before the migration."""
'''
_SHIM_BODY = "    return await agent.server_client.post(server_name=agent.config.name, **kwargs)\n"
_SHIM_SPLIT = """    return await agent.server_client.post(
        server_name=agent.config.name,
        **kwargs,
    )
"""
_SHIMS = (_SHIM_HEAD + _SHIM_BODY, _SHIM_HEAD + _SHIM_SPLIT)  # on one line when it fits
_PATCH = Helper("unittest.mock", "patch")


@dataclass(frozen=True)
class Target:
    """The helper's name in a rewritten agent module: what a test patches."""

    module: str  # dotted: responses_api_agents.x.app
    name: str  # the local name the rewritten calls use

    @property
    def dotted(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass
class TestUpdate:
    """One test file: its bytes as read and after the update (a `write.Change`), and each named
    test's fate: updated, or left as it is with the reason."""

    path: str
    before: bytes
    after: bytes
    updated: list[ImpactedTest] = field(default_factory=list)
    left: list[tuple[ImpactedTest, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.after != self.before


def update_tests(
    root: Path,
    impacted: Iterable[ImpactedTest],
    targets: dict[str, Target],
    line_length: int,
    first_party: Callable[[str], bool],
    jobs: int = 0,
) -> list[TestUpdate]:
    """The update of every test file that holds a named test, in path order; files are updated in
    `jobs` worker processes (0: one per CPU) when there are two or more (`first_party` is sent
    to them: a module-level function or a partial of one)."""
    by_file: dict[str, list[ImpactedTest]] = {}
    for test in impacted:
        by_file.setdefault(test.node_id.partition("::")[0], []).append(test)
    updates: list[TestUpdate | None] = []
    read: list[_Update] = []
    for path, tests in sorted(by_file.items()):
        try:
            before = (root / path).read_bytes()
        except OSError as exc:
            updates.append(
                TestUpdate(path, b"", b"", left=[(t, f"cannot read it: {exc.strerror}") for t in tests])
            )
            continue
        updates.append(None)
        read.append(_Update(path, before, tests, targets, line_length, first_party))
    workers = Workers(jobs, min_batch=2)
    try:
        done = workers.map(_updated, read)
        return [update or next(done) for update in updates]
    finally:
        workers.close()


class _Update(NamedTuple):
    """One test file's update, as a worker process is handed it."""

    path: str
    before: bytes
    tests: list[ImpactedTest]
    targets: dict[str, Target]
    line_length: int
    first_party: Callable[[str], bool]


def _updated(job: _Update) -> TestUpdate:
    return _update_file(job)


def _update_file(job: _Update) -> TestUpdate:
    path, before, tests = job.path, job.before, job.tests
    update = TestUpdate(path, before, before)
    try:
        text = before.decode("utf-8-sig")  # a byte order mark is not the code's, and stays
        tree = ast.parse(text)  # what the name checks below read
    except (UnicodeDecodeError, SyntaxError, ValueError):
        update.left = [(t, "the file cannot be read as UTF-8 Python") for t in tests]
        return update
    # libcst reads the tests' own definitions, the module's top and the shim (see `region`), then
    # the whole file when that reading cannot be mapped back to it
    kept = [span for test in tests for span in _definitions(tree, test.node_id.split("::")[1:])]
    reading = region(text, kept, {SHIM}, tree)
    if reading is not None and (found := _update_in(job, text, tree, reading)) is not None:
        return found
    try:
        module = cst.parse_module(text)
    except (cst.ParserSyntaxError, ValueError):
        update.left = [(t, "the file cannot be read as UTF-8 Python") for t in tests]
        return update
    update = _update_of(job, module, tree)
    if update.after is not before:
        update.after = codecs.BOM_UTF8 * before.startswith(codecs.BOM_UTF8) + update.after
    return update


def _update_in(job: _Update, text: str, tree: ast.Module, reading: Region) -> TestUpdate | None:
    """The update worked out on `reading` and spliced back into the file; None when that reading
    cannot stand for the whole file."""
    try:
        module = cst.parse_module(reading.text)
    except (cst.ParserSyntaxError, ValueError):
        return None
    if module.default_indent != _first_indent(text):
        return None  # the first block was blanked, and the others indent otherwise: added code would too
    update = _update_of(job, module, tree)
    if update.after is not job.before:
        try:
            update.after = spliced(
                job.before, "utf-8", text, module.code, update.after.decode("utf-8"), reading
            ).data
        except SpliceError:
            return None
    return update


def _first_indent(text: str) -> str:
    """The file's first indentation, which libcst takes for the module's own when it reads it whole."""
    with contextlib.suppress(tokenize.TokenError, SyntaxError):
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.INDENT:
                return token.string
    return "    "


def _definitions(tree: ast.Module, qualified: list[str]) -> list[tuple[int, int]]:
    """The lines of every definition a test's node id may name (`_find` takes the first)."""
    level: list[ast.stmt] = [tree]  # type: ignore[list-item]
    for name in qualified:
        level = [
            node
            for parent in level
            for node in parent.body  # type: ignore[attr-defined]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name
        ]
    return [(node.lineno, node.end_lineno or node.lineno) for node in level]


def _update_of(job: _Update, module: cst.Module, tree: ast.Module) -> TestUpdate:
    """The update of the file read as `module`: its new text in `after`, unless nothing changes."""
    path, before, tests, targets, line_length, first_party = job
    update = TestUpdate(path, before, before)
    patch = imported_name(module, _PATCH)
    reason = _clash(module, tree, patch)
    if reason is not None:
        update.left = [(t, reason) for t in tests]
        return update
    imported = _imported_modules(tree)
    wanted: dict[tuple[str, ...], list[Target]] = {}
    for test in tests:
        chosen = [_as_imported(targets[m], imported) for m in test.modules if m in targets]
        qualified = tuple(test.node_id.split("::")[1:])
        if not chosen:
            update.left.append((test, "the agent module it exercises was not rewritten"))
        elif _find(module, qualified) is None:
            update.left.append((test, "its definition is not a plain function or method of the module"))
        else:
            wanted[qualified] = chosen
            update.updated.append(test)
    if not wanted:
        return update
    name = patch or _PATCH.name
    indent = module.default_indent
    decorate = _Decorate(wanted, name, indent, line_length)
    new = module.visit(decorate)
    if not decorate.added:  # every decorator was already there
        return update
    if not _defines_shim(new):
        new = _with_shim(new, _SHIMS[len(_SHIM_BODY) - 1 > line_length])
    if patch is None:
        new = add_import(new, _PATCH, first_party)
    update.after = new.code.encode("utf-8")
    return update


def _imported_modules(tree: ast.Module) -> set[str]:
    """The modules the test module imports, as it names them: its statements are read, not the
    expressions in them, where no import stands."""
    names: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        for block in ("body", "orelse", "finalbody", "handlers", "cases"):
            stack += getattr(node, block, ())
    return names


def _as_imported(target: Target, imported: set[str]) -> Target:
    """The agent module under the name the test imports it by: a test that puts the agent's folder
    on `sys.path` and imports `app` patches `app`, the module object its agent's methods read."""
    if target.module in imported:
        return target
    suffixes = [name for name in imported if target.module.endswith(f".{name}")]
    return replace(target, module=max(suffixes, key=len)) if suffixes else target


def _clash(module: cst.Module, tree: ast.Module, patch: str | None) -> str | None:
    """Why the names the update adds cannot be added to this module."""
    bound = _module_bindings(tree)
    if patch is None and "patch" in bound:
        return "`patch` already names something else in this module"
    if SHIM in bound and not _defines_shim(module):
        return f"`{SHIM}` already names something else in this module"
    return None


def _module_bindings(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _defines_shim(module: cst.Module) -> bool:
    shims = {shim.strip() for shim in _SHIMS}
    return any(
        isinstance(s, cst.FunctionDef) and s.name.value == SHIM and module.code_for_node(s).strip() in shims
        for s in module.body
    )


def _find(module: cst.Module, qualified: tuple[str, ...]) -> cst.FunctionDef | None:
    body: Iterable[cst.CSTNode] = module.body
    for depth, name in enumerate(qualified):
        last = depth == len(qualified) - 1
        kind = cst.FunctionDef if last else cst.ClassDef
        found = next((s for s in body if isinstance(s, kind) and s.name.value == name), None)
        if found is None:
            return None
        if last:
            return found  # type: ignore[return-value]
        body = found.body.body  # type: ignore[union-attr]
    return None


class _Decorate(cst.CSTTransformer):
    """Adds, below the test's own decorators, one `@patch("<module>.<helper>", shim)` per target
    it does not have yet."""

    def __init__(self, wanted: dict[tuple[str, ...], list[Target]], patch: str, indent: str, width: int):
        super().__init__()
        self.wanted = wanted
        self.patch = patch
        self.indent = indent
        self.width = width
        self.stack: list[str] = []
        self.added = 0  # decorators added

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.stack.append(node.name.value)
        return len(self.stack) == 1

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        self.stack.pop()
        return updated_node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        targets = self.wanted.get((*self.stack, original_node.name.value))
        if not targets:
            return updated_node
        present = {_patched(d) for d in original_node.decorators}
        added = [self._decorator(t, len(self.stack)) for t in targets if t.dotted not in present]
        self.added += len(added)
        return updated_node.with_changes(decorators=[*updated_node.decorators, *added])

    def _decorator(self, target: Target, depth: int) -> cst.Decorator:
        """Written as ruff format writes it at the repo's line length: on one line if it fits."""
        pad = self.indent * depth
        call = f'{self.patch}("{target.dotted}", {SHIM})'
        if len(pad) + 1 + len(call) > self.width:  # indented as at the top level: nesting adds the rest
            call = f'{self.patch}(\n{self.indent}"{target.dotted}",\n{self.indent}{SHIM},\n)'
        snippet = f"@{call}\ndef f():\n    pass\n"
        for level in range(depth):  # nested as deep as the test, so that the layout's indentation is relative
            snippet = f"class C{level}:\n" + "".join(
                f"{self.indent}{line}\n" for line in snippet.splitlines()
            )
        node: cst.CSTNode = cst.parse_module(snippet).body[0]
        for _ in range(depth):
            node = node.body.body[0]  # type: ignore[attr-defined]
        return node.decorators[0]  # type: ignore[attr-defined]


def _patched(decorator: cst.Decorator) -> str | None:
    """The target of a `@patch("a.b.c", ...)` decorator."""
    call = decorator.decorator
    if isinstance(call, cst.Call) and call.args and isinstance(call.args[0].value, cst.SimpleString):
        value = call.args[0].value.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _with_shim(module: cst.Module, source: str) -> cst.Module:
    """The fake of the helper, two lines below the module's leading imports and the constants that
    follow them, where a helper function of the module goes (PEP 8's order)."""
    body = list(module.body)
    at = 0
    for index, statement in enumerate(body):
        if (
            _is_import(statement)
            or (at and _is_assignment(statement))
            or (index == 0 and _is_docstring(statement))
        ):
            at = index + 1
        elif at:
            break
    shim = cst.parse_module(source).body[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    if at < len(body):
        following = body[at]
        blank = next((i for i, line in enumerate(following.leading_lines) if line.comment is not None), None)
        blank = len(following.leading_lines) if blank is None else blank
        if blank < 2:
            extra = [cst.EmptyLine() for _ in range(2 - blank)]
            body[at] = following.with_changes(leading_lines=[*extra, *following.leading_lines])
    body.insert(at, shim)
    return module.with_changes(body=body)


def _is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
    )


def _is_assignment(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)) for small in statement.body
    )


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )

"""Working out a module's facts from its syntax tree."""

from __future__ import annotations

import ast
import io
import re
import tokenize

from .expr import UNKNOWN, merge, prune
from .facts import Binding, ClassFacts, FactsError, FunctionBody, FunctionFacts, Import, ModuleFacts
from .kept_functions import Functions, Walked
from .parsing import parse
from .walker import FunctionWalker, ModuleScope, param_names

_NOQA = re.compile(rb"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_CODING = re.compile(rb"(?:[^\n]*\n)?[ \t\f]*#[^\n]*?coding[:=][ \t]*(?!utf-?8\b)[-\w.]+", re.IGNORECASE)
_LINE_BREAK = re.compile("\r\n|\r|\n")


class ModuleExtractor(ModuleScope):
    def __init__(self, path: str, source: bytes, functions: Functions | None = None):
        """`functions`: the file's functions as last extracted (see `Functions`)."""
        self.path = path
        self.source = source
        # Lines are cut as `position` cuts them, which counts them as Python does unless a lone
        # carriage return ends one: then nothing is reused.
        lone_cr = source.count(b"\r") != source.count(b"\r\n")
        self._lines: list[bytes] | None = None
        self._text: list[str] | None = None
        # an encoding declared by a comment (`# -*- coding: latin-1 -*-`): even ASCII bytes may
        # then stand for other characters (`unicode_escape`), so columns are counted on the text
        self._cookie = _CODING.match(b"\n".join(source.split(b"\n", 2)[:2])) is not None
        self.functions = None if self._cookie or lone_cr else functions
        self.imports: list[Import] = []
        self.instance_attrs: dict[str, list[Binding]] = {}
        self.nested: list[ClassFacts] = []

    def nested_class(self, node: ast.ClassDef) -> None:
        saved = self.instance_attrs
        self.nested.append(self.klass(node))
        self.instance_attrs = saved

    def position(self, line: int, byte_col: int) -> tuple[int, int]:
        """1-based line and 1-based character column from ast's offset, which counts UTF-8 bytes
        of the decoded line whatever the file's declared encoding."""
        if self._lines is None:
            self._lines = self.source.splitlines()
        raw = self._lines[line - 1] if 0 < line <= len(self._lines) else b""
        if raw[:byte_col].isascii() and not self._cookie:
            return line, byte_col + 1
        if self._text is None:
            self._text = _LINE_BREAK.split(_decode(self.source))
        text = self._text[line - 1] if 0 < line <= len(self._text) else ""
        return line, len(text.encode("utf-8", "surrogatepass")[:byte_col].decode("utf-8", "replace")) + 1

    def imports_from(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.imports.append(Import(alias.asname, alias.name, None, 0, node.lineno))
                else:
                    top = alias.name.split(".")[0]
                    self.imports.append(Import(top, top, None, 0, node.lineno))
        else:
            for alias in node.names:
                if alias.name != "*":
                    local = alias.asname or alias.name
                    self.imports.append(Import(local, node.module or "", alias.name, node.level, node.lineno))

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, is_method: bool) -> FunctionFacts:
        """The function's facts: reused (see `Functions`) when its lines are those of last time."""
        if self.functions is None:
            return self._function(node, is_method)
        if self._lines is None:
            self._lines = self.source.splitlines()
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        key = (b"\n".join(self._lines[first - 1 : node.end_lineno]), is_method)
        walked = self.functions.get(key, first, lambda: self._walked(node, is_method))
        self.imports.extend(walked.imports)
        self.nested.extend(walked.nested)
        for name, bindings in walked.attrs:
            self.instance_attrs.setdefault(name, []).extend(bindings)
        return walked.facts

    def _walked(self, node: ast.FunctionDef | ast.AsyncFunctionDef, is_method: bool) -> Walked:
        """The function's facts, and what walking it added to the module's and class's, taken back
        out (`function` adds them again, whether the walk is this one or one kept)."""
        imports, nested, attrs = len(self.imports), len(self.nested), self.instance_attrs
        before = {name: len(bindings) for name, bindings in attrs.items()}
        facts = self._function(node, is_method)
        added = tuple(
            (name, tuple(bindings[before.get(name, 0) :]))
            for name, bindings in attrs.items()
            if len(bindings) > before.get(name, 0)
        )
        walked = Walked(facts, tuple(self.imports[imports:]), tuple(self.nested[nested:]), added)
        del self.imports[imports:], self.nested[nested:]
        for name, bindings in added:
            del attrs[name][len(attrs[name]) - len(bindings) :]
            if not attrs[name]:
                del attrs[name]
        return walked

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, is_method: bool) -> FunctionFacts:
        params = param_names(node.args)
        positional = [a.arg for a in [*node.args.posonlyargs, *node.args.args]]
        is_static = any(
            isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in node.decorator_list
        )
        self_param = positional[0] if is_method and positional and not is_static else None
        walker = FunctionWalker(self, params - {self_param} if self_param else params, self_param, {})
        defaults = []
        all_defaults = list(node.args.defaults)
        for param, default in zip(positional[len(positional) - len(all_defaults) :], all_defaults):
            defaults.append((param, walker.expr(default)))
        for param, default in zip(node.args.kwonlyargs, node.args.kw_defaults):
            if default is not None:
                defaults.append((param.arg, walker.expr(default)))
        walker.calls = []
        walker.body(node.body)
        ordered = tuple(positional + [a.arg for a in node.args.kwonlyargs])
        body = FunctionBody(
            tuple(defaults),
            tuple(walker.calls),
            tuple(walker.locals),
            prune(merge(walker.returns)) if walker.returns else UNKNOWN,
        )
        return FunctionFacts(
            node.name,
            node.lineno,
            ordered,
            self_param,
            body,
            is_method and any(_decorator_name(d) in _PROPERTIES for d in node.decorator_list),
            _forwards(node, self_param, ordered),
            (min([node.lineno, *(d.lineno for d in node.decorator_list)]), node.end_lineno or node.lineno),
        )

    def constants(self, stmts: list[ast.stmt]) -> list[Binding]:
        """Top-level `NAME = expr` bindings; names bound in several places become alternatives."""
        walker = FunctionWalker(self, set(), None, {})
        found: dict[str, list[Binding]] = {}
        pending = list(stmts)
        while pending:
            stmt = pending.pop(0)
            targets: list[ast.expr] = []
            if isinstance(stmt, ast.Assign):
                targets = stmt.targets
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                targets = [stmt.target]
            elif isinstance(stmt, (ast.If, ast.Try)):
                pending[:0] = [*stmt.body, *getattr(stmt, "orelse", []), *getattr(stmt, "handlers", [])]
                continue
            elif isinstance(stmt, ast.ExceptHandler):
                pending[:0] = stmt.body
                continue
            for target in targets:
                if isinstance(target, ast.Name):
                    value = prune(walker.expr(stmt.value))  # type: ignore[union-attr]
                    found.setdefault(target.id, []).append(Binding(target.id, value, stmt.lineno))
                    # a later constant built from this one (`ROLLOUT = "/x" + RESPONSES` in a class body)
                    walker.env[target.id] = (value, stmt.lineno)
        return [
            Binding(name, merge([b.expr for b in bindings]), bindings[0].line)
            for name, bindings in found.items()
        ]

    def klass(self, node: ast.ClassDef) -> ClassFacts:
        outer = FunctionWalker(self, set(), None, {})
        bases = tuple(outer.expr(base) for base in node.bases)
        self.instance_attrs = instance_attrs = {}
        methods = []
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods.append(self.function(stmt, is_method=True))
        attrs = tuple(
            Binding(name, merge([b.expr for b in bindings]), bindings[0].line)
            for name, bindings in instance_attrs.items()
        )
        keywords = tuple(
            (k.arg, prune(outer.expr(k.value))) for k in node.keywords if k.arg and k.arg != "metaclass"
        )
        return ClassFacts(
            node.name, node.lineno, bases, tuple(self.constants(node.body)), attrs, tuple(methods), keywords
        )

    def module(self, tree: ast.Module) -> ModuleFacts:
        classes: list[ClassFacts] = []
        functions: list[FunctionFacts] = []
        served: list[str] = []
        pending = list(tree.body)
        while pending:
            stmt = pending.pop(0)
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self.imports_from(stmt)
            elif isinstance(stmt, ast.ClassDef):
                classes.append(self.klass(stmt))
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(self.function(stmt, is_method=False))
            elif isinstance(stmt, ast.If) and _is_main_guard(stmt.test):
                served.extend(_served_classes(stmt.body))
            elif isinstance(stmt, (ast.If, ast.Try)):
                pending[:0] = [
                    *stmt.body,
                    *stmt.orelse,
                    *(s for h in getattr(stmt, "handlers", []) for s in h.body),
                ]
        return ModuleFacts(
            path=self.path,
            imports=tuple(self.imports),
            constants=tuple(self.constants(tree.body)),
            classes=tuple(classes + self.nested),
            functions=tuple(functions),
            served=tuple(served),
            noqa=_noqa_lines(self.source),
        )


_PROPERTIES = frozenset({"property", "cached_property"})


def _forwards(
    node: ast.FunctionDef | ast.AsyncFunctionDef, self_param: str | None, params: tuple[str, ...]
) -> tuple[tuple[str, str], ...] | None:
    """The (keyword, parameter) pairs of a method that only passes its parameters on, by name, to
    its own server client's `post` and returns what it gives, undecorated: calling it is calling
    the client. An `async def` must return the awaited call, a `def` the call itself."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if self_param is None or node.decorator_list or len(body) != 1 or not isinstance(body[0], ast.Return):
        return None
    value = body[0].value
    if isinstance(node, ast.AsyncFunctionDef):
        value = value.value if isinstance(value, ast.Await) else None
    match value:
        case ast.Call(
            func=ast.Attribute(
                value=ast.Attribute(value=ast.Name(id=owner), attr="server_client"), attr="post"
            ),
            args=[],
            keywords=keywords,
        ) if owner == self_param:
            pairs = tuple((k.arg, k.value.id) for k in keywords if k.arg and isinstance(k.value, ast.Name))
            forwarded = [param for _, param in pairs]
            own = set(params) - {self_param}
            if (
                len(pairs) == len(keywords)
                and len(set(forwarded)) == len(forwarded)
                and set(forwarded) <= own
            ):
                return pairs
    return None


def _decorator_name(node: ast.expr) -> str | None:
    """`property`, `functools.cached_property`: the decorator's last name."""
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _served_classes(body: list[ast.stmt]) -> list[str]:
    served = []
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "run_webserver"
            and isinstance(node.func.value, ast.Name)
        ):
            served.append(node.func.value.id)
    return served


def _decode(source: bytes) -> str:
    """The text Python reads: the declared (or UTF-8) encoding, a BOM dropped."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        return source.decode(encoding, "replace")
    except (SyntaxError, LookupError):
        return source.decode("utf-8", "replace")


def _noqa_lines(source: bytes) -> tuple[tuple[int, tuple[str, ...] | None], ...]:
    found = []
    for match in _NOQA.finditer(source):
        line = source.count(b"\n", 0, match.start()) + 1
        codes = match.group("codes")
        parsed = tuple(c.upper() for c in re.split(r"[,\s]+", codes.decode()) if c) if codes else None
        found.append((line, parsed))
    return tuple(found)


def extract(path: str, source: bytes, functions: Functions | None = None) -> ModuleFacts:
    """Facts of one Python file. Raises FactsError, with a message for the SCA900 entry, for input
    that cannot be analysed; never anything else, so one odd file cannot stop a scan.
    `functions`: the file's functions as last extracted, reused where unchanged (and updated)."""
    if b"\0" in source:
        raise FactsError("binary file: it contains null bytes, so it is not Python source")
    try:
        tree = parse(source)
    except SyntaxError as exc:
        raise _syntax_error(exc) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise FactsError(f"cannot parse: {exc}") from None
    except (RecursionError, MemoryError):
        raise FactsError("too deeply nested to parse", "too_deep") from None
    try:
        return ModuleExtractor(path, source, functions).module(tree)
    except (RecursionError, MemoryError):
        raise FactsError("too deeply nested to analyse", "too_deep") from None
    except Exception as exc:  # a bug of ours: this file is reported, the others are still analysed
        raise FactsError(
            f"internal error while analysing ({type(exc).__name__}: {exc}); please report it", "internal"
        ) from exc


def _syntax_error(exc: SyntaxError) -> FactsError:
    line = exc.lineno if exc.lineno and exc.lineno > 0 else None
    column = exc.offset if line and exc.offset and exc.offset > 0 else None
    where = f" at line {line}" if line else ""
    if column:
        where += f", column {column}"
    at = {"line": line or 1, "column": column or 1}
    message = exc.msg
    if message.startswith(("too many nested parentheses", "too many levels of indentation")):
        return FactsError(f"too deeply nested to parse{where}: {message}", "too_deep", **at)
    if message.startswith(("unknown encoding", "encoding problem")) or (
        message.startswith("(unicode error)") and "can't decode byte" in message
    ):
        return FactsError(
            f"cannot decode the source{where}: {message.removeprefix('(unicode error) ')}", **at
        )
    return FactsError(f"syntax error{where}: {message}", **at)

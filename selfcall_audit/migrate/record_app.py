"""The app recorded where the repo builds it, for a helper that dispatches to the app it is given.

A helper that names an `APP_ATTRIBUTE` finds the agent's app on the agent, where the agent's
base class records it as it builds it. `fix` adds that one line to the repo's base agent class:
in its `setup_webserver()`, `self.<attribute> = app` before each `return app`. Byte-preserving
(libcst) and idempotent: a method that already records it is left as it is.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from .vendor import module_file

_SHIPPED = Path(__file__).resolve().parents[1] / "inprocess.py"
METHOD = "setup_webserver"


@dataclass(frozen=True)
class Recording:
    """A base class file (a `write.Change`) and the lines its `setup_webserver` now records at."""

    path: str
    before: bytes
    after: bytes
    lines: tuple[int, ...]

    @property
    def changed(self) -> bool:
        return self.after != self.before


def app_attribute() -> str | None:
    """The attribute the shipped helper reads the app from (its `APP_ATTRIBUTE`), if it has one."""
    for node in ast.parse(_SHIPPED.read_bytes()).body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "APP_ATTRIBUTE" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


def record_app(root: Path, agent_bases: tuple[str, ...]) -> list[Recording]:
    """The change to each base agent class of the project (`module.Class`) whose `setup_webserver`
    returns the app it built without recording it."""
    attribute = app_attribute()
    if attribute is None:
        return []
    recordings = []
    for base in agent_bases:
        module, _, class_name = base.rpartition(".")
        rel = module_file(root, module)
        if rel is None or not (root / rel).is_file():
            continue
        before = (root / rel).read_bytes()
        try:
            tree = cst.parse_module(before.decode("utf-8"))
        except (UnicodeDecodeError, cst.ParserSyntaxError):
            continue
        recorder = _Record(class_name, attribute)
        after = tree.visit(recorder)
        if recorder.returns and after is not tree:
            code = after.code.encode("utf-8")
            lines = tuple(_lines_of(code, attribute))
            if code != before:
                recordings.append(Recording(rel, before, code, lines))
    return recordings


def _lines_of(code: bytes, attribute: str) -> list[int]:
    needle = f".{attribute} = ".encode()
    return [number for number, line in enumerate(code.splitlines(), 1) if needle in line]


# What the line is for, above it: a reviewer of the migration reads it there.
_WHY = "# the in-process helper serves the agent's self-calls with this app"


class _Record(cst.CSTTransformer):
    """In `class_name.setup_webserver`: `self.<attribute> = app` (below `_WHY`) before each
    `return app` of the method's own body (not of functions nested in it), unless the method
    records it already."""

    def __init__(self, class_name: str, attribute: str):
        super().__init__()
        self.class_name = class_name
        self.attribute = attribute
        self.depth = 0  # functions entered inside the method
        self.inside = False
        self.in_class = False
        self.self_name = "self"
        self.returns = 0

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        if self.inside or self.in_class or node.name.value != self.class_name:
            return False
        self.in_class = True
        return True

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        if original_node.name.value == self.class_name and not self.inside:
            self.in_class = False
        return updated_node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if self.inside:
            self.depth += 1
            return True
        params = node.params.params
        if not self.in_class or node.name.value != METHOD or not params or _records(node, self.attribute):
            return False
        self.inside = True
        self.self_name = params[0].name.value
        return True

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        if self.inside and self.depth:
            self.depth -= 1
        elif self.inside:
            self.inside = False
        return updated_node

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        if not self.inside or self.depth:
            return updated_node
        body: list[cst.BaseStatement] = []
        for statement in updated_node.body:
            name = _returned_name(statement)
            if name is not None:
                self.returns += 1
                record = cst.parse_statement(f"{self.self_name}.{self.attribute} = {name}\n")
                why = cst.EmptyLine(comment=cst.Comment(_WHY))
                body.append(record.with_changes(leading_lines=[*statement.leading_lines, why]))  # type: ignore[union-attr]
                statement = statement.with_changes(leading_lines=())  # type: ignore[union-attr]
            body.append(statement)
        return updated_node.with_changes(body=body)


def _returned_name(statement: cst.BaseStatement) -> str | None:
    """`return app`: the name returned."""
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        small = statement.body[0]
        if isinstance(small, cst.Return) and isinstance(small.value, cst.Name):
            return small.value.value
    return None


def _records(method: cst.FunctionDef, attribute: str) -> bool:
    """Does the method assign `<self>.<attribute>` already?"""
    code = cst.Module(body=[method]).code
    return f".{attribute} =" in code

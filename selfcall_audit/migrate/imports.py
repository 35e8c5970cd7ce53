"""The helper's import: where isort (ruff's `I` rules) would put it, or merged into an existing one;
and what a module already imports of the helper.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Callable, Sequence

import libcst as cst
import libcst.matchers as m

from .arguments import uncommented
from .fixes import Helper
from .walk import descendants

_FUTURE, _STDLIB, _THIRD_PARTY, _FIRST_PARTY, _LOCAL = range(5)
_E402 = re.compile(r"#\s*noqa\b.*\bE402\b")


def ident(name: str) -> str:
    """An identifier as Python reads it: NFKC-normalised (a fullwidth `s` in `self` is `s`)."""
    return name if name.isascii() else unicodedata.normalize("NFKC", name)


def dotted_name(node: cst.BaseExpression) -> str | None:
    """`a.b.c` as Python reads it, or None for another expression."""
    if isinstance(node, cst.Name):
        return ident(node.value)
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def module_name(node: cst.ImportFrom) -> str | None:
    if node.relative or node.module is None:
        return None
    return dotted_name(node.module)


def imported_name(module: cst.Module, helper: Helper) -> str | None:
    """The local name of a top-level `from <helper module> import <helper name> [as x]`, if any."""
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.ImportFrom) and module_name(small) == helper.module:
                    for alias in small.names if not isinstance(small.names, cst.ImportStar) else ():
                        if dotted_name(alias.name) == helper.name:
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
        name = dotted_name(small.names[0].name) or ""
        return _section(name, False, first_party), 0, name.lower()
    assert isinstance(small, cst.ImportFrom)
    name = dotted_name(small.module) if small.module is not None else ""
    return _section(name or "", bool(small.relative), first_party), 1, (name or "").lower()


def _blank_prefix(lines: Sequence[cst.EmptyLine]) -> int:
    count = 0
    for line in lines:
        if line.comment is not None:
            break
        count += 1
    return count


def add_import(module: cst.Module, helper: Helper, first_party: Callable[[str], bool]) -> cst.Module:
    """Merge the helper into an import of its module, or add the line where isort would put it:
    among the imports of its own section, and below a change of `sys.path` that imports below it
    may need (a script that puts the repo on the path before importing its modules)."""
    body = list(module.body)
    for index, statement in enumerate(body):
        if not _is_import_line(statement):
            continue
        for position, small in enumerate(statement.body):  # type: ignore[attr-defined]
            if (
                isinstance(small, cst.ImportFrom)
                and module_name(small) == helper.module
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

    ours = (_section(helper.module, False, first_party), 1, helper.module.lower())
    runs: list[list[int]] = []
    for index in imports:
        if runs and runs[-1][-1] == index - 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    changed = _last_path_change(body[: imports[-1]])
    if changed is not None:  # the imports below it may need it, and so may the helper's
        run = next(r for r in runs if r[0] > changed)
        if any(_E402.search(_comment(body[i])) for i in run):  # as the file's own imports there say
            line = line.with_changes(
                trailing_whitespace=cst.TrailingWhitespace(
                    cst.SimpleWhitespace("  "), cst.Comment("# noqa: E402")
                )
            )
    else:  # with the imports of its own section, else with the first ones
        sections = {i: _sort_key(body[i], first_party)[0] for i in imports}  # type: ignore[arg-type]
        run = next((r for r in runs if any(sections[i] == ours[0] for i in r)), runs[0])
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


def _comment(statement: cst.BaseStatement) -> str:
    trailing = getattr(statement, "trailing_whitespace", None)
    return trailing.comment.value if trailing is not None and trailing.comment is not None else ""


def _last_path_change(body: Sequence[cst.BaseStatement]) -> int | None:
    """The index of the last top-level statement that changes `sys.path` (`sys.path.insert(...)`,
    an assignment to it, `site.addsitedir(...)`)."""
    path = m.Attribute(value=m.Name("sys"), attr=m.Name("path"))
    change = (
        m.Call(func=m.Attribute(value=path) | m.Attribute(value=m.Name("site"), attr=m.Name("addsitedir")))
        | m.AssignTarget(target=path | m.Subscript(value=path))
        | m.AugAssign(target=path)
    )
    found = None
    for index, statement in enumerate(body):
        if not isinstance(statement, (cst.FunctionDef, cst.ClassDef)) and any(
            m.matches(node, change) for node in descendants(statement)
        ):
            found = index
    return found


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
    """`name` added in order; every comment stays with the name it was written after."""
    names = list(node.names)  # type: ignore[arg-type]
    keys = [_member_key(dotted_name(alias.name) or "") for alias in names]
    at = len(names)
    if keys == sorted(keys):
        at = next((i for i, key in enumerate(keys) if key > _member_key(name)), len(names))
    single_space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    alias = cst.ImportAlias(name=cst.Name(name))
    if at < len(names):
        neighbour = names[at - 1] if at else names[at]
        comma = neighbour.comma
        if isinstance(comma, cst.Comma):
            comma = comma.with_changes(whitespace_after=uncommented(comma.whitespace_after))
        else:
            comma = single_space
        names.insert(at, alias.with_changes(comma=comma))
        return node.with_changes(names=names)
    last = names[-1]
    if isinstance(last.comma, cst.Comma):  # a trailing comma: the new name ends the same way
        if len(names) > 1:
            step = names[-2].comma.whitespace_after  # type: ignore[union-attr]
        elif node.lpar is not None:
            step = node.lpar.whitespace_after
        else:
            step = cst.SimpleWhitespace(" ")
        ending = last.comma.whitespace_after
        if isinstance(step, cst.ParenthesizedWhitespace) and isinstance(ending, cst.ParenthesizedWhitespace):
            step = step.with_changes(first_line=ending.first_line, empty_lines=ending.empty_lines)
        else:
            step = uncommented(step)
        names[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=step))
        names.append(alias.with_changes(comma=last.comma.with_changes(whitespace_after=uncommented(ending))))
    else:  # the new name goes on a line of its own where the last one did, indented as it was
        if len(names) > 1:
            step = uncommented(names[-2].comma.whitespace_after)  # type: ignore[union-attr]
        elif node.lpar is not None and isinstance(node.lpar.whitespace_after, cst.ParenthesizedWhitespace):
            step = uncommented(node.lpar.whitespace_after)
        else:
            step = cst.SimpleWhitespace(" ")
        names[-1] = last.with_changes(comma=cst.Comma(whitespace_after=step))
        names.append(alias)
    return node.with_changes(names=names)

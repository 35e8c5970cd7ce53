"""YAML read with a safe composer, never constructed: each document's top-level mapping as plain
values, mappings that remember where each key was written.

Hostile input is bounded: unknown tags are refused, and the nodes aliases copy (alias bombs) and
the nesting have limits.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import yaml

_MAX_NODES = 200_000
_MAX_DEPTH = 100  # real configs nest about 10 deep; later steps recurse this deep at most
_COMPOSER_SAFE_DEPTH = 5_000  # libyaml's composer recurses in C: deeper input would overflow the stack
_BLOCK_LINE_START = re.compile(r"^[ \t]*(?:[-?:](?:[ \t]+|$))*", re.MULTILINE)
_FLOW_BRACKETS = re.compile(r"[\[\]{}]")
_STANDARD_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}"
    for name in (
        "str",
        "int",
        "float",
        "bool",
        "null",
        "map",
        "seq",
        "timestamp",
        "binary",
        "merge",
        "omap",
        "set",
    )
)


class ConfigFileError(Exception):
    """A YAML file that cannot be used: reported as SCA900, at the line it names (else the first)."""

    def __init__(self, message: str, line: int = 1, column: int = 1):
        super().__init__(message)
        self.line = line
        self.column = column


class Where(NamedTuple):
    path: str
    line: int


class Node(dict):
    """A mapping that remembers where each key was written."""

    where: dict[str, Where]

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.where = {}


def _to_python(
    node: yaml.Node, path: str, budget: list[int], seen: set[int], depth: int = 0, copied: bool = False
) -> object:
    """The node as plain values. `budget` bounds the nodes copied by aliases (each visit of a
    collection after its first is a copy, and so is everything below it): a large file written
    out in full costs only its size, an alias bomb stops at the bound. `seen`: the collections
    visited."""
    if node.id != "scalar":
        copied = copied or id(node) in seen
        seen.add(id(node))
    if copied:
        budget[0] -= 1
    if budget[0] < 0:
        raise ConfigFileError(
            f"more than {_MAX_NODES:,} YAML nodes once aliases are expanded (an alias bomb?)"
        )
    if depth > _MAX_DEPTH:
        line = node.start_mark.line + 1
        raise ConfigFileError(f"line {line}: YAML nested more than {_MAX_DEPTH} levels deep", line)
    depth += 1
    if node.tag not in _STANDARD_TAGS:
        line = node.start_mark.line + 1
        raise ConfigFileError(f"line {line}: unknown YAML tag {node.tag!r} (not loaded)", line)
    if node.id == "mapping":
        result = Node()
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                merged = _to_python(value_node, path, budget, seen, depth, copied)
                for item in merged if isinstance(merged, list) else [merged]:
                    if isinstance(item, Node):
                        for k, v in item.items():
                            result.setdefault(k, v)
                            result.where.setdefault(k, item.where[k])
                continue
            key = _to_python(key_node, path, budget, seen, depth, copied)
            if not isinstance(key, str):
                key = str(key)
            result[key] = _to_python(value_node, path, budget, seen, depth, copied)
            result.where[key] = Where(path, key_node.start_mark.line + 1)
        return result
    if node.id == "sequence":
        return [_to_python(item, path, budget, seen, depth, copied) for item in node.value]
    return (
        node.value
        if node.tag == "tag:yaml.org,2002:str"
        else (None if node.value in ("", "~", "null") and node.tag.endswith("null") else node.value)
    )


def parse_yaml(path: str, data: bytes) -> list[Node]:
    """Top-level mappings of every document in the file."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if _nesting_bound(text) > _COMPOSER_SAFE_DEPTH:
        raise ConfigFileError(f"YAML nested more than {_MAX_DEPTH} levels deep (not loaded)")
    import yaml  # here: a run whose instances are cached does not need it

    try:
        documents = list(yaml.compose_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except yaml.MarkedYAMLError as exc:  # at its line, as a Python syntax error: where reports point
        mark = exc.problem_mark or exc.context_mark
        at = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        where = f" at line {at[0]}, column {at[1]}" if mark else ""
        what = " ".join(str(exc.problem or exc.__class__.__name__).split())
        what += f" ({' '.join(exc.context.split())})" if exc.context else ""
        raise ConfigFileError(f"invalid YAML{where}: {what}", *at) from None
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"invalid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise ConfigFileError(f"YAML nested more than {_MAX_DEPTH} levels deep (not loaded)") from None
    budget = [_MAX_NODES]
    seen: set[int] = set()
    result = []
    for document in documents:
        if document is None:
            continue
        value = _to_python(document, path, budget, seen)
        if isinstance(value, Node):
            result.append(value)
        elif value not in (None, ""):
            raise ConfigFileError("top level is not a mapping of server instances")
    return result


def _nesting_bound(text: str) -> int:
    """An upper bound of the nesting depth, in one linear pass over the text.

    A nested block collection starts at a greater column (an indentless sequence at the same one,
    hence the factor 2), and a nested flow collection needs a bracket.
    """
    if len(text) <= _COMPOSER_SAFE_DEPTH:
        return len(text)
    column = max(len(match.group()) for match in _BLOCK_LINE_START.finditer(text))
    depth = flow = 0
    for match in _FLOW_BRACKETS.finditer(text):
        depth = depth + 1 if match.group() in "[{" else max(depth - 1, 0)
        flow = max(flow, depth)
    return 2 * (column + 1) + flow

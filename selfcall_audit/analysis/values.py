"""What an evaluation gives: a string as path alternatives (text, and markers where it cannot
be told), a server as the names it can denote, and the operations on them that need no project."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, get_args

from .expr import all_equal, compare_by_type
from .limits import LIMITS


class Marker(NamedTuple):
    """A part of an evaluated path that is not text; `label` is the expression written there,
    shown to users, and `limit` the bound of `LIMITS` that made it unknown, if one did (markers of
    one kind are equal whatever their label and limit)."""

    name: str
    label: str = ""
    limit: str = ""


HOLE = Marker("unknown")  # any text
PREFIX = Marker("prefix")  # a rollout prefix a configured route wrapper may add
PARAM = Marker("parameter")  # a parameter of the enclosing function: its callers decide

PathPart = str | Marker
Path = tuple[PathPart, ...]


class OwnName(NamedTuple):
    """`self.config.name`: the agent's own instance name."""

    def __bool__(self) -> bool:  # a value, never false (it has no fields)
        return True


class ConfigRef(NamedTuple):
    """`self.config.<key>.name`: a server reference from the YAML config."""

    key: str


class NamedServer(NamedTuple):
    """A server named by a string: the agent itself when a YAML instance of it has that name."""

    text: str


class FromParam(NamedTuple):
    """A parameter of the enclosing function: its callers decide."""

    def __bool__(self) -> bool:  # a value, never false (it has no fields)
        return True


class Unresolved(NamedTuple):
    """A name the analysis cannot tell; `limit`: the bound of `LIMITS` that stopped it, if one did."""

    limit: str = ""


Server = OwnName | ConfigRef | NamedServer | FromParam | Unresolved
compare_by_type(get_args(Server))


# Markers of one kind are equal whatever their label and limit, and so are all unresolved names:
# only reports read those.
Marker.__eq__ = lambda one, other: type(other) is Marker and one.name == other.name  # type: ignore[assignment,method-assign]
Marker.__ne__ = lambda one, other: not (type(other) is Marker and one.name == other.name)  # type: ignore[assignment,method-assign]
Marker.__hash__ = lambda one: hash((Marker, one.name))  # type: ignore[assignment,method-assign]
all_equal(Unresolved)


def named_field(label: str, alternatives: list[Path]) -> list[Path]:
    """An f-string field's alternatives, as one part named by its expression when none of them
    can be told and they stay inside one path segment (a rollout id built from several values is
    `{rollout_id}`, not `{?}-{?}-a{?}`)."""
    told = [alt for alt in alternatives if all(isinstance(part, str) for part in alt)]
    if told or any(isinstance(part, str) and "/" in part for alt in alternatives for part in alt):
        return alternatives
    kind = PARAM.name if any(PARAM in alt for alt in alternatives) else HOLE.name
    return [(Marker(kind, label, path_limit(alternatives) or ""),)]


def names_route_itself(alternatives: list[Path], route: str) -> bool:
    """Does each alternative end with the route as text, parameters only filling parts before it
    (`"%s/v1/responses" % prefix`)? Then the function decides the route, not its callers."""
    main = route.split("?")[0]
    for alternative in alternatives:
        tail = []
        for part in reversed(alternative):
            if not isinstance(part, str):
                break
            tail.append(part)
        if not "".join(reversed(tail)).endswith(main):
            return False
    return bool(alternatives)


def without_params(alternatives: list[Path]) -> list[Path]:
    """Parameters as unknown parts: any text."""
    return [tuple(HOLE if part == PARAM else part for part in alternative) for alternative in alternatives]


def stripped(alternative: Path, how: str, chars: str | None) -> Path:
    """`str.strip` and its one-sided forms on the text at the ends of a path alternative."""
    parts = list(alternative)
    if how != "rstrip" and parts and isinstance(parts[0], str):
        parts[0] = parts[0].lstrip(chars)
    if how != "lstrip" and parts and isinstance(parts[-1], str):
        parts[-1] = parts[-1].rstrip(chars)
    return tuple(parts)


def server_of(alternative: Path) -> Server:
    if PARAM in alternative:
        return FromParam()
    if all(isinstance(part, str) for part in alternative):
        return NamedServer("".join(alternative))  # type: ignore[arg-type]
    return Unresolved(path_limit([alternative]) or "")


def join_paths(parts: Iterable[list[Path]]) -> list[Path]:
    """`posixpath.join` of parts given as their alternatives: a `/` between parts, and an absolute
    part starts over. The parts are read one by one: past `LIMITS.alternatives`, the rest are not."""
    joined: list[Path] = [()]
    for alternatives in parts:
        combined: list[Path] = []
        for alternative in alternatives:
            alternative = tuple(part for part in alternative if part != "")
            head = alternative[0] if alternative else ""
            absolute = isinstance(head, str) and head.startswith("/")
            for prefix in joined:
                if absolute or not prefix:
                    combined.append(alternative)
                elif isinstance(prefix[-1], str) and prefix[-1].endswith("/"):
                    combined.append(prefix + alternative)
                else:
                    combined.append((*prefix, "/", *alternative))
        if len(combined) > LIMITS.alternatives:
            return [cut_path("alternatives")]
        joined = combined
    return joined


def cut_path(limit: str) -> Path:
    """A path the evaluation stopped following at the bound `limit`: any text."""
    return (Marker(HOLE.name, limit=limit),)


def bounded(alternatives: list[Path]) -> list[Path]:
    """At most `LIMITS.alternatives` of them, and a cut standing for the rest (one of which may
    be the route)."""
    if len(alternatives) <= LIMITS.alternatives:
        return alternatives
    return [*alternatives[: LIMITS.alternatives], cut_path("alternatives")]


def path_limit(alternatives: list[Path]) -> str | None:
    """The bound that cut a part of these path alternatives, if one did."""
    return next((p.limit for alt in alternatives for p in alt if isinstance(p, Marker) and p.limit), None)


def server_limit(servers: list[Server]) -> str | None:
    """The bound that stopped the evaluation of one of these server names, if one did."""
    return next((s.limit for s in servers if isinstance(s, Unresolved) and s.limit), None)

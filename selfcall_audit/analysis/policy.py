"""The rewrite policy: when a self-call may become a call of the in-process helper, and why not.

The one place these rules live. The analysis asks `blocker(description)` to tell whether a
finding is fixable; `fix` asks the same question, then `site_blocker(site)` for what only the
syntax tree around the call shows (a rebound `self`, a name the helper would collide with, and,
through `name_blocker`, whether `self` and the names the rewrite removes are bound on every path
to the call as the analysis read them). A refusal is a `Blocker`: a kind, and the words for it.
This module imports nothing but the value types: a scan can use it without libcst.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ftypes import CallArgument, CallDescription, CallReceiver
from .calls import CLIENT_SIGNATURES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    from ..ftypes import ArgumentRole

    DefinitionForm = Literal[
        "param",
        "assign",
        "import",
        "augmented",
        "walrus",
        "for",
        "except",
        "with",
        "delete",
        "other",
        "unbound",
    ]
    BlockerKind = Literal[
        "self_shadowed",
        "self_rebound",
        "walrus_in_removed_part",
        "call_in_removed_part",
        "helper_name_taken",
        "streamed",
        "bound_around_the_call",
        "rebound_in_loop",
        "rebound_after_closure",
        "rebound_by_nonlocal",
        "rebound_by_global",
        "bound_by_handler",
        "bound_by_walrus",
        "maybe_unbound",
        "several_bindings",
        "not_a_plain_binding",
        "unreachable",
    ]

# The client methods a rewrite replaces: those that can say POST (the helper sends nothing else).
REWRITTEN_METHODS = frozenset({"post", "request"})
# What the in-process helper takes (kept as written), and what the rewrite drops.
KEPT_ROLES: frozenset[str] = frozenset({"url_path", "json", "cookies", "headers"})
DROPPED_ROLES: frozenset[str] = frozenset({"server_name", "method"})
# What a `**` expansion of a dict display may pass: kept as written, the helper takes them by name.
EXPANDABLE: frozenset[str] = frozenset({"json", "cookies", "headers"})
_NAMED_ROLES = KEPT_ROLES | DROPPED_ROLES


def role_of(client_method: str, index: int, keyword: str | None) -> ArgumentRole:
    """What the server client's `client_method` does with the argument at `index` / `keyword`."""
    if keyword is None:
        signature = CLIENT_SIGNATURES.get(client_method, ())  # an unknown method: no positional parameters
        return signature[index] if index < len(signature) else "other"  # type: ignore[return-value]
    if keyword == "method" and client_method == "post":
        return "other"  # `.post(method=...)`: not a parameter the helper could drop
    return keyword if keyword in _NAMED_ROLES else "other"  # type: ignore[return-value]


def blocker(call: CallDescription) -> str | None:
    """Why the described call cannot be rewritten, or None when it can."""
    receiver = call.receiver
    match receiver.kind:
        case "partial":
            return "the call goes through functools.partial"
        case "helper" if not receiver.forwards:
            return (
                f"the call goes through `{receiver.text}()`, which does more than pass its arguments on: only "
                "a method whose whole body is `return await self.server_client.post(name=name, ...)` is seen through"
            )
    if receiver.client_method not in REWRITTEN_METHODS and not (
        receiver.kind == "bound_method" and not receiver.client_method  # `post(...)`, bound elsewhere
    ):
        return "the call is not a `.post(...)` or `.request(...)` of the server client"
    match call.context:
        case "with":
            return "the response is used as an async context manager"
        case "default":
            return "the call is in a default argument value, evaluated once when the function is defined"
        case "decorator":
            return "the call is in a decorator, evaluated once when the function is defined"
    for argument in call.arguments:
        reason = _argument_blocker(argument, receiver)
        if reason is not None:
            return reason
    if receiver.unpassed:
        return (
            f"`{receiver.text}()` sends its own default for `{receiver.unpassed}`, "
            "which the rewritten call would not send"
        )
    named = [a.keyword for a in call.arguments if a.keyword] + [
        k for a in call.arguments for k in a.keys or ()
    ]
    twice = sorted({name for name in named if named.count(name) > 1})
    if twice:
        return f"`{twice[0]}` is passed twice (by name and in a `**` expansion)"
    roles = {argument.role for argument in call.arguments}
    if not {"server_name", "url_path"} <= roles:
        return "it does not name both the server and the url path"
    if call.self_name is None:
        return "the call is not inside a method that has `self`"
    return None


def _argument_blocker(argument: CallArgument, receiver: CallReceiver) -> str | None:
    if argument.star == "**" and argument.keys is not None:
        others = [key for key in argument.keys if key not in EXPANDABLE]
        if not others:
            return None  # `**{"headers": h}`, `**({"headers": h} if h else {})`: kept as written
        return f"a `**` expansion passes `{others[0]}`, which the in-process helper does not take: rewrite the call by hand"
    if argument.star == "**" and receiver.forwards:
        return f"arguments come from a `**` expansion whose keys `{receiver.text}()` does not pass on as they are"
    if argument.star:
        return f"arguments come from a `{argument.star}` expansion: rewrite the call by hand"
    if argument.role != "other":
        return None
    if receiver.forwards:
        if argument.keyword is None:
            return f"it passes arguments to `{receiver.text}()` by position: name them, as its parameters are named"
        return (
            f"`{receiver.text}()` does not pass `{argument.keyword}` on to the client as an argument "
            "the in-process helper takes (`url_path`, `json`, `cookies`, `headers`)"
        )
    if argument.keyword is None:
        return "it passes positional arguments the in-process helper does not take"
    return f"the in-process helper takes no `{argument.keyword}` argument"


_REASONS: dict[BlockerKind, str] = {
    "self_shadowed": "`{name}` at the call is not the method's own (a nested function, lambda or comprehension binds it)",
    "self_rebound": "`{name}` is rebound in the method (line {line}); the helper needs the agent itself",
    "walrus_in_removed_part": "the call binds {name} with `:=` in a part the rewrite removes",
    "call_in_removed_part": "the server name or client comes from `{name}`, which the rewrite would no longer run",
    "helper_name_taken": "`{name}` already names something else here (line {line}); "
    "choose the helper's name with --helper MODULE:NAME",
    "streamed": "the response body is streamed (`{name}`); the in-process helper buffers it",
    "bound_around_the_call": "`{name}` at the call is bound by a lambda or comprehension around it",
    "rebound_in_loop": "`{name}` is bound again at line {line}, in a loop around the call: a later pass may post elsewhere",
    "rebound_after_closure": "`{name}` is bound again at line {line}, after the function that makes the call was defined",
    "rebound_by_nonlocal": "a nested function rebinds `{name}` through `nonlocal` (line {line})",
    "rebound_by_global": "a function rebinds `{name}` through `global` (line {line})",
    "bound_by_handler": "`{name}` is bound by `except ... as` at line {line}, which can reach the call",
    "bound_by_walrus": "`{name}` is bound by `:=` at line {line}, which can reach the call",
    "maybe_unbound": "`{name}` may be unbound when the call runs (line {line})",
    "several_bindings": "more than one binding of `{name}` can reach the call (line {line} too)",
    "not_a_plain_binding": "`{name}` is not bound by a plain assignment (line {line})",
    "unreachable": "no path from the start of the function reaches the call",
}


@dataclass(frozen=True)
class Blocker:
    """Why a call, where it stands, is left alone: a kind the code can test, and the name and
    line it is about, for the words."""

    kind: BlockerKind
    name: str = ""
    line: int | None = None

    @property
    def reason(self) -> str:
        return _REASONS[self.kind].format(name=self.name, line=self.line)


@dataclass(frozen=True)
class Definition:
    """A binding of a name that can reach a call: how it binds, its line, and whether it stands
    after the call in the file (reaching it on a later pass of a loop, or later in a closure's life)."""

    form: DefinitionForm
    line: int
    after_call: bool = False


@dataclass(frozen=True)
class Reach:
    """What can be bound to `name` when the call runs (see `flow`).

    `scope`: "function" (a local of the method or of a function in it), "module" (a global) or
    "nested" (bound by a lambda or comprehension around the call). `closure`: the call runs in a
    function made before, so any binding of the name in its scope can reach it. `nonlocal_line` /
    `global_line`: a statement of another function that rebinds it."""

    name: str
    scope: Literal["function", "module", "nested"]
    definitions: tuple[Definition, ...]
    closure: bool = False
    nonlocal_line: int | None = None
    global_line: int | None = None


def name_blocker(reach: Reach, is_self: bool) -> Blocker | None:
    """Is the name the call's removed parts read (or the method's `self`) bound, on every path to
    the call, by the one binding the analysis read? Only then does it denote what was analysed."""
    name = reach.name
    if reach.scope == "nested":
        return Blocker("bound_around_the_call", name)
    if reach.nonlocal_line is not None:
        return Blocker("rebound_by_nonlocal", name, reach.nonlocal_line)
    if reach.global_line is not None:
        return Blocker("rebound_by_global", name, reach.global_line)
    definitions = reach.definitions
    if not definitions:
        return Blocker("unreachable", name)
    plain = ("param",) if is_self else ("assign", "import")
    if len(definitions) == 1 and definitions[0].form in plain:
        return None
    later = next((d for d in definitions if d.after_call), None)
    if later is not None:
        return Blocker("rebound_after_closure" if reach.closure else "rebound_in_loop", name, later.line)
    for form, kind in _FORM_BLOCKERS:
        found = next((d for d in definitions if d.form == form), None)
        if found is not None:
            return Blocker(kind, name, found.line or None)
    if len(definitions) == 1:
        return Blocker("not_a_plain_binding", name, definitions[0].line)
    return Blocker("several_bindings", name, definitions[-1].line)


_FORM_BLOCKERS: tuple[tuple[DefinitionForm, BlockerKind], ...] = (
    ("unbound", "maybe_unbound"),
    ("delete", "maybe_unbound"),
    ("except", "bound_by_handler"),
    ("walrus", "bound_by_walrus"),
)


@dataclass(frozen=True)
class Site:
    """What the syntax tree around one call shows that the description does not.

    `self_rebinding` / `helper_binding`: the line of a statement that rebinds the method's `self`
    before the call, or binds the helper's name where the call would see it; `walrus`: names a
    `:=` in a removed part of the call binds; `dropped_call`: a call (or `await`) in a removed part,
    which would no longer run; `streamed`: the response expression whose body is
    read as a stream; `reaches`: what can be bound to `self` and each name the removed parts read."""

    callee: str
    self_name: str
    self_rebinding: int | None = None
    self_shadowed: bool = False
    helper_binding: int | None = None
    walrus: tuple[str, ...] = ()
    dropped_call: str | None = None
    streamed: str | None = None
    reaches: tuple[Reach, ...] = ()  # `self` and each name the removed parts read


def site_blocker(site: Site) -> Blocker | None:
    """Why the call, where it stands, cannot be rewritten without changing what the code does."""
    if site.self_shadowed:
        return Blocker("self_shadowed", site.self_name)
    if site.self_rebinding is not None:
        return Blocker("self_rebound", site.self_name, site.self_rebinding)
    if site.walrus:
        return Blocker("walrus_in_removed_part", ", ".join(f"`{name}`" for name in site.walrus))
    if site.dropped_call is not None:
        return Blocker("call_in_removed_part", site.dropped_call)
    if site.helper_binding is not None:
        return Blocker("helper_name_taken", site.callee, site.helper_binding)
    if site.streamed:
        return Blocker("streamed", site.streamed)
    for reach in site.reaches:
        blocker = name_blocker(reach, is_self=reach.name == site.self_name)
        if blocker is not None:
            return blocker
    return None

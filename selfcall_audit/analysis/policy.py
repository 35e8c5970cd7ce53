"""The rewrite policy: when a self-call may become a call of the in-process helper, and why not.

The one place these rules live. The analysis asks `blocker(description)` to tell whether a
finding is fixable; `fix` asks the same question, then `site_blocker(site)` for what only the
syntax tree around the call shows (a rebound `self`, a name the helper would collide with, and,
through `name_blocker`, whether `self` and the names the rewrite removes are bound on every path
to the call as the analysis read them). A refusal is a `Blocker`: a kind and what it is about
(`report.messages` words it).
This module imports nothing but the value types: a scan can use it without libcst. Its own value
types' annotations are evaluated as the classes are made (see `ftypes`).
"""

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Literal, NamedTuple, TypeVar

from ..ftypes import ArgumentRole, Blocker, BlockerKind, CallArgument, CallDescription, CallReceiver
from .calls import CLIENT_SIGNATURES

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

# The method that builds an agent's app, and where it records it for the in-process helper (the
# shipped helper's `APP_ATTRIBUTE`, which `fix` writes there).
APP_BUILDER = "setup_webserver"
APP_ATTRIBUTE = "_webserver_app"
# The client methods a rewrite replaces: those that can say POST (the helper sends nothing else).
REWRITTEN_METHODS = frozenset({"post", "request"})
# What the in-process helper takes (kept as written), and what the rewrite drops.
KEPT_ROLES: frozenset[str] = frozenset({"url_path", "json", "cookies", "headers"})
DROPPED_ROLES: frozenset[str] = frozenset({"server_name", "method"})
# What the in-process helper's response has of aiohttp's `ClientResponse` (the shipped helper's
# `InProcessResponse`): its attributes and methods, and the reads, coroutines, which are awaited.
RESPONSE_MEMBERS = frozenset(
    {
        "status",
        "reason",
        "ok",
        "url",
        "headers",
        "cookies",
        "content",
        "request_info",
        "raise_for_status",
        "release",
    }
)
RESPONSE_READS = frozenset({"json", "text", "read"})
# NeMo Gym's package, and its own readers of a response (in `READERS_MODULE`), which the response
# may be passed to alone: what they read, the helper's response serves, as its tests check by
# running them on both. A call names them as its module imports them (`reader_spellings`).
NEMO_GYM = "nemo_gym"
READERS_MODULE = "nemo_gym.server_utils"
RESPONSE_READERS = frozenset({"raise_for_status", "get_response_json"})
# What gives, once awaited, the response of the awaitable it is given first.
RESPONSE_PASSED_ON = frozenset({"wait_for", "shield"})
# Builtins that read a member named by a string: `getattr(r, "headers", None)` reads `r.headers`.
MEMBER_QUERIES = frozenset({"getattr", "hasattr"})
# A response no name holds, as a use of it is written (`(await ...).json()`).
AWAITED = "(await ...)"
# NeMo Gym's wrappers that make a call through the lambda they are given, and give back its response
# (`await self.retry_checkpoint_refusal(lambda: <call>, ...)`): what they read of it, `status` and
# `read()`, the helper's response serves.
RESPONSE_WRAPPERS = frozenset({"retry_checkpoint_refusal", "checkpointable_external_wait"})
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


def blocker(call: CallDescription) -> Blocker | None:
    """Why the described call cannot be rewritten, or None when it can."""
    receiver = call.receiver
    match receiver.kind:
        case "partial":
            return Blocker("partial")
        case "helper" if not receiver.forwards:
            return Blocker("through_helper", receiver.text)
    if receiver.client_method not in REWRITTEN_METHODS and not (
        receiver.kind == "bound_method" and not receiver.client_method  # `post(...)`, bound elsewhere
    ):
        return Blocker("not_a_post")
    match call.context:
        case "with":
            return Blocker("async_with")
        case "default":
            return Blocker("in_default")
        case "decorator":
            return Blocker("in_decorator")
    for argument in call.arguments:
        reason = _argument_blocker(argument, receiver)
        if reason is not None:
            return reason
    if receiver.unpassed:
        return Blocker("helper_default", receiver.text, names=(receiver.unpassed,))
    named = [a.keyword for a in call.arguments if a.keyword] + [
        k for a in call.arguments for k in a.keys or ()
    ]
    twice = sorted({name for name in named if named.count(name) > 1})
    if twice:
        return Blocker("passed_twice", twice[0])
    roles = {argument.role for argument in call.arguments}
    if not {"server_name", "url_path"} <= roles:
        return Blocker("no_server_or_path")
    if call.self_name is None:
        return Blocker("outside_method")
    return None


def _argument_blocker(argument: CallArgument, receiver: CallReceiver) -> Blocker | None:
    if argument.star == "**" and argument.keys is not None:
        others = [key for key in argument.keys if key not in EXPANDABLE]
        if not others:
            return None  # `**{"headers": h}`, `**({"headers": h} if h else {})`: kept as written
        return Blocker("expanded_key", others[0])
    if argument.star == "**" and receiver.forwards:
        return Blocker("helper_expansion", receiver.text)
    if argument.star:
        return Blocker("star_expansion", argument.star)
    if argument.role != "other":
        return None
    if receiver.forwards and argument.keyword is None:
        return Blocker("helper_positional", receiver.text)
    if receiver.forwards:
        return Blocker("helper_keyword", receiver.text, names=(argument.keyword,))
    if argument.keyword is None:
        return Blocker("positional")
    return Blocker("keyword", argument.keyword)


class Definition(NamedTuple):
    """A binding of a name that can reach a call: how it binds, its line, and whether it stands
    after the call in the file (reaching it on a later pass of a loop, or later in a closure's life)."""

    form: DefinitionForm
    line: int
    after_call: bool = False


class Reach(NamedTuple):
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


def unserved(uses: Iterable[tuple[str, str, bool, bool]]) -> tuple[str, ...]:
    """The uses of a response, each `(response, member, called, awaited)`, that the helper's
    response does not serve as the client's did, as written and sorted: `r.status_code` (an httpx
    response's), `r.json()` not awaited (a read that is not a coroutine)."""
    found = set()
    for response, member, called, awaited in uses:
        if member in RESPONSE_READS and not awaited:
            found.add(f"{response}.{member}{'()' if called else ''}")
        elif member not in RESPONSE_READS and member not in RESPONSE_MEMBERS:
            found.add(f"{response}.{member}")
    return tuple(sorted(found))


def passed_on(uses: Iterable[tuple[str, str, str | None]], readers: Collection[str]) -> tuple[str, ...]:
    """The places a response goes where its uses are not followed, each use of the name itself
    `(response, holder, callee)`: "alone" (the only argument of a call of `callee`, a dotted name
    or None), "argument" (one of its arguments), "return", "yield", or "value" (any other: bound
    to another name, stored, put in a container, formatted). Sorted; a response passed alone to
    one of `RESPONSE_READERS`, as `readers` spell them in the call's module (see
    `reader_spellings`), goes nowhere unfollowed."""
    found = set()
    for response, holder, callee in uses:
        if holder == "alone" and callee in readers:
            continue
        if holder == "alone" and callee is not None:
            found.add(f"{callee}({response})")
        elif holder == "argument" and callee is not None:
            found.add(f"{callee}(...)")
        elif holder in ("return", "yield"):
            found.add(f"{holder} {response}")
        else:
            found.add(response)
    return tuple(sorted(found))


def unawaited(callee: str | None) -> str:
    """A call not awaited where it stands, as a use of its response is written: what is made of
    it then (a task, a list's item, a lambda run later) is not followed."""
    return f"{callee}(...)" if callee else "the call"


def nemo_gyms(qualname: str, agent_bases: Collection[str]) -> bool:
    """Is the class `qualname` (`module.Class`) NeMo Gym's own, whose `RESPONSE_WRAPPERS` give the
    response back as read there: a configured agent base, or a class of NeMo Gym's package."""
    return qualname in agent_bases or qualname.startswith(f"{NEMO_GYM}.")


def reader_spellings(
    imports: Iterable[tuple[str, str, str | None, int]], bound: Collection[str]
) -> tuple[str, ...]:
    """How a module's calls name NeMo Gym's `RESPONSE_READERS`, from its imports, each `(local
    name, module, name imported or None for the module itself, level)`: `from nemo_gym.server_utils
    import raise_for_status [as L]` gives `L`; `from nemo_gym import server_utils [as L]` and
    `import nemo_gym.server_utils as L` give `L.raise_for_status` and `L.get_response_json`;
    `import nemo_gym.server_utils` gives the dotted names. Not a name that another import binds
    too, nor one the module binds itself (`bound`: a function, class or assignment of that name):
    what it calls then may be anything."""
    spelled: dict[str, set[str] | None] = {}
    for local, module, name, level in imports:
        if level:
            found = None
        elif module == READERS_MODULE and name in RESPONSE_READERS:
            found = {local}
        elif f"{module}.{name}" == READERS_MODULE or (module == READERS_MODULE and name is None):
            found = {f"{local}.{reader}" for reader in RESPONSE_READERS}
        elif module == local == NEMO_GYM and name is None:  # `import nemo_gym.server_utils`
            found = {f"{READERS_MODULE}.{reader}" for reader in RESPONSE_READERS}
        else:
            found = None
        before = spelled.get(local, set())
        spelled[local] = None if found is None or before is None else before | found
    return tuple(sorted(s for local, names in spelled.items() if names and local not in bound for s in names))


def readers_unbound(readers: Iterable[str], rebinding: Callable[[str], object]) -> list[str]:
    """The `readers` (see `reader_spellings`) whose first name the method does not bind again
    (`rebinding`: what binds a name in the method's own scope, or None), where they are NeMo Gym's."""
    return [reader for reader in readers if rebinding(reader.partition(".")[0]) is None]


def overridden_wrapper(wrapped_by: Iterable[str], overridden: Mapping[str, str]) -> Blocker | None:
    """Why a response that comes back through `wrapped_by` (`RESPONSE_WRAPPERS`) is not followed:
    a class running the call has one of them from a class of the project (`overridden`: the
    wrapper's name and that class's), which may do anything with it."""
    for name in wrapped_by:
        if name in overridden:
            return Blocker("wrapper_overridden", name, names=(overridden[name],))
    return None


# the streamed body's expression, the uses not served, the places the response goes unfollowed
ResponseUse = tuple[str | None, tuple[str, ...], tuple[str, ...]]
Node = TypeVar("Node")  # a node of `ast`'s tree or of libcst's


def unreached_nodes(
    states: Mapping[Node, Collection[Node]],
    binding: Node,
    children: Callable[[Node], Iterable[Node]],
    later: tuple[type, ...],
) -> frozenset[int]:
    """The ids of the nodes that run where `binding` cannot be current, from a flow's `states`
    (each statement or header part, and the bindings that can be current there): every node below
    a part the binding does not reach, short of what runs later (`later`: functions, lambdas and
    classes, whose uses count wherever they stand)."""
    found: set[int] = set()
    for node, state in states.items():
        if binding in state or isinstance(node, later):
            continue
        stack = [node]
        while stack:
            current = stack.pop()
            found.add(id(current))
            stack += [child for child in children(current) if not isinstance(child, later)]
    return frozenset(found)


def judge_uses(
    nodes: list[Node], read: Callable[[list[Node]], ResponseUse], skipped: Callable[[], frozenset[int]]
) -> ResponseUse:
    """How a bound response is used (`read` from the method's `nodes`): from every use of its name
    first, then, only when one would keep the call from being rewritten, from the uses its binding
    reaches (`skipped`: the ids of the nodes it does not). Most responses are read only as the
    helper serves them, and the reach takes a flow through the method."""
    found = read(nodes)
    if not any(found):
        return found
    skip = skipped()
    return read([node for node in nodes if id(node) not in skip])


class Site(NamedTuple):
    """What the syntax tree around one call shows that the description does not.

    `self_rebinding` / `helper_binding`: the line of a statement that rebinds the method's `self`
    before the call, or binds the helper's name where the call would see it; `walrus`: names a
    `:=` in a removed part of the call binds; `dropped_call`: a call (or `await`) in a removed part,
    which would no longer run; `streamed`: the response expression whose body is
    read as a stream; `unserved`: the uses of the response the helper's does not serve (see
    `unserved`); `passed_on`: where the response goes unfollowed (see `passed_on`); `reaches`:
    what can be bound to `self` and each name the removed parts read."""

    callee: str
    self_name: str
    self_rebinding: int | None = None
    self_shadowed: bool = False
    helper_binding: int | None = None
    walrus: tuple[str, ...] = ()
    dropped_call: str | None = None
    streamed: str | None = None
    unserved: tuple[str, ...] = ()
    passed_on: tuple[str, ...] = ()
    reaches: tuple[Reach, ...] = ()  # `self` and each name the removed parts read


def site_blocker(site: Site) -> Blocker | None:
    """Why the call, where it stands, cannot be rewritten without changing what the code does."""
    if site.self_shadowed:
        return Blocker("self_shadowed", site.self_name)
    if site.self_rebinding is not None:
        return Blocker("self_rebound", site.self_name, site.self_rebinding)
    if site.walrus:
        return Blocker("walrus_in_removed_part", names=site.walrus)
    if site.dropped_call is not None:
        return Blocker("call_in_removed_part", site.dropped_call)
    if site.helper_binding is not None:
        return Blocker("helper_name_taken", site.callee, site.helper_binding)
    if site.streamed:
        return Blocker("streamed", site.streamed)
    if site.unserved:
        return Blocker("response_use", names=site.unserved)
    for reach in site.reaches:
        blocker = name_blocker(reach, is_self=reach.name == site.self_name)
        if blocker is not None:
            return blocker
    if site.passed_on:  # last: where the response goes, the call as written may still be wrong
        return Blocker("response_passed_on", names=site.passed_on)
    return None

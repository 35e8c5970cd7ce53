"""How the response of a self-call is used, read on libcst's tree (`analysis.responses` reads the
same with `ast` for `scan`): streamed through `r.content`, through uses the helper's response
does not serve (`policy.unserved` decides which), or passed on where its uses are not followed
(`policy.passed_on`). A use counts where the response's binding can reach it: once the name is
bound again (`r = await r.json()`), what it holds is not the response."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence

import libcst as cst

from ..analysis import policy
from .flow import Flows
from .imports import dotted_name, ident
from .scope import COMPREHENSIONS, enclosing_method, target
from .walk import children, descendants

Bound = tuple[str, cst.CSTNode]  # the name the response is bound to, and its binding in the flow
_LATER = (cst.FunctionDef, cst.ClassDef, cst.Lambda)  # what runs inside may run after any binding
_SCOPES = (*_LATER, *COMPREHENSIONS)


def bound_response(call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> Bound | None:
    """The name the call's response is bound to, and its binding (the `AssignTarget`, or the
    `AnnAssign`): by `r = await <call>` (also through what passes it on, see `_given`), or by
    `a, r = await asyncio.gather(<other>, <call>)`."""
    rest = _given(call, ancestors)[1]
    gathered = _gathered(rest)
    assigned = _assigned(rest if gathered is None else rest[:-2])
    if assigned is None:
        return None
    target, binding = assigned
    if gathered is not None:
        position, count = gathered
        elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else ()
        element = elements[position] if len(elements) == count else None
        target = element.value if isinstance(element, cst.Element) else None
    return (target.value, binding) if isinstance(target, cst.Name) else None


def _given(call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> tuple[cst.CSTNode, Sequence[cst.CSTNode]]:
    """What gives the call's response once awaited, and its ancestors: the call itself, or what
    passes it on (`asyncio.wait_for(<call>, ...)`, `asyncio.shield(<call>)`, one of NeMo Gym's
    `policy.RESPONSE_WRAPPERS` given `lambda: <call>` first)."""
    top: cst.CSTNode = call
    rest = ancestors
    while len(rest) > 1:
        argument, outer = rest[-1], rest[-2]
        if (
            isinstance(outer, cst.Call)
            and _named(outer) in policy.RESPONSE_PASSED_ON
            and _first(outer) is argument
        ):
            top, rest = outer, rest[:-2]
        elif (
            isinstance(argument, cst.Lambda)
            and argument.body is top
            and len(rest) > 2
            and _wraps(rest[-3], outer, rest[:-3])
        ):
            top, rest = rest[-3], rest[:-3]
        else:
            break
    return top, rest


def _wraps(node: cst.CSTNode, operation: cst.CSTNode, outer: Sequence[cst.CSTNode]) -> bool:
    """Is `node` a call of one of NeMo Gym's wrappers on the agent itself, given `operation` (an
    argument) first? That is `self.<wrapper>(...)` written in the method's own body (`outer` its
    ancestors): called on another object, in a nested function or lambda, or as a function, it is
    not known to be NeMo Gym's."""
    if not (isinstance(node, cst.Call) and _first(node) is operation):
        return False
    func = node.func
    return (
        isinstance(func, cst.Attribute)
        and func.attr.value in policy.RESPONSE_WRAPPERS
        and isinstance(func.value, cst.Name)
        and ident(func.value.value) == _method_self(outer)
    )


def _method_self(outer: Sequence[cst.CSTNode]) -> str | None:
    """The method's `self`, if `outer` (ancestors) ends in the method's own body: not in a nested
    function, lambda or comprehension, where the name may stand for something else."""
    _, self_name, at = enclosing_method(outer)
    return None if any(isinstance(node, _SCOPES) for node in outer[at + 1 :]) else self_name


def _first(call: cst.Call) -> cst.Arg | None:
    """The call's first argument not passed by keyword."""
    return next(iter(_positional(call)), None)


def _assigned(ancestors: Sequence[cst.CSTNode]) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    """The target of `<target> = await <value>` and its binding; `ancestors` end with the value's
    parent."""
    parent = ancestors[-1] if ancestors else None
    holder = ancestors[-2] if isinstance(parent, cst.Await) and len(ancestors) > 1 else parent
    if isinstance(holder, cst.Assign) and len(holder.targets) == 1:
        return holder.targets[0].target, holder.targets[0]
    if isinstance(holder, cst.AnnAssign):
        return holder.target, holder
    return None


def _gathered(ancestors: Sequence[cst.CSTNode]) -> tuple[int, int] | None:
    """The place of the argument `ancestors` end with among the awaitables of `asyncio.gather(...)`
    (or a `gather` imported), when each is passed on its own, and their number."""
    argument, gather = (ancestors[-1], ancestors[-2]) if len(ancestors) > 1 else (None, None)
    if not isinstance(gather, cst.Call) or _named(gather) != "gather":
        return None
    positional = _positional(gather)
    position = next((i for i, a in enumerate(positional) if a is argument), None)
    if position is None or any(a.star for a in positional):
        return None
    return position, len(positional)


def _named(call: cst.Call) -> str | None:
    """The called function's own name: `gather` of `asyncio.gather(...)` and of `gather(...)`."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


def _positional(call: cst.Call) -> list[cst.Arg]:
    """The call's arguments not passed by keyword (`*args` among them, as `ast` has them)."""
    return [a for a in call.args if a.keyword is None and a.star != "**"]


def unreached(
    flows: Flows, method: cst.FunctionDef, nested: Sequence[cst.CSTNode], bound: Bound | None
) -> frozenset[int]:
    """The method's nodes (their ids) that run where the response's binding cannot be current:
    none when the binding is not the method's own, or when something else can rebind the name at
    any time (a `global` or `nonlocal` statement, a nested function's `nonlocal`)."""
    if bound is None or nested:
        return frozenset()
    name = ident(bound[0])
    if any(isinstance(node, (cst.Global, cst.Nonlocal)) for node in flows.own(method, name)):
        return frozenset()
    states, writer = flows.flow(method, name)
    if writer is not None:
        return frozenset()
    return policy.unreached_nodes(states, bound[1], children, _LATER)


def judged(
    call: cst.Call,
    bound: Bound | None,
    ancestors: Sequence[cst.CSTNode],
    walked: Callable[[], list[cst.CSTNode]],
    skipped: Callable[[], frozenset[int]],
    readers: Collection[str],
) -> policy.ResponseUse:
    """Is the response's body streamed (`r.content`), which of its uses does the helper's response
    not serve, and where does it go unfollowed? (`walked`: the method's nodes; `skipped`: see
    `policy.judge_uses`; `readers`: see `policy.passed_on`.)"""
    if bound is None:
        unbound = policy.passed_on(_unbound(call, ancestors), readers)
        return None, policy.unserved(_chained(ancestors)), unbound
    response = bound[0]

    def read(nodes: list[cst.CSTNode]) -> policy.ResponseUse:
        uses = policy.unserved(_uses(response, nodes))
        return _streamed(response, nodes), uses, policy.passed_on(_passed_on(response, nodes), readers)

    return policy.judge_uses(walked(), read, skipped)


def _chained(ancestors: Sequence[cst.CSTNode]) -> Iterator[tuple[str, str, bool, bool]]:
    """A use on the awaited call itself (`(await <call>).json()`)."""
    chained = ancestors[-2] if len(ancestors) > 1 and isinstance(ancestors[-1], cst.Await) else None
    if isinstance(chained, cst.Attribute):
        call = ancestors[-3] if len(ancestors) > 2 else None
        called = isinstance(call, cst.Call) and call.func is chained
        awaited = called and len(ancestors) > 3 and isinstance(ancestors[-4], cst.Await)
        yield policy.AWAITED, chained.attr.value, called, awaited


def _unbound(call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> Iterator[tuple[str, str, str | None]]:
    """Where the awaited response goes when no name holds it (`return await <call>`, `f(await
    <call>)`, `self.last = await <call>`), also through `wait_for`, `shield` or `gather`: nowhere
    when it is dropped (`await <call>;`) or a member of it read (see `_chained`). A call not
    awaited where it stands goes where its response is not followed (see `_unawaited`)."""
    top, rest = _given(call, ancestors)
    while _gathered(rest) is not None:
        top, rest = _given(rest[-2], rest[:-2])  # type: ignore[arg-type]
    if rest and not isinstance(rest[-1], cst.Await):
        yield from _unawaited(call, top, rest)
        return
    if len(rest) < 2:
        return
    holder = rest[-2]
    if isinstance(holder, cst.Expr) or (top is call and isinstance(holder, cst.Attribute)):
        return
    yield _held(rest[:-1], policy.AWAITED, alone=True)


def _unawaited(
    call: cst.Call, top: cst.CSTNode, rest: Sequence[cst.CSTNode]
) -> Iterator[tuple[str, str, str | None]]:
    """Where a call not awaited where it stands goes (`create_task(<call>)`, `[<call>, ...]`,
    `retry(lambda: <call>)`, `return <call>`): awaited elsewhere, its response is not followed.
    Nowhere when it is dropped (`<call>;`), which sends nothing."""
    if isinstance(rest[-1], cst.Lambda) and rest[-1].body is top and len(rest) > 1:
        rest = rest[:-1]
    if not isinstance(rest[-1], cst.Expr):
        name = dotted_name(call.func)
        yield _held(rest, policy.unawaited(ident(name) if name else None), alone=False)


def _held(rest: Sequence[cst.CSTNode], response: str, alone: bool) -> tuple[str, str, str | None]:
    """Where the value whose ancestors are `rest` goes, as `policy.passed_on` reads it: an argument
    of a call (`alone`: may it count as the only one), returned, yielded, or a value otherwise."""
    holder = rest[-1]
    if isinstance(holder, cst.Arg) and not holder.star and len(rest) > 1:
        outer = rest[-2]
        single = alone and len(outer.args) == 1 and holder.keyword is None  # type: ignore[attr-defined]
        callee = dotted_name(outer.func)  # type: ignore[attr-defined]
        return response, "alone" if single else "argument", ident(callee) if callee else None
    if isinstance(holder, (cst.Return, cst.Yield)):
        return response, type(holder).__name__.lower(), None
    return response, "value", None


def _streamed(response: str, nodes: list[cst.CSTNode]) -> str | None:
    """`r.content.iter_chunked(...)` and the like on the response bound to `r`."""
    uses = reads = 0  # `r.content`, and `r.content.read` among them
    for node in nodes:
        if isinstance(node, cst.Attribute):
            if _is_content(node, response):
                uses += 1
            elif node.attr.value == "read" and _is_content(node.value, response):
                reads += 1
    return f"{response}.content" if uses > reads else None


def _uses(response: str, nodes: list[cst.CSTNode]) -> Iterator[tuple[str, str, bool, bool]]:
    """The uses of the response through the name it is bound to, each `(response, member,
    called, awaited)`."""
    called = {id(n.func) for n in nodes if isinstance(n, cst.Call)}
    awaited = {
        id(n.expression.func)
        for n in nodes
        if isinstance(n, cst.Await) and isinstance(n.expression, cst.Call)
    }
    for node in nodes:
        if (
            isinstance(node, cst.Attribute)
            and isinstance(node.value, cst.Name)
            and node.value.value == response
        ):
            yield response, node.attr.value, id(node) in called, id(node) in awaited
        elif isinstance(node, cst.Call) and (member := _queried(node, response)) is not None:
            yield response, member, id(node) in called, id(node) in awaited


def _queried(call: cst.Call, response: str) -> str | None:
    """The member `getattr(r, "member", ...)` or `hasattr(r, "member")` reads of the response."""
    func, args = call.func, call.args
    if not (isinstance(func, cst.Name) and func.value in policy.MEMBER_QUERIES and len(args) >= 2):
        return None
    if any(a.keyword is not None or a.star for a in args):
        return None
    subject, member = args[0].value, args[1].value
    if not (isinstance(subject, cst.Name) and subject.value == response):
        return None
    value = member.evaluated_value if isinstance(member, (cst.SimpleString, cst.ConcatenatedString)) else None
    return value if isinstance(value, str) else None


def _is_content(node: cst.CSTNode, name: str) -> bool:
    """`name.content`, as the matcher `Attribute(value=Name(name), attr=Name("content"))` reads it."""
    return (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == name
        and node.attr.value == "content"
    )


# Names that are no variable: an attribute's, a keyword's, a `global` / `nonlocal` statement's,
# a class pattern's keyword, a type parameter's
_NAMING = {
    cst.Attribute: "attr",
    cst.Arg: "keyword",
    cst.NameItem: "name",
    cst.MatchKeywordElement: "key",
    cst.TypeVar: "name",
    cst.TypeVarTuple: "name",
    cst.ParamSpec: "name",
}


def _passed_on(response: str, nodes: list[cst.CSTNode]) -> Iterator[tuple[str, str, str | None]]:
    """The uses of the name itself, not of a member (`f(r)`, `return r`, `x = r`), each
    `(response, holder, callee)` as `policy.passed_on` reads them. libcst's names carry no
    context: the names a node binds, an import's, and those in `_NAMING` are not read."""
    names = {id(n) for n in nodes if type(n) is cst.Name and n.value == response}
    held: dict[int, tuple[str, str | None]] = {}
    for node in nodes:
        kind = type(node)
        if kind in _NAMING:
            held[id(getattr(node, _NAMING[kind]))] = "member", None
        if kind is cst.Attribute:
            held[id(node.value)] = "member", None  # type: ignore[attr-defined]
        elif kind is cst.Call and _queried(node, response) is not None:  # type: ignore[arg-type]
            held[id(node.args[0].value)] = "member", None  # type: ignore[attr-defined]
        elif kind is cst.Call:
            arguments = [a.value for a in node.args if not a.star]  # type: ignore[attr-defined]
            if any(id(argument) in names for argument in arguments):
                alone = len(node.args) == 1 and node.args[0].keyword is None  # type: ignore[attr-defined]
                callee = dotted_name(node.func)  # type: ignore[attr-defined]
                holder = "alone" if alone else "argument", ident(callee) if callee else None
                held.update((id(argument), holder) for argument in arguments)
        elif kind in (cst.Return, cst.Yield) and id(node.value) in names:  # type: ignore[attr-defined]
            held[id(node.value)] = kind.__name__.lower(), None  # type: ignore[attr-defined]
        elif kind in (cst.Import, cst.ImportFrom):
            held.update((id(name), ("member", None)) for name in descendants(node))
        else:
            stack = [target(node)]
            while stack:
                bound = stack.pop()
                if isinstance(bound, cst.Name):
                    held[id(bound)] = "member", None
                elif isinstance(bound, (cst.Tuple, cst.List)):
                    stack += [element.value for element in bound.elements]
                elif isinstance(bound, cst.StarredElement):
                    stack.append(bound.value)
    for name in names:
        holder, callee = held.get(name, ("value", None))
        if holder != "member":
            yield response, holder, callee

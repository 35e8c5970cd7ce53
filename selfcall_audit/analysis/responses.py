"""How the response of a self-call is used, read with Python's own `ast` (`migrate.responses` reads
the same on libcst's tree for `fix`): streamed through `r.content`, through uses the helper's
response does not serve (`policy.unserved` decides which), or passed on where its uses are not
followed (`policy.passed_on`). A use counts where the response's binding can reach it: once the
name is bound again (`r = await r.json()`), what it holds is not the response."""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection, Iterator, Sequence

from . import policy
from .calls import dotted_source
from .names import COMPREHENSIONS, FUNCTIONS, enclosing_method, ident
from .reaching import Flows

Bound = tuple[str, ast.AST]  # the name the response is bound to, and the statement binding it
_LATER = (*FUNCTIONS, ast.ClassDef, ast.Lambda)  # what runs inside may run after any binding
_SCOPES = (*_LATER, *COMPREHENSIONS)


def bound_response(call: ast.Call, ancestors: Sequence[ast.AST]) -> Bound | None:
    """The name the call's response is bound to, and the binding: by `r = await <call>` (also
    through what passes it on, see `_given`), or by `a, r = await asyncio.gather(<other>, <call>)`."""
    top, rest = _given(call, ancestors)
    gathered = _gathered(top, rest[-1]) if rest else None
    assigned = _assigned(rest if gathered is None else rest[:-1])
    if assigned is None:
        return None
    target, holder = assigned
    if gathered is not None:
        position, count = gathered
        elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else []
        target = elements[position] if len(elements) == count else None
    return (target.id, holder) if isinstance(target, ast.Name) else None


def _given(call: ast.Call, ancestors: Sequence[ast.AST]) -> tuple[ast.AST, Sequence[ast.AST]]:
    """What gives the call's response once awaited, and its ancestors: the call itself, or what
    passes it on (`asyncio.wait_for(<call>, ...)`, `asyncio.shield(<call>)`, one of NeMo Gym's
    `policy.RESPONSE_WRAPPERS` given `lambda: <call>` first)."""
    top: ast.AST = call
    rest = ancestors
    while rest:
        parent = rest[-1]
        if (
            isinstance(parent, ast.Call)
            and _named(parent) in policy.RESPONSE_PASSED_ON
            and parent.args
            and parent.args[0] is top
        ):
            top, rest = parent, rest[:-1]
        elif (
            isinstance(parent, ast.Lambda)
            and parent.body is top
            and len(rest) > 1
            and _wraps(rest[-2], parent, rest[:-2])
        ):
            top, rest = rest[-2], rest[:-2]
        else:
            break
    return top, rest


def wrapped_by(call: ast.Call, ancestors: Sequence[ast.AST]) -> tuple[str, ...]:
    """NeMo Gym's wrappers the call's response comes back through (`policy.RESPONSE_WRAPPERS`):
    what they do with it is known only while they are NeMo Gym's own, which the agents' classes
    decide (`policy.overridden_wrapper`)."""
    _, rest = _given(call, ancestors)
    climbed = ancestors[len(rest) :]
    return tuple(
        name
        for node in climbed
        if isinstance(node, ast.Call) and (name := _named(node)) in policy.RESPONSE_WRAPPERS
    )


def _wraps(node: ast.AST, operation: ast.Lambda, outer: Sequence[ast.AST]) -> bool:
    """Is `node` a call of one of NeMo Gym's wrappers on the agent itself, given `operation` first?
    That is `self.<wrapper>(...)` written in the method's own body (`outer` its ancestors): called
    on another object, in a nested function or lambda, or as a function, it is not known to be
    NeMo Gym's."""
    if not (isinstance(node, ast.Call) and node.args and node.args[0] is operation):
        return False
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr in policy.RESPONSE_WRAPPERS
        and isinstance(func.value, ast.Name)
        and ident(func.value.id) == _method_self(outer)
    )


def _method_self(outer: Sequence[ast.AST]) -> str | None:
    """The method's `self`, if `outer` (ancestors) ends in the method's own body: not in a nested
    function, lambda or comprehension, where the name may stand for something else."""
    _, self_name, at = enclosing_method(outer)
    return None if any(isinstance(node, _SCOPES) for node in outer[at + 1 :]) else self_name


def _assigned(ancestors: Sequence[ast.AST]) -> tuple[ast.AST, ast.AST] | None:
    """The target of `<target> = await <value>` and the assignment; `ancestors` end with the
    value's parent."""
    parent = ancestors[-1] if ancestors else None
    holder = ancestors[-2] if isinstance(parent, ast.Await) and len(ancestors) > 1 else parent
    if isinstance(holder, ast.Assign) and len(holder.targets) == 1:
        return holder.targets[0], holder
    if isinstance(holder, ast.AnnAssign):
        return holder.target, holder
    return None


def _gathered(call: ast.AST, parent: ast.AST) -> tuple[int, int] | None:
    """The call's place among the awaitables of `asyncio.gather(...)` (or a `gather` imported),
    when each is passed on its own, and their number."""
    if not isinstance(parent, ast.Call) or _named(parent) != "gather":
        return None
    position = next((i for i, argument in enumerate(parent.args) if argument is call), None)
    if position is None or any(isinstance(a, ast.Starred) for a in parent.args):
        return None
    return position, len(parent.args)


def _named(call: ast.Call) -> str | None:
    """The called function's own name: `gather` of `asyncio.gather(...)` and of `gather(...)`."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def unreached(
    flows: Flows, method: ast.AST, nested: Sequence[ast.AST], bound: Bound | None
) -> frozenset[int]:
    """The method's nodes (their ids) that run where the response's binding cannot be current:
    none when the binding is not the method's own, or when something else can rebind the name at
    any time (a `global` or `nonlocal` statement, a nested function's `nonlocal`)."""
    if bound is None or nested:
        return frozenset()
    name = ident(bound[0])
    if any(isinstance(node, (ast.Global, ast.Nonlocal)) for node in flows.own(method, name)):
        return frozenset()
    states, writer = flows.flow(method, name)
    if writer is not None:
        return frozenset()
    return policy.unreached_nodes(states, bound[1], ast.iter_child_nodes, _LATER)


def judged(
    call: ast.Call,
    bound: Bound | None,
    ancestors: Sequence[ast.AST],
    walked: Callable[[], list[ast.AST]],
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

    def read(nodes: list[ast.AST]) -> policy.ResponseUse:
        uses = policy.unserved(_uses(response, nodes))
        return _streamed(response, nodes), uses, policy.passed_on(_passed_on(response, nodes), readers)

    return policy.judge_uses(walked(), read, skipped)


def _chained(ancestors: Sequence[ast.AST]) -> Iterator[tuple[str, str, bool, bool]]:
    """A use on the awaited call itself (`(await <call>).json()`)."""
    chained = ancestors[-2] if len(ancestors) > 1 and isinstance(ancestors[-1], ast.Await) else None
    if isinstance(chained, ast.Attribute):
        call = ancestors[-3] if len(ancestors) > 2 else None
        called = isinstance(call, ast.Call) and call.func is chained
        yield (
            policy.AWAITED,
            chained.attr,
            called,
            called and len(ancestors) > 3 and isinstance(ancestors[-4], ast.Await),
        )


def _unbound(call: ast.Call, ancestors: Sequence[ast.AST]) -> Iterator[tuple[str, str, str | None]]:
    """Where the awaited response goes when no name holds it (`return await <call>`, `f(await
    <call>)`, `self.last = await <call>`), also through `wait_for`, `shield` or `gather`: nowhere
    when it is dropped (`await <call>;`) or a member of it read (see `_chained`). A call not
    awaited where it stands goes where its response is not followed (see `_unawaited`)."""
    top, rest = _given(call, ancestors)
    while rest and _gathered(top, rest[-1]) is not None:
        top, rest = _given(rest[-1], rest[:-1])  # type: ignore[arg-type]
    if rest and not isinstance(rest[-1], ast.Await):
        yield from _unawaited(call, top, rest)
        return
    if len(rest) < 2:
        return
    holder = rest[-2]
    if isinstance(holder, ast.Expr) or (top is call and isinstance(holder, ast.Attribute)):
        return
    yield _held(rest[-1], rest[:-1], policy.AWAITED, alone=True)


def _unawaited(
    call: ast.Call, top: ast.AST, rest: Sequence[ast.AST]
) -> Iterator[tuple[str, str, str | None]]:
    """Where a call not awaited where it stands goes (`create_task(<call>)`, `[<call>, ...]`,
    `retry(lambda: <call>)`, `return <call>`): awaited elsewhere, its response is not followed.
    Nowhere when it is dropped (`<call>;`), which sends nothing."""
    if isinstance(rest[-1], ast.Lambda) and rest[-1].body is top and len(rest) > 1:
        top, rest = rest[-1], rest[:-1]
    if not isinstance(rest[-1], ast.Expr):
        yield _held(top, rest, policy.unawaited(dotted_source(call.func)), alone=False)


def _held(value: ast.AST, rest: Sequence[ast.AST], response: str, alone: bool) -> tuple[str, str, str | None]:
    """Where `value` goes (`rest`: its ancestors), as `policy.passed_on` reads it: an argument of
    a call (`alone`: may it count as the only one), returned, yielded, or a value otherwise."""
    holder = rest[-1]
    if isinstance(holder, ast.keyword) and holder.arg is not None and len(rest) > 1:
        return response, "argument", dotted_source(rest[-2].func)  # type: ignore[attr-defined]
    if isinstance(holder, ast.Call) and holder.func is not value:
        single = alone and len(holder.args) == 1 and not holder.keywords
        return response, "alone" if single else "argument", dotted_source(holder.func)
    if isinstance(holder, (ast.Return, ast.Yield)):
        return response, type(holder).__name__.lower(), None
    return response, "value", None


def _streamed(response: str, nodes: list[ast.AST]) -> str | None:
    """`r.content.iter_chunked(...)` and the like on the response bound to `r`."""

    def content(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "content"
            and isinstance(node.value, ast.Name)
            and node.value.id == response
        )

    read = [node for node in nodes if isinstance(node, ast.Attribute)]
    reads = sum(n.attr == "read" and content(n.value) for n in read)
    if sum(content(n) for n in read) > reads:
        return f"{response}.content"
    return None


def _uses(response: str, nodes: list[ast.AST]) -> Iterator[tuple[str, str, bool, bool]]:
    """The uses of the response through the name it is bound to, each `(response, member,
    called, awaited)`."""
    called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    awaited = {id(n.value.func) for n in nodes if isinstance(n, ast.Await) and isinstance(n.value, ast.Call)}
    for node in nodes:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == response:
            yield response, node.attr, id(node) in called, id(node) in awaited
        elif isinstance(node, ast.Call) and (member := _queried(node, response)) is not None:
            yield response, member, id(node) in called, id(node) in awaited


def _queried(call: ast.Call, response: str) -> str | None:
    """The member `getattr(r, "member", ...)` or `hasattr(r, "member")` reads of the response."""
    func, args = call.func, call.args
    if not (
        isinstance(func, ast.Name)
        and func.id in policy.MEMBER_QUERIES
        and len(args) >= 2
        and not call.keywords
    ):
        return None
    subject, member = args[0], args[1]
    if not (isinstance(subject, ast.Name) and subject.id == response):
        return None
    value = member.value if isinstance(member, ast.Constant) else None
    return value if isinstance(value, str) else None


def _passed_on(response: str, nodes: list[ast.AST]) -> Iterator[tuple[str, str, str | None]]:
    """The uses of the name itself, not of a member (`f(r)`, `return r`, `x = r`), each
    `(response, holder, callee)` as `policy.passed_on` reads them."""
    reads = {id(n) for n in nodes if type(n) is ast.Name and n.id == response and type(n.ctx) is ast.Load}
    held: dict[int, tuple[str, str | None]] = {}
    for node in nodes:
        kind = type(node)
        if kind is ast.Attribute:
            if id(node.value) in reads:  # type: ignore[attr-defined]
                held[id(node.value)] = "member", None  # type: ignore[attr-defined]
        elif kind is ast.Call and _queried(node, response) is not None:  # type: ignore[arg-type]
            held[id(node.args[0])] = "member", None  # type: ignore[attr-defined]
        elif kind is ast.Call:
            arguments = [*node.args, *(k.value for k in node.keywords if k.arg is not None)]  # type: ignore[attr-defined]
            if any(id(argument) in reads for argument in arguments):
                alone = len(node.args) == 1 and not node.keywords  # type: ignore[attr-defined]
                callee = dotted_source(node.func)  # type: ignore[attr-defined]
                held.update((id(a), ("alone" if alone else "argument", callee)) for a in arguments)
        elif kind in (ast.Return, ast.Yield) and id(node.value) in reads:  # type: ignore[attr-defined]
            held[id(node.value)] = kind.__name__.lower(), None  # type: ignore[attr-defined]
    for read in reads:
        holder, callee = held.get(read, ("value", None))
        if holder != "member":
            yield response, holder, callee

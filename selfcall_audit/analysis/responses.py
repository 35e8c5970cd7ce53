"""How the response of a self-call is used, read with Python's own `ast` (`migrate.scope` reads the
same on libcst's tree for `fix`): streamed through `r.content`, or through uses the helper's
response does not serve (`policy.unserved` decides which)."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Sequence


def bound_response(ancestors: Sequence[ast.AST]) -> str | None:
    """The name the call's response is bound to by `r = await <call>`, if it is."""
    parent = ancestors[-1]
    holder = ancestors[-2] if isinstance(parent, ast.Await) and len(ancestors) > 1 else parent
    if isinstance(holder, ast.Assign) and len(holder.targets) == 1:
        target = holder.targets[0]
    elif isinstance(holder, ast.AnnAssign):
        target = holder.target
    else:
        return None
    return target.id if isinstance(target, ast.Name) else None


def streamed(response: str | None, attributes: Callable[[], list[ast.Attribute]]) -> str | None:
    """`r.content.iter_chunked(...)` and the like on the response bound to `r`."""
    if response is None:
        return None

    def content(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "content"
            and isinstance(node.value, ast.Name)
            and node.value.id == response
        )

    read = attributes()  # the method's attribute reads: walked only for a response bound to a name
    reads = sum(n.attr == "read" and content(n.value) for n in read)
    if sum(content(n) for n in read) > reads:
        return f"{response}.content"
    return None


def response_uses(
    response: str | None, ancestors: Sequence[ast.AST], walked: Callable[[], list[ast.AST]]
) -> Iterator[tuple[str, str, bool, bool]]:
    """The uses of the call's response (see `policy.unserved`): through the name it is bound to,
    or on the awaited call itself (`(await <call>).json()`)."""
    if response is None:
        chained = ancestors[-2] if len(ancestors) > 1 and isinstance(ancestors[-1], ast.Await) else None
        if isinstance(chained, ast.Attribute):
            call = ancestors[-3] if len(ancestors) > 2 else None
            called = isinstance(call, ast.Call) and call.func is chained
            yield (
                "(await ...)",
                chained.attr,
                called,
                called and len(ancestors) > 3 and isinstance(ancestors[-4], ast.Await),
            )
        return
    nodes = walked()
    called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    awaited = {id(n.value.func) for n in nodes if isinstance(n, ast.Await) and isinstance(n.value, ast.Call)}
    for node in nodes:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == response:
            yield response, node.attr, id(node) in called, id(node) in awaited

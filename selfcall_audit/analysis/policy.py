"""The rewrite policy: when a self-call may become a call of the in-process helper, and why not.

The one place these rules live. The analysis asks `blocker(description)` to tell whether a
finding is fixable; `fix` asks the same question, then `site_blocker(site)` for what only the
syntax tree around the call shows (a rebound `self`, a name the helper would collide with).
This module imports nothing but the value types: a scan can use it without libcst.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ftypes import CallArgument, CallDescription

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..ftypes import ArgumentRole

# Positional parameters of the server client's methods, in order.
SIGNATURES: dict[str, tuple[ArgumentRole, ...]] = {
    "post": ("server_name", "url_path"),
    "request": ("server_name", "url_path", "method"),
}
# What the in-process helper takes (kept as written), and what the rewrite drops.
KEPT_ROLES: frozenset[str] = frozenset({"url_path", "json", "cookies", "headers"})
DROPPED_ROLES: frozenset[str] = frozenset({"server_name", "method"})
_NAMED_ROLES = KEPT_ROLES | DROPPED_ROLES


def role_of(client_method: str, index: int, keyword: str | None) -> ArgumentRole:
    """What the server client's `client_method` does with the argument at `index` / `keyword`."""
    if keyword is None:
        signature = SIGNATURES.get(client_method, ())  # an unknown method: no positional parameters
        return signature[index] if index < len(signature) else "other"
    if keyword == "method" and client_method == "post":
        return "other"  # `.post(method=...)`: not a parameter the helper could drop
    return keyword if keyword in _NAMED_ROLES else "other"  # type: ignore[return-value]


def blocker(call: CallDescription) -> str | None:
    """Why the described call cannot be rewritten, or None when it can."""
    receiver = call.receiver
    match receiver.kind:
        case "partial":
            return "the call goes through functools.partial"
        case "helper":
            return f"the call goes through the helper `{receiver.text}()`"
    if receiver.client_method not in SIGNATURES and not (
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
        reason = _argument_blocker(argument)
        if reason is not None:
            return reason
    roles = {argument.role for argument in call.arguments}
    if not {"server_name", "url_path"} <= roles:
        return "it does not name both the server and the url path"
    if call.self_name is None:
        return "the call is not inside a method that has `self`"
    return None


def _argument_blocker(argument: CallArgument) -> str | None:
    if argument.star:
        return f"arguments come from a `{argument.star}` expansion: rewrite the call by hand"
    if argument.role != "other":
        return None
    if argument.keyword is None:
        return "it passes positional arguments the in-process helper does not take"
    return f"the in-process helper takes no `{argument.keyword}` argument"


@dataclass(frozen=True)
class Site:
    """What the syntax tree around one call shows that the description does not.

    `self_rebinding` / `helper_binding`: the line of a statement that rebinds the method's `self`
    before the call, or binds the helper's name where the call would see it; `walrus`: names a
    `:=` in a removed part of the call binds; `dropped_call`: a call (or `await`) in a removed part,
    which would no longer run; `streamed`: the response expression whose body is
    read as a stream."""

    callee: str
    self_name: str
    self_rebinding: int | None = None
    self_shadowed: bool = False
    helper_binding: int | None = None
    walrus: tuple[str, ...] = ()
    dropped_call: str | None = None
    streamed: str | None = None


def site_blocker(site: Site) -> str | None:
    """Why the call, where it stands, cannot be rewritten without changing what the code does."""
    if site.self_shadowed:
        return f"`{site.self_name}` at the call is not the method's own (a nested function, lambda or comprehension binds it)"
    if site.self_rebinding is not None:
        return f"`{site.self_name}` is rebound in the method (line {site.self_rebinding}); the helper needs the agent itself"
    if site.walrus:
        names = ", ".join(f"`{name}`" for name in site.walrus)
        return f"the call binds {names} with `:=` in a part the rewrite removes"
    if site.dropped_call is not None:
        return f"the server name or client comes from `{site.dropped_call}`, which the rewrite would no longer run"
    if site.helper_binding is not None:
        return (
            f"`{site.callee}` already names something else here (line {site.helper_binding}); "
            "choose the helper's name with --helper MODULE:NAME"
        )
    if site.streamed:
        return f"the response body is streamed (`{site.streamed}`); the in-process helper buffers it"
    return None

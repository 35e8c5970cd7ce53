"""Value types of the analysis' results: findings, their evidence, agents and unreadable inputs.

Named tuples: every run loads this module, and a frozen dataclass costs about 1 ms to define
against a tenth of that (`benchmarks/README.md`). Changed copies come from `_replace`. Their
annotations are evaluated as the classes are made, not postponed: `NamedTuple` compiles each
field's annotation written as a string, which cost every run 3 ms here."""

from collections.abc import Callable
from pathlib import Path
from typing import Literal, NamedTuple

from .rules import UNREADABLE

# The words each kind of value may be.
ArgumentRole = Literal["server_name", "url_path", "method", "json", "cookies", "headers", "other"]
ReceiverKind = Literal["self_attribute", "alias", "bound_method", "partial", "helper"]
CallContext = Literal["expression", "with", "default", "decorator"]
# What is wrong with an input: "syntax" (a Python file that does not parse: syntax error, null
# bytes, undecodable), "unreadable" (cannot be opened or listed, not a regular file, vanished),
# "too_large" (over max-file-size), "too_deep" (nested past what can be parsed or analysed),
# "yaml" (a config that cannot be loaded), "config_paths" (an entry naming no file it can
# read), "internal" (a bug of ours while analysing the file).
ErrorKind = Literal["syntax", "unreadable", "too_large", "too_deep", "yaml", "config_paths", "internal"]
# What an evidence line shows: "bound" (a name is bound here), "defined" (a constant or class
# attribute), "property" (a property is defined here), "registered" (a route is registered
# here), "runs_agent" (a YAML instance runs the agent), "routes_back" (a YAML instance routes a
# config reference back to itself), "runs_in" (the agent a base class's code runs in),
# "through" (the helper whose call at this line the finding's call goes through).
EvidenceKind = Literal[
    "bound", "defined", "property", "registered", "runs_agent", "routes_back", "runs_in", "through"
]
# Why a possible self-call (SCA003) is only possible: "server" (the name of the server it
# posts the route to cannot be resolved statically), "target" (the analysis stopped at a limit
# following the server name: any path would make it a self-call), "path" (it stopped following
# a path that may be the route), "method" (a call to the agent's own route whose HTTP method
# cannot be resolved).
Doubt = Literal["server", "target", "path", "method"]
# How a vendored helper (SCA004) differs from the tool's: "edited" since it was written, or
# "outdated" (written by another version).
Staleness = Literal["edited", "outdated"]
# How a class is known to be an agent: "base" (it derives from a configured agent base),
# "route" (its server setup, or a base's, registers the agent route), "configured" (neither
# shows in the code the analysis read: a configured base named it).
Recognition = Literal["base", "route", "configured"]
# Why a self-call is not rewritten (`report.messages` words each kind). From its description:
# "partial", "through_helper", "not_a_post", "async_with", "in_default", "in_decorator",
# "passed_twice", "expanded_key", "star_expansion", "positional", "keyword", "no_server_or_path",
# "outside_method"; from the configs: "other_instances"; from the agent's classes: "helper_overridden",
# "app_not_recorded", "wrapper_overridden" (with the tree around the call); from the tree around the
# call alone (`fix` reads it again): the others.
BlockerKind = Literal[
    "partial",
    "through_helper",
    "helper_positional",
    "helper_keyword",
    "helper_expansion",
    "helper_default",
    "helper_overridden",
    "not_a_post",
    "async_with",
    "in_default",
    "in_decorator",
    "passed_twice",
    "expanded_key",
    "star_expansion",
    "positional",
    "keyword",
    "no_server_or_path",
    "outside_method",
    "other_instances",
    "app_not_recorded",
    "not_found",
    "not_described",
    "self_shadowed",
    "self_rebound",
    "walrus_in_removed_part",
    "call_in_removed_part",
    "helper_name_taken",
    "streamed",
    "response_use",
    "response_passed_on",
    "wrapper_overridden",
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


class Progress:
    """How far a run has come, for a display (the command line's, on a terminal); this one tells
    nobody. A run goes through phases, named as a user of ruff would name them (`listing files`,
    `parsing`, `resolving agents`, `planning rewrites`, `rewriting`, ...), some counting files."""

    def phase(self, name: str) -> None:
        """The run enters the phase `name`; what it counts is counted from 0 again."""

    def __call__(self, path: str, done: int, total: int) -> None:
        """`path` is done, the `done`-th of `total` in the current batch (a phase may count several
        batches one after the other, each from 1: they add up)."""


class Evidence(NamedTuple):
    """A line that shows why a finding holds: what it shows is `kind`, about `name` (and `key`),
    worded by `report.messages.note`."""

    path: str
    line: int
    kind: EvidenceKind
    name: str  # the name bound or defined, the route registered, the instance, agent or helper
    key: str = ""  # "routes_back": the config reference that names the instance itself


class CallArgument(NamedTuple):
    """One argument of a self-call as written, and what the server client does with it."""

    index: int  # place in the call's argument list as written, from 0
    role: ArgumentRole  # "other": an argument the in-process helper does not take
    keyword: str | None = None  # None: positional (or a star expansion)
    star: str = ""  # "*" or "**" for an expansion, whose role is "other"
    text: str = ""  # for the roles that say where the call goes, the argument as Python reads it
    keys: tuple[str, ...] | None = None  # what a `**` expansion passes, when the code shows it all


class CallReceiver(NamedTuple):
    """What the call is made on: `self.server_client.post`, `client.post` (an alias of the
    client), `post` (a bound method kept in a local), a `functools.partial` of one, or an agent
    method or function that forwards to the client."""

    kind: ReceiverKind
    client_method: str  # the server client's method: "post", "request", ...
    text: str  # the callee as written, dotted: "self.server_client.post", "client.post", "post"
    # a helper that only passes its parameters on, by name, to `self.server_client.post`: the
    # arguments' roles are those it gives them
    forwards: bool = False
    # a parameter such a helper forwards that the call leaves to a default other than None
    unpassed: str = ""


class LocalBinding(NamedTuple):
    """A statement of the enclosing function the call reads through: `config = self.config`,
    `client = self.server_client`, `post = client.post`. `feeds` is the part of the call that
    reads it ("receiver" or an argument role): a binding that feeds only parts the rewrite drops
    may become unused."""

    name: str
    line: int
    feeds: str


class Blocker(NamedTuple):
    """Why a self-call is left alone: a kind the code can test, and the name, names and line it
    is about (`report.messages.reason` words it)."""

    kind: BlockerKind
    name: str = ""
    line: int | None = None
    names: tuple[str, ...] = ()  # "walrus_in_removed_part", "other_instances": each name it is about


class CallDescription(NamedTuple):
    """A self-call as the analysis resolved it, for the codemod: who receives it, the role of each
    argument, the local bindings it depends on, and whether it can be rewritten (`blocker` None)
    or why not."""

    receiver: CallReceiver
    arguments: tuple[CallArgument, ...]
    bindings: tuple[LocalBinding, ...] = ()
    self_name: str | None = None  # the enclosing method's first parameter; None outside a method
    context: CallContext = "expression"  # "with": the response is an async context manager
    blocker: Blocker | None = None
    # why the syntax tree around the call stops a rewrite (`policy.site_blocker`, read with `ast`):
    # `fix` decides it again on its own tree, with the helper it was given
    at_site: Blocker | None = None
    # how the call's module names NeMo Gym's readers of a response (`policy.reader_spellings`), by
    # its imports: the response passed alone to one of them goes nowhere unfollowed
    readers: tuple[str, ...] = ()

    def argument(self, role: ArgumentRole) -> CallArgument | None:
        return next((a for a in self.arguments if a.role == role), None)


class Finding(NamedTuple):
    """One reported call, as data: reporters word it from its rule's message template
    (`report.messages`), so that the same finding reads the same in every format."""

    code: str
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    agent: str
    method: str
    fixable: bool = False
    evidence: tuple[Evidence, ...] = ()
    fix_blocker: Blocker | None = None
    call: CallDescription | None = None  # filled for SCA001 findings; what `fix` rewrites from
    config: Evidence | None = None  # the YAML reference that makes the target the agent itself
    # The rule's subject, as data (`report.messages` words it):
    routes: tuple[str, ...] = ()  # SCA001-SCA003: the routes the call may reach, or its paths as written
    http_method: str | None = None  # SCA002: the method of a call to the agent's route, when not POST
    unresolved: bool = False  # SCA002: the path cannot be resolved statically (`routes`: its shapes)
    doubt: Doubt | None = None  # SCA003: what cannot be resolved
    stale: Staleness | None = None  # SCA004: how the vendored copy differs
    stale_version: str = ""  # SCA004: the version of selfcall-audit that wrote the copy
    # the bound of the analysis (a field of `analysis.limits.Limits`) that stopped it following the
    # call's target or path: the finding is what could still be told, not the whole answer
    limit: str | None = None

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.column, self.code)

    def moved(self, move: Callable[[str], str]) -> "Finding":
        """The finding with every path it names seen from elsewhere (a monorepo's top, the
        current folder): its file, its evidence and its config reference."""
        return self._replace(
            path=move(self.path),
            evidence=tuple(e._replace(path=move(e.path)) for e in self.evidence),
            config=self.config._replace(path=move(self.config.path)) if self.config else None,
        )


class AgentInfo(NamedTuple):
    name: str
    path: str
    line: int
    bases: tuple[str, ...]
    instances: tuple[str, ...]
    recognised: Recognition = "configured"  # how the class is known to be an agent
    via: str = ""  # "base": the configured base's name; "route": the file that registers the route
    via_line: int = 0  # "route": the line that registers it


class InputError(NamedTuple):
    """A file or config the analysis could not use (SCA900), with where in it the problem is."""

    path: str
    message: str
    kind: ErrorKind = "unreadable"
    line: int = 1
    column: int = 1
    code: str = UNREADABLE
    fails: bool = False  # fails the gate: set for the run by `gated`

    @property
    def severity(self) -> str:
        """ "error" when the entry fails the gate, "warning" otherwise: as every reporter shows it."""
        return "error" if self.fails else "warning"

    def gated(self, strict: bool) -> "InputError":
        """The entry as a run with this strictness judges it: a Python file that does not parse
        fails the gate (a self-call in it would go unseen, and ruff fails it too); any other entry
        fails it only under `strict`."""
        return self._replace(fails=strict or self.kind == "syntax")

    def joined(self, other: "InputError") -> "InputError":
        """One entry for two problems of the same file (a config with two bad `config_paths`)."""
        if other.message in self.message:
            return self
        return self._replace(message=f"{self.message}; {other.message}")


class Report(NamedTuple):
    """What an analysis of one or more projects found: the one result every front end reads."""

    root: Path
    findings: list[Finding]
    errors: list[InputError]
    files_scanned: int
    files_parsed: int
    agent_count: int
    agents: list[AgentInfo]  # filled by `analyze(inventory=True)`
    seconds: float
    suppressed: int = 0
    baseline_stale: tuple[dict, ...] = ()
    projects: tuple[Path, ...] = ()  # roots of the nested projects in scope, analysed on their own
    inputs_failed: bool = False  # an SCA900 entry fails the gate (see `InputError.gated`)
    excluded: tuple[str, ...] = ()  # paths asked about that hold only excluded Python files
    # the Python a project requires, when it is newer than the one running and some of its Python
    # files could not be parsed: they may use newer syntax, and the run must fail, not pass
    needs_python: tuple[int, int] | None = None


class Analysis(NamedTuple):
    """What a run found before selection and scoping: the part a snapshot can keep."""

    findings: list[Finding]  # every rule, `noqa` already applied
    suppressed: int
    errors: list[InputError]  # by path
    files_scanned: int
    agent_count: int
    agents: list[AgentInfo] | None  # only when the inventory was asked for
    outside: dict[str, str]  # content keys of parsed non-source files

"""Rewriting one file: each fixable self-call becomes a call of the in-process helper.

Only the call changes (its callee and its arguments), aliases only it used go, and the helper's
import is added once; every other byte of the file stays as it was. Each call is found where
the analysis reported it, checked against the analysis' description of it, and left alone with
a reason (from `policy`) where the rewrite could change what the code does.
"""

from __future__ import annotations

import ast
import io
import tokenize
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from ..analysis import policy
from ..ftypes import Blocker, CallDescription, Finding
from ..report.messages import reason
from . import arguments, flow, responses, scope
from .aliases import unused_aliases
from .fixes import CodemodError, Helper, Move, Outcome
from .imports import add_import, ident, imported_name
from .locate import Paths, Plan, Site, describe, locate, mismatch
from .region import region
from .splice import SpliceError, spliced
from .walk import descendants


class _Planner:
    """What becomes of each finding in one module: a plan for the calls the checks allow, the
    reason for the others."""

    def __init__(
        self,
        module: cst.Module,
        positions: Mapping[cst.CSTNode, CodeRange],
        source: bytes,
        helper: Helper,
        first_party: Callable[[str], bool],
    ):
        self.module = module
        self.code = module.code  # libcst's text of the tree, which the splice compares too
        self.source_lines = source.splitlines()
        self.helper = helper
        self.first_party = first_party
        self.positions = positions
        self.paths = Paths(module, positions)
        self.imported_as = imported_name(module, helper)
        self.callee = self.imported_as or helper.name
        # a file that never spells the name binds nothing by it; NFKC-normalised whole, a text keeps
        # each identifier whole (in code, ASCII delimits them), as Python reads them
        spelt = ident(self.callee) in ident(source.decode(module.encoding, "replace"))
        clashes = scope.helper_bindings(module, helper, self.callee) if spelt else []
        self.clash = min(clashes, key=self._line, default=None)
        self.flows = flow.Flows(module, self._line)
        self.rebound: dict[tuple[cst.FunctionDef, str], cst.CSTNode | None] = {}

    @property
    def asked(self) -> frozenset[str]:
        """The names whose bindings anywhere in the module the checks read (see `region`)."""
        return self.flows.module_names | {ident(self.callee)}

    def run(self, findings: Sequence[Finding]) -> tuple[dict[cst.Call, Plan], list[Outcome]]:
        sites = locate(self.paths, findings, self.code, self.source_lines)
        plans: dict[cst.Call, Plan] = {}
        outcomes = []
        for finding in findings:
            site = sites.get(finding)
            plan = Blocker("not_found") if site is None else self.plan(finding, site)
            if isinstance(plan, Blocker):
                outcomes.append(Outcome(finding, reason(plan), plan))
            else:
                plans[site.call] = plan  # type: ignore[union-attr]
                outcomes.append(Outcome(finding, callee=self.callee))
        return plans, outcomes

    def plan(self, finding: Finding, site: Site) -> Plan | Blocker:
        seen = describe(site)
        call: CallDescription = finding.call or seen
        if finding.call is not None and mismatch(finding.call, seen):
            return Blocker("not_described")
        if call.context == "expression":  # where the call stands, the tree tells for certain
            call = call._replace(context=seen.context)
        refused = policy.blocker(call)
        if refused is not None:
            return refused
        method, self_name, at = scope.enclosing_method(site.ancestors)
        if method is None or self_name is None or self_name != call.self_name:
            return Blocker("outside_method")
        roles = {argument.role: argument.index for argument in call.arguments}
        dropped_parts = [
            site.call.func,
            *(site.call.args[roles[r]].value for r in policy.DROPPED_ROLES if r in roles),
        ]
        rebound = self._rebinding(method, self_name)
        nested = scope.nested_scopes(site.ancestors, at)
        names = dict.fromkeys([self_name, *flow.read_names(dropped_parts)])
        bound = responses.bound_response(site.call, site.ancestors)
        streamed, unserved, passed_on = responses.judged(
            site.call,
            bound,
            site.ancestors,
            lambda: list(descendants(method)),
            lambda: responses.unreached(self.flows, method, nested, bound),
            policy.readers_unbound(call.readers, lambda name: self._rebinding(method, name)),
        )
        site_facts = policy.Site(
            callee=self.callee,
            self_name=self_name,
            self_rebinding=None if rebound is None else self._line(rebound),
            self_shadowed=scope.shadows(nested, self_name),
            helper_binding=None if self.clash is None else self._line(self.clash),
            walrus=scope.walrus_targets(dropped_parts),
            dropped_call=scope.first_call(dropped_parts),
            streamed=streamed,
            unserved=unserved,
            passed_on=passed_on,
            reaches=tuple(
                self.flows.reach([method, *nested], site.ancestors, site.call, name) for name in names
            ),
        )
        blocker = policy.site_blocker(site_facts)
        if blocker is not None:
            return blocker
        on_self = call.receiver.kind == "self_attribute"
        return Plan(
            callee=self.callee,
            self_name=self_name,
            drop=frozenset(a.index for a in call.arguments if a.role in policy.DROPPED_ROLES),
            keywords=tuple(
                (a.index, a.role)
                for a in call.arguments
                if a.role in policy.KEPT_ROLES and a.keyword != a.role and not a.star
            ),
            method=method,
            removed=tuple(dropped_parts[1:] if on_self else dropped_parts),
            bindings=frozenset(
                b.name for b in call.bindings if b.feeds == "receiver" or b.feeds in policy.DROPPED_ROLES
            ),
            ancestors=site.ancestors,
        )

    def _rebinding(self, method: cst.FunctionDef, name: str) -> cst.CSTNode | None:
        """The first statement of the method's own scope that binds `name` (`self`, or a name a
        reader of the response is called through), worked out once a method."""
        if (method, name) not in self.rebound:
            rebinds = self.flows.in_body(method, name)  # the method's own scope holds less
            rebinding = scope.bindings(method.body, name, own_scope=True) if rebinds else []
            self.rebound[method, name] = min(rebinding, key=self._line, default=None)
        return self.rebound[method, name]

    def _line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line


class SelfCallRewrite(VisitorBasedCodemodCommand):
    """The rewrite of one module, as a LibCST codemod: each of `findings` (fixable SCA001 self-calls
    of this file) that the checks allow becomes a call of the helper, the local aliases only those
    calls used go, and the helper's import is added once. What became of each finding is in
    `outcomes`, the aliases removed in `removed_aliases`. `source`: the file's bytes, when the
    tree was parsed from them (the findings' columns count them)."""

    DESCRIPTION = "Rewrite agent self-calls (SCA001) to the in-process helper."
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(
        self,
        context: CodemodContext,
        findings: Sequence[Finding],
        helper: Helper,
        first_party: Callable[[str], bool] = lambda name: False,
        source: bytes | None = None,
    ):
        super().__init__(context)
        self.findings = tuple(findings)
        self.helper = helper
        self.first_party = first_party
        self.source = source
        self.outcomes: list[Outcome] = []
        self.asked: frozenset[str] = frozenset()  # the names the checks read module-wide
        self.code = ""  # libcst's text of the tree as it came in, which the new text is compared with
        self.removed_aliases: list[tuple[int, str]] = []
        self.plans: dict[cst.Call, Plan] = {}
        self.dropped: set[cst.BaseStatement] = set()
        self.spine: set[cst.CSTNode] = set()

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        positions = self.metadata[PositionProvider]
        source = tree.bytes if self.source is None else self.source
        planner = _Planner(tree, positions, source, self.helper, self.first_party)  # type: ignore[arg-type]
        self.plans, self.outcomes = planner.run(self.findings)
        self.asked, self.code = planner.asked, planner.code
        if not self.plans:
            return tree
        self.dropped, removed = unused_aliases(self.plans.values())
        self.removed_aliases = sorted((positions[statement].start.line, name) for statement, name in removed)
        # Only the paths down to what changes are visited: a transformer builds every node it
        # visits anew (visiting whole methods was a fifth of a rewrite's time).
        self.spine = {node for plan in self.plans.values() for node in plan.ancestors}
        self.spine.update(node for statement in self.dropped for node in planner.paths.to(statement))
        module = super().transform_module_impl(tree)
        if planner.imported_as is None:
            module = add_import(module, self.helper, self.first_party)
        return module

    def on_visit(self, node: cst.CSTNode) -> bool:
        return node in self.spine and super().on_visit(node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        plan = self.plans.get(original_node)
        if plan is None:
            return updated_node
        return arguments.rewritten_call(
            updated_node, plan.callee, plan.self_name, plan.drop, dict(plan.keywords)
        )

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        if not any(statement in self.dropped for statement in original_node.body):
            return updated_node
        body: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []
        for original, updated in zip(original_node.body, updated_node.body, strict=True):
            if original in self.dropped:
                carried.extend(updated.leading_lines)  # type: ignore[attr-defined]
                continue
            if carried:
                updated = updated.with_changes(leading_lines=[*carried, *updated.leading_lines])
                carried = []
            body.append(updated)
        return updated_node.with_changes(body=body)


def rewrite_source(
    source: bytes,
    findings: Sequence[Finding],
    helper: Helper,
    first_party: Callable[[str], bool] = lambda name: False,
) -> tuple[bytes, list[Outcome], list[tuple[int, str]], tuple[Move, ...]]:
    """The file's new bytes, what became of each fixable finding, the (line, name) of each local
    alias removed because only the rewritten calls used it, and the edits made (`fixes.moved`).

    libcst reads the file with the definitions the rewrite cannot read blanked (`region`); when
    the checks asked about a name the blanking did not keep, it reads it again keeping that name
    too, and the whole file when that does not settle it or the change cannot be mapped back.

    Raises CodemodError when the result does not parse, which would be a bug in the codemod.
    """
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(source).readline)[0]
        text = source.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        return source, _unparsed(findings, exc), [], ()
    calls = [(f.line, f.end_line) for f in findings]
    names = {ident(helper.name)}
    for attempt in range(_READINGS):
        read = region(text, calls, names) if attempt < _READINGS - 1 else None
        try:
            module = cst.parse_module(text if read is None else read.text)
        except cst.ParserSyntaxError as exc:
            if read is not None:
                continue
            return source, _unparsed(findings, exc), [], ()
        command = SelfCallRewrite(CodemodContext(), findings, helper, first_party, source)
        new_module = _transformed(command, module)
        if read is not None and not command.asked <= read.names:
            names |= command.asked
            continue
        outcomes, removed_aliases = command.outcomes, command.removed_aliases
        if not command.plans:
            return source, outcomes, removed_aliases, ()
        try:
            splice = spliced(source, encoding, text, command.code, new_module.code, read)
        except SpliceError as exc:
            if read is not None:
                continue
            refused = [Outcome(o.finding, o.reason or f"{exc}; rewrite it by hand") for o in outcomes]
            return source, refused, [], ()
        break
    try:
        with warnings.catch_warnings():  # the user's own invalid escapes are not ours to report
            warnings.simplefilter("ignore", SyntaxWarning)
            ast.parse(splice.data)
    except (SyntaxError, ValueError) as exc:
        raise CodemodError(f"the rewritten file would not parse ({exc}); it was left as it was") from exc
    return splice.data, outcomes, removed_aliases, splice.moves()


def rewritten(
    job: tuple[bytes, Sequence[Finding], Helper, Callable[[str], bool]],
) -> tuple[bytes, list[Outcome], list[tuple[int, str]], tuple[Move, ...]] | CodemodError:
    """`rewrite_source` of one file's job, as a worker process runs it: its error is returned, so
    that the other files' rewrites stand."""
    try:
        return rewrite_source(*job)
    except CodemodError as exc:
        return exc


# Readings of a file: blanked but for the helper's name, again blanked but for the names the
# checks asked about (in the calls' own methods, so the same whatever is blanked), then whole.
_READINGS = 3


def _transformed(command: SelfCallRewrite, module: cst.Module) -> cst.Module:
    """`command.transform_module(module)` without the copy of the tree libcst makes first (the
    tree was parsed for this rewrite alone, and nothing else holds it)."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    with command.resolve(wrapper):
        command.context = replace(command.context, wrapper=wrapper)
        return command.transform_module_impl(wrapper.module)


def _unparsed(findings: Sequence[Finding], exc: Exception) -> list[Outcome]:
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return [Outcome(f, f"libcst cannot parse the file: {detail}") for f in findings]

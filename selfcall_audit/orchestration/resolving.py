"""The last phase of a run: the findings of each module it reports on.

A whole run shares its modules out between this process and one forked for each other core, as long
as each has a dozen modules to evaluate (`Workers.share`); a child finds the project's facts in its
memory, so only results travel back. What a child learned on the way comes back with them and is
taken over here as if learned here: the files it parsed (their facts and cache entries: not parsed
again), the files whose facts it loaded, the errors of files it could not read, the helper files it
asked whether they post, the limits it hit (in the modules' order, as one process meets them). A
module's findings depend on the facts alone, not on which process evaluated the other modules
first.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ..ftypes import Finding, InputError
from ..workspace.workers import Workers
from .store import FactsStore

if TYPE_CHECKING:
    from ..analysis.facts import ModuleFacts
    from ..analysis.index import ClassRef
    from ..analysis.resolve import Resolver
    from .store import Extracted


class Module(NamedTuple):
    """One module's findings (`noqa` applied, `suppressed` counted), and the limits its
    evaluation hit first: the helpers not followed (`cut`) and re-exports not followed
    (`reexports`), by file."""

    rel: str
    findings: list[Finding]
    suppressed: int
    cut: dict[str, str]
    reexports: dict[str, tuple[str, int]]


class Share(NamedTuple):
    """What one process found and learned evaluating its part of the modules."""

    modules: list[Module]
    posters: dict[str, bool]
    errors: dict[str, InputError]
    failed: set[str]
    asked: list[str]  # the files whose facts it asked for, in order
    extracted: dict[str, Extracted]  # those it parsed, with their cache entries


class Evaluation:
    """The findings of `targets`, a whole run's or those some files touch; `only`: the agents to
    evaluate a module with first (see `Resolver.findings_in`); `sources`: the project's source
    files (a target outside them, a module it imports, holds none)."""

    def __init__(
        self,
        resolver: Resolver,
        store: FactsStore,
        only: Mapping[str, tuple[ClassRef, ...]],
        sources: Collection[str],
        progress: Callable[[str, int, int], None],
    ):
        self.resolver = resolver
        self.store = store
        self.only = only
        self.sources = sources
        self.progress = progress

    def run(self, targets: list[str], workers: Workers | None = None) -> tuple[list[Finding], int]:
        """The findings, and how many `noqa` suppressed; shared out by `workers` if given (when
        there are enough modules to repay a fork, see `Workers.share`)."""
        total = len(targets)
        if workers is None:
            return self._merged([self._evaluate(_taking(targets), self._ticking(total, 0))], targets)
        cut, reexports = dict(self.resolver.cut), dict(self.resolver.index.cut)
        shares = workers.share(
            sorted(targets, key=self._size, reverse=True),  # no process is left with a large one at the end
            functools.partial(self._evaluate, tick=self._ticking(total, 0)),
            functools.partial(self._evaluate, tick=_quiet),
        )
        done = {module.rel for share in shares for module in share.modules}
        if missing := [rel for rel in targets if rel not in done]:  # a forked process failed
            shares.append(self._evaluate(_taking(missing), _quiet))
        # the limits hit, recorded again in the modules' order
        self.resolver.cut.clear()
        self.resolver.cut.update(cut)
        self.resolver.index.cut.clear()
        self.resolver.index.cut.update(reexports)
        return self._merged(shares, targets)

    def _size(self, rel: str) -> int:
        data = self.resolver.read(rel) if self.resolver.read else None
        return len(data or b"")

    def _ticking(self, total: int, done: int) -> Callable[[str], None]:
        count = iter(range(done + 1, total + 1))
        return lambda rel: self.progress(rel, next(count), total)

    def _evaluate(self, take: Callable[[], str | None], tick: Callable[[str], None]) -> Share:
        resolver, store = self.resolver, self.store
        index = resolver.index
        asked_before = set(store.known())
        errors_before, failed_before = dict(store.inputs.errors), set(store.inputs.failed)
        modules = []
        with store.recording() as extracted:
            while (rel := take()) is not None:
                tick(rel)
                cut, reexports = dict(resolver.cut), dict(index.cut)
                findings: list[Finding] = []
                suppressed = 0
                module = index.module(rel)
                if module is not None and rel in self.sources:
                    for finding in resolver.findings_in(rel, self.only.get(rel)):
                        if _noqa(module, finding):
                            suppressed += 1
                        else:
                            findings.append(finding)
                modules.append(
                    Module(rel, findings, suppressed, _new(resolver.cut, cut), _new(index.cut, reexports))
                )
        return Share(
            modules,
            dict(resolver.posters),
            _new(store.inputs.errors, errors_before),
            store.inputs.failed - failed_before,
            [rel for rel in store.known() if rel not in asked_before],
            extracted,
        )

    def _merged(self, shares: list[Share], targets: list[str]) -> tuple[list[Finding], int]:
        """The shares' findings, and what the forked processes learned taken over here; the limits
        hit recorded in the modules' order, as one process evaluating them in turn meets them."""
        resolver, store = self.resolver, self.store
        ticking = self._ticking(len(targets), len(shares[0].modules))
        for share in shares[1:]:
            store.inputs.errors.update(share.errors)
            store.inputs.failed.update(share.failed)
            store.adopt(share.asked, share.extracted)
            for rel, asked in share.posters.items():
                resolver.posters.setdefault(rel, asked)
            for module in share.modules:
                ticking(module.rel)
        order = {rel: place for place, rel in enumerate(targets)}
        modules = sorted((m for share in shares for m in share.modules), key=lambda m: order[m.rel])
        findings: list[Finding] = []
        suppressed = 0
        for module in modules:
            findings += module.findings
            suppressed += module.suppressed
            for rel, helper in module.cut.items():
                resolver.cut.setdefault(rel, helper)
            for rel, reexport in module.reexports.items():
                resolver.index.cut.setdefault(rel, reexport)
        return findings, suppressed


def _taking(rels: list[str]) -> Callable[[], str | None]:
    return functools.partial(next, iter(rels), None)


def _quiet(rel: str) -> None:
    """A forked process says nothing of its progress: its parent does, once its results are in."""


def _new(now: Mapping[str, Any], before: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in now.items() if key not in before}


def _noqa(module: ModuleFacts, finding: Finding) -> bool:
    for line, codes in module.noqa:
        if finding.line <= line <= finding.end_line and (codes is None or finding.code.startswith(codes)):
            return True
    return False

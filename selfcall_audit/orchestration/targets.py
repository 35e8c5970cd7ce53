"""Which modules a run reports on, decided mostly on bytes.

A whole run: the prefilter's rounds to a fixpoint, files naming an agent base, then files naming
the agents found so far. A run on named files: those files, the modules the YAML files in scope
run, and the modules importing them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from ..analysis.index import ClassRef, Index
from ..workspace.discovery import in_scope
from ..workspace.prefilter import importers

if TYPE_CHECKING:
    from ..analysis.gym_config import AgentInstance
    from ..analysis.hierarchy import Hierarchy
    from ..analysis.resolve import Resolver
    from ..workspace.discovery import Status
    from .store import FactsStore

_MAX_SCOPED_FILES = 60
_SHARED_BY = 4  # first-round files importing a module that is then parsed ahead of need
_MAX_SHARED = 16


class Targets:
    """The modules to report on, among the project's source files; `statuses`: those the listing
    found settled (their sizes); `names_a_base` tells whether a file names an agent base (reading
    it), `search` gives the files among those read before that name a word, `named` the files
    naming a word (from the word index)."""

    def __init__(
        self,
        sources: tuple[str, ...],
        statuses: Mapping[str, Status],
        names_a_base: Callable[[str], bool],
        search: Callable[[Iterable[str], Collection[str]], list[str]],
        named: Callable[[Collection[str]], list[str]],
        store: FactsStore,
    ):
        self.sources = sources
        self.statuses = statuses
        self.names_a_base = names_a_base
        self.search = search
        self.named = named
        self.store = store

    def whole(self, hierarchy: Hierarchy) -> tuple[list[str], list[list[str]], list[set[str]], set[str]]:
        """Prefilter to a fixpoint. The modules to report on, the files each round parsed (the
        first: those naming a base), the agent names each later round searched for, and the files
        naming one of those names (every file is searched for every name: the word index's
        answers for the one-file runs to come, which look for an agent's subclasses by name)."""
        index = hierarchy.index
        first: list[str] = []
        naming_agents: set[str] = set()

        def naming_a_base() -> Iterator[str]:  # parsed by running workers as the prefilter finds them
            for rel in self._largest_first():
                if self.names_a_base(rel):
                    first.append(rel)
                    yield rel

        self.store.preload(naming_a_base())
        # in the listing's order again: the shared imports picked among equals do not depend on sizes
        found = set(first)
        first = [rel for rel in self.sources if rel in found]
        self.store.prefetch(self._shared_imports(index, first))
        pending = first
        rounds: list[list[str]] = []
        searched: list[set[str]] = []
        known: set[str] = set()
        parsed: list[str] = []
        while pending:
            self.store.preload(pending)
            rounds.append(pending)
            parsed += pending
            names = {
                ref.name
                for rel in pending
                if (module := index.module(rel)) is not None
                for klass in module.classes
                if hierarchy.is_agent(ref := ClassRef(rel, klass.name))
            } - known
            known |= names
            searched.append(names)
            done = set(parsed)
            holding = self.search(self.sources, names) if names else []
            naming_agents.update(holding)
            pending = [rel for rel in holding if rel not in done]
        # Bases and mixins the agents pulled in on demand can hold self-calls of their own.
        pulled = [m.path for m in index.parsed() if m.path not in set(parsed)]
        return parsed + pulled, rounds, searched, naming_agents

    def scoped(
        self,
        scopes: tuple[str, ...],
        instances: list[AgentInstance],
        resolver: Resolver,
        import_lines: Callable[[Iterable[str]], list[tuple[str, bytes]]],
    ) -> tuple[list[str], dict[str, tuple[ClassRef, ...]]] | None:
        """What a whole run would report on for `scopes`: the files in scope, the modules whose
        classes run in the instances that YAML files in scope configure, the modules importing
        (transitively) a module in scope, and the bases and mixins of the agents of all these,
        each with the agents it is to be evaluated with (see `Resolver.findings_in`). None when
        that grows so large that the whole-project prefilter is cheaper."""
        targets = [rel for rel in self.sources if in_scope(rel, scopes)]
        for instance in instances:
            if in_scope(instance.where.path, scopes):
                for served in resolver.served_classes(instance):
                    targets += [owner.path for owner in resolver.hierarchy.mro(served)]
        listed = set(self.sources)
        targets = [rel for rel in dict.fromkeys(targets) if rel in listed]
        seen = set(targets)
        frontier = [rel for rel in targets if rel.endswith(".py")]
        while frontier:
            frontier = importers(frontier, import_lines(rel for rel in self.sources if rel not in seen))
            seen.update(frontier)
            targets += frontier
            if len(targets) > _MAX_SCOPED_FILES:
                return None
        self.store.preload(targets)
        # Only an agent of these modules can read a file in scope: its module imports it or a YAML
        # file in scope runs it. So a base or mixin of theirs holds a finding shown here only if
        # evaluating it with `self` as one of them finds one, asked before the agents of the whole
        # project are (not their importers: the base every agent imports would make every scoped
        # run a whole one).
        hierarchy = resolver.hierarchy
        agents = tuple(
            ref
            for rel in targets
            if (module := hierarchy.index.module(rel)) is not None
            for ref in (ClassRef(rel, klass.name) for klass in module.classes)
            if hierarchy.is_agent(ref)
        )
        outside = listed - seen
        bases = list(dict.fromkeys(o.path for a in agents for o in hierarchy.mro(a)[1:] if o.path in outside))
        self.store.preload(bases)
        return targets + bases, dict.fromkeys(bases, agents)

    def located(self, scopes: tuple[str, ...]) -> list[str]:
        """The files in scope alone: what a run reporting only the findings located there reads
        (a class there deployed by an agent elsewhere is found through `naming`)."""
        listed = set(self.sources)
        if all(scope in listed for scope in scopes):  # files, as an editor names them
            targets = list(dict.fromkeys(scopes))
        else:
            targets = [rel for rel in self.sources if in_scope(rel, scopes)]
        self.store.preload(targets)
        return targets

    def naming(self, names: Collection[str]) -> list[str]:
        """The files that name one of these classes (subclasses of them may be defined there), parsed."""
        found = self.named(names)
        self.store.preload(found)
        return found

    def _largest_first(self) -> list[str]:
        """The sources, the largest settled ones first (a file not settled, of a size unknown, last):
        read in that order, the files the workers parse as the prefilter finds them end with small
        ones, so that no worker is still parsing a large file while the others have nothing left."""
        sizes = self.statuses
        return sorted(self.sources, key=lambda rel: -sizes[rel][0] if rel in sizes else 0)

    def _shared_imports(self, index: Index, rels: list[str]) -> list[str]:
        """The source files that many of these files import: the framework the agents build on,
        which the hierarchy and the helpers nearly always read next."""
        counts = Counter(target for rel in rels for target in index.imported(rel))
        listed = set(self.sources)
        shared = [rel for rel, count in counts.most_common() if count >= _SHARED_BY and rel in listed]
        return shared[:_MAX_SHARED]

"""The stages of a run that resolves: the modules' index, the class hierarchy, the targets the
prefilter finds, the resolution shared among processes, then the findings and the inventory.

`Project.analyze` loads this module when no stored result answers, and with it the analysis' own
modules: a run whose stored result still holds after an edit (a comment added) needs none of them."""

from __future__ import annotations

import functools
import os
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from ..analysis.facts import Inlined
from ..analysis.hierarchy import Hierarchy
from ..analysis.index import ClassRef, Index
from ..analysis.limits import LIMITS
from ..analysis.resolve import Resolver
from ..ftypes import AgentInfo, Analysis, InputError
from ..workspace.discovery import FileSet, UnreadableFile, read_file
from .comments import outline
from .indexes import Indexes
from .keys import content_key
from .resolving import Evaluation
from .reuse import observe
from .targets import Targets

if TYPE_CHECKING:
    from ..workspace.workers import Workers
    from .analysing import Analysing
    from .fingerprint import Fingerprints
    from .inputs import Inputs


def analyse(
    run: Analysing,
    files: FileSet,
    fingerprints: Fingerprints | None,
    scopes: tuple[str, ...],
    whole: bool,
    inventory: bool,
    located: bool = False,
) -> Analysis:
    """What the stages find in the files as they are now (see `Project.analyze`), with `run`'s facts
    and workers."""
    settings = run.settings
    run.inputs.errors.update(files.errors)
    store = run.store()
    names, paths = None, None
    if run.warm:  # what the last runs worked out of the same facts and listing
        if run.warm.paths is None or run.warm.paths[0] is not files:
            run.warm.paths = (files, {})
        names, paths = run.warm.names, run.warm.paths[1]
    index = Index(set(files.modules), store.facts, names, paths)
    bases = frozenset(settings.agent_bases)
    indexes = Indexes(run.inputs, files, run.pool())
    instances = indexes.instances(
        fingerprints.of(run.inputs.key, files.configs) if fingerprints else None, background=whole
    )
    # For the one-file runs to come, not this one: indexed by a worker while this process parses.
    indexed = indexes.index_imports(files.sources) if whole and not run.warm else lambda: None
    run.phase("parsing")

    def search(rels: Iterable[str], names: Collection[str]) -> list[str]:
        """The word index's answer when it has one (the files it vouches for are not read
        again), else the files searched, by the workers when they run."""
        return indexes.naming(names) if indexes.answers(names) else run.inputs.naming(rels, names, run.pool())

    chosen = Targets(files.sources, files.statuses, run.inputs.names_a_base, search, indexes.naming, store)
    targets = None
    sharing: Workers | None = None
    only: dict[str, tuple[ClassRef, ...]] = {}  # modules evaluated with these agents first
    # kept by a long-lived process from one run to the next
    sites = run.warm.sites if run.warm else None
    inlined = Inlined(run.warm.inlined) if run.warm else None
    if run.warm:
        run.warm.inlined = inlined
    if not whole:
        hierarchy = Hierarchy(index, bases, chosen.naming)
        mentions = functools.partial(run.warm.mentions, read=run.inputs.read) if run.warm else None
        resolver = Resolver(
            hierarchy, settings, instances(), run.inputs.read, mentions, sites, inlined, store.edited
        )
        if located:
            targets = chosen.located(scopes)
        elif (scoped := chosen.scoped(scopes, instances(), resolver, indexes.import_lines)) is not None:
            targets, only = scoped
    if targets is None:
        hierarchy = Hierarchy(index, bases)
        # the YAML instances are read when first needed: the prefilter runs meanwhile
        resolver = Resolver(
            hierarchy,
            settings,
            instances,
            read=run.inputs.read,
            sites=sites,
            inlined=inlined,
            parsed=store.edited,
        )
        targets, rounds, searched, naming_agents = chosen.whole(hierarchy)
        indexes.keep_names(set().union(*searched), naming_agents)
        if not whole and not run.warm:  # too many files in scope: as a whole run
            indexed = indexes.index_imports(files.sources)
        # every module evaluated, a share by each core: by processes forked now
        sharing = None if run.warm else run.pool()
        # Files named one by one (pre-commit's changed files) are always read: their errors show.
        run.preload([rel for rel in files.sources if rel in scopes])
    source_set = set(files.sources)
    run.phase("resolving agents")
    evaluation = Evaluation(resolver, store, only, source_set, run.progress)
    targets = list(dict.fromkeys(targets))
    indexed()
    if sharing is not None:
        instances()  # out of the workers before they stop
    findings, suppressed = evaluation.run(targets, sharing)
    for rel, helper in sorted(resolver.cut.items()):
        message = (
            f"helpers forward a server-client call more than {LIMITS.helper_depth} deep: "
            f"{helper} and what it calls were not followed (a self-call there is not reported)"
        )
        run.inputs.errors.setdefault(rel, InputError(rel, message, "too_deep"))
    for rel, (name, line) in sorted(index.cut.items()):
        message = (
            f"`{name}` is re-exported through more than {LIMITS.import_depth} modules: it was not "
            "followed further (a self-call through it is not reported)"
        )
        run.inputs.errors.setdefault(rel, InputError(rel, message, "too_deep", line))
    if fingerprints and whole:
        parsed = store.keys()
        run.observed = observe(
            fingerprints.setup,
            run.inputs.contents(files),
            parsed,
            rounds,
            searched,
            resolver.posters,
            {rel: _outline_of(run.inputs, rel, key) for rel, key in parsed.items()},
        )
    return Analysis(
        findings=sorted(set(findings), key=lambda f: f.sort_key),
        suppressed=suppressed,
        errors=[run.inputs.errors[rel] for rel in sorted(run.inputs.errors)],
        files_scanned=len(files.sources) + len(files.configs),
        agent_count=sum(
            1
            for rel in dict.fromkeys(targets)
            if (module := index.module(rel)) is not None
            for klass in module.classes
            if hierarchy.is_agent_class(ClassRef(rel, klass.name))
        ),
        agents=_inventory(hierarchy, resolver, instances()) if inventory else None,
        outside={rel: key for rel, key in store.keys().items() if rel not in source_set}
        if fingerprints
        else {},
    )


def _inventory(hierarchy: Hierarchy, resolver: Resolver, instances: list) -> list[AgentInfo]:
    index = hierarchy.index
    agents = []
    for module in index.parsed():
        for klass in module.classes:
            ref = ClassRef(module.path, klass.name)
            if not hierarchy.is_agent_class(ref):
                continue
            bases = tuple(b if isinstance(b, str) else index.qualname(b) for b in hierarchy.bases(ref))
            names = tuple(sorted({i.name for i in instances if ref in resolver.served_classes(i)}))
            agents.append(
                AgentInfo(klass.name, module.path, klass.line, bases, names, *hierarchy.recognised(ref))
            )
    return sorted(agents, key=lambda a: (a.path, a.line))


def _outline_of(inputs: Inputs, rel: str, key: str) -> str | None:
    """The outline (see `comments`) of the bytes of content key `key`; None if the file no
    longer holds them or cannot be read."""
    data = inputs.peek(rel)
    if data is None:
        try:
            data = read_file(os.path.join(inputs.root, rel), inputs.settings.max_file_size)
        except UnreadableFile:
            return None
    return outline(data)[0] if content_key(rel, data) == key else None

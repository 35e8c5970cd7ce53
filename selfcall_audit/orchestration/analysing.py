"""A run that cannot answer from a stored result: the facts store and the worker pool, and the
check that a stored result still holds after an edit; the stages that use them are `stages.py`.

`project.py` loads this module when a run first needs it: a run answered from its stored result
(a warm scan) never does, and so loads none of the modules below (what that saves:
`benchmarks/deferred_imports.py`). The stages and the analysis' own modules load later still,
when a run resolves: the check that a stored result still holds parses the edited files only."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..config import Settings
from ..ftypes import Progress
from ..workspace.discovery import FileSet
from ..workspace.workers import Workers
from .inputs import Inputs
from .reuse import still_holds
from .store import FactsStore

if TYPE_CHECKING:
    from .fingerprint import Fingerprints
    from .reuse import Observed
    from .warm import Warm


class Analysing:
    """The facts and the workers of one `Project`'s runs, for the reuse check and `stages.py`."""

    def __init__(self, inputs: Inputs, settings: Settings, progress: Progress, warm: Warm | None):
        self.inputs = inputs
        self.settings = settings
        self.progress = progress
        self.warm = warm
        self.observed: Observed | None = None  # what a whole run saw, for `reuse`
        self._parsing = False  # the phase the parsed files are counted in (not those parsed on demand)
        self._store: FactsStore | None = None
        self._workers: Workers | None = None  # started by the first batch that repays them

    @property
    def files_parsed(self) -> int:
        return self._store.parsed if self._store else 0

    def same_facts(self, rel: str, then: str) -> bool:
        """Are the file's facts now those of its bytes of content key `then`? Their cache entries'
        bytes answer first, sparing the decoding of the stored facts and a comparison of every
        field (about 1.5 ms of a one-file run after a comment in a 1,000-line agent file)."""
        now = self.store().facts(rel)
        cache = self.inputs.cache
        if now is None or cache is None:
            return False
        if cache.same_facts(then, self.inputs.key(rel)):  # type: ignore[arg-type]
            return True
        return cache.facts(rel, then) == now

    def still_holds(
        self, last: Observed, fingerprints: Fingerprints, files: FileSet, unusable: set[str]
    ) -> Observed | None:
        """What the files as they are now show of `last`, a whole run's observations, when its
        result holds for them too (see `reuse.still_holds`); None otherwise."""
        return still_holds(
            last,
            fingerprints.setup,
            self.inputs.contents(files),
            files.sources,
            unusable=unusable,
            base_tokens=self.inputs.tokens,
            read=self.inputs.read,
            key=self.inputs.key,
            same_facts=self.same_facts,
        )

    def preload(self, rels: Iterable[str]) -> None:
        """Facts for many files at once: from the cache, else parsed (in parallel when it pays)."""
        self.store().preload(rels)

    def store(self) -> FactsStore:
        if self._store is None:
            memory = self.warm.facts if self.warm else None
            functions = self.warm.functions if self.warm else None
            self._store = FactsStore(self.inputs, self.pool(), self._parsed, memory, functions)
        return self._store

    def pool(self) -> Workers:
        if self._workers is None:
            self._workers = Workers(self.settings.jobs)
        return self._workers

    def close(self) -> None:
        """Stop the workers, if they started: a run's end."""
        if self._workers is not None:
            self._workers.close()

    def release(self) -> None:
        """Drop the facts store and the workers: they call back into this object, a cycle that
        a long-lived caller which freezes what it keeps (`api.Session`) would never see freed."""
        self._store = None
        self._workers = None

    def phase(self, name: str) -> None:
        self._parsing = name == "parsing"
        self.progress.phase(name)

    def _parsed(self, rel: str, done: int, total: int) -> None:
        if self._parsing:
            self.progress(rel, done, total)

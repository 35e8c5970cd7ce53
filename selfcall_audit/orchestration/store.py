"""Each Python file's facts, once per run: from the cache, else extracted, in the worker processes
when a batch repays them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sized
from typing import TYPE_CHECKING

from ..ftypes import InputError
from ..workspace.workers import Workers
from .inputs import Inputs
from .jobs import extract_facts

if TYPE_CHECKING:
    from ..analysis.facts import ModuleFacts
    from ..analysis.kept_functions import Functions

    Extracted = tuple[ModuleFacts | str, bytes | None]  # facts or why there are none; cache entry

Progress = Callable[[str, int, int], None]


class FactsStore:
    """Facts by root-relative path; a file that cannot be read or parsed has none, an entry in
    the inputs' `errors` saying why, and its path in their `failed`."""

    def __init__(
        self,
        inputs: Inputs,
        workers: Workers,
        progress: Progress | None = None,
        memory: dict[str, tuple[bytes | None, ModuleFacts | str]] | None = None,
        functions: dict[str, Functions] | None = None,
    ):
        """`memory`: each file's last facts (or why there are none) with the bytes they are of, kept
        by a long-lived process (one version a file: an editor's every keystroke is another);
        `functions`: the functions of each file such a process extracted again (see
        `kept_functions.Functions`)."""
        self.inputs = inputs
        self.memory = memory
        self.functions = functions
        self.workers = workers
        self.progress = progress
        self.parsed = 0  # files extracted by this run (not found in the cache)
        # files extracted again here after an edit: their trees were parsed by this process (a
        # question about their self-calls is asked of the module's, not of its methods' lines)
        self.edited: set[str] = set()
        self._facts: dict[str, ModuleFacts | None] = {}
        self._keys: dict[str, str] = {}  # content keys of the files whose facts were asked for
        self._ahead: dict[str, Extracted] = {}  # extracted before being asked for
        self._recorded: dict[str, Extracted] | None = None  # see `recording`

    def facts(self, rel: str) -> ModuleFacts | None:
        if rel not in self._facts:
            self.preload([rel])
        return self._facts.get(rel)

    def known(self) -> list[str]:
        """The files asked for so far, in order (those with facts and those without)."""
        return list(self._facts)

    @contextlib.contextmanager
    def recording(self) -> Iterator[dict[str, Extracted]]:
        """What this store extracts meanwhile, for a forked process to hand over (see `adopt`)."""
        self._recorded = {}
        try:
            yield self._recorded
        finally:
            self._recorded = None

    def adopt(self, rels: Iterable[str], extracted: dict[str, Extracted]) -> None:
        """Take over what another process learned asking for `rels`: the facts it extracted
        (`extracted`, with their cache entries) count as extracted here, not extracted again; the
        others come from the cache, or their errors show, as if asked for here first."""
        self._ahead.update((rel, found) for rel, found in extracted.items() if rel not in self._facts)
        self.preload([rel for rel in rels if rel not in self._facts])

    def keys(self) -> dict[str, str]:
        """The content key of each file that has facts."""
        return {rel: self._keys[rel] for rel, facts in self._facts.items() if facts is not None}

    def preload(self, rels: Iterable[str]) -> None:
        """Facts for many files at once: from the cache, else extracted, in parallel when it pays
        (files given by an iterator reach running workers as it finds them). The workers also
        encode the cache entries, so that this process only analyses."""
        wanted: list[tuple[str, Extracted | None]] = []  # with what `prefetch` extracted, if anything
        uncached = self._uncached(rels, wanted)
        if isinstance(rels, Sized):
            results = iter(self._extracted(list(uncached)))
        else:
            results = iter(self.workers.map(extract_facts, uncached))
        for done, (rel, ahead) in enumerate(wanted):
            if self.progress:
                self.progress(rel, done + 1, len(wanted))
            self._keep(rel, *(ahead or next(results)))

    def prefetch(self, rels: Iterable[str]) -> None:
        """Extract at once, in parallel when it pays, files likely to be asked for one by one next
        (the modules many agents import). Nothing is known of them until they are asked for: only
        then does a file count as parsed, its error show and its cache entry count as used. The
        files must have been read already, and a file whose facts the cache holds is left alone.
        Done only by running workers: this process would spend on it what it may not need."""
        if not self.workers.running:
            return
        cache = self.inputs.cache
        items = [
            (rel, data, cache is not None)
            for rel in rels
            if rel not in self._facts
            and rel not in self._ahead
            and (data := self.inputs.read(rel)) is not None
            and not (cache and cache.holds_facts(self.inputs.key(rel)))  # type: ignore[arg-type]
        ]
        for (rel, _, _), extracted in zip(items, self._extracted(items)):
            self._ahead[rel] = extracted

    def _extracted(self, items: list[tuple[str, bytes, bool]]) -> list[Extracted]:
        """`extract_facts` of each item, in their order, handed out the largest file first: no
        worker is then left parsing a large file at the end of the batch while the others wait."""
        order = sorted(range(len(items)), key=lambda place: -len(items[place][1]))
        done = dict(zip(order, self.workers.map(extract_facts, [items[place] for place in order])))
        return [done[place] for place in range(len(items))]

    def _uncached(
        self, rels: Iterable[str], wanted: list[tuple[str, Extracted | None]]
    ) -> Iterator[tuple[str, bytes, bool]]:
        """The files to extract; each file to keep goes to `wanted`, with what was extracted ahead
        of time if anything; the others' facts come from the cache (or they have none: they cannot
        be read)."""
        cache = self.inputs.cache
        for rel in rels:
            if rel in self._facts:
                continue
            kept = self.memory.get(rel) if self.memory is not None else None
            # facts the cache holds for the file's content key (known without reading the file
            # when the cache recorded its status): the file is not read again
            key = self.inputs.key(rel) if cache is not None and kept is None else None
            cached = cache.facts(rel, key) if cache is not None and key is not None else None
            if cached is not None:
                self._keys[rel] = key  # type: ignore[assignment]
                self._facts[rel] = cached
                continue
            data = self.inputs.read(rel)
            if data is None:
                self._facts[rel] = None
                continue
            if kept is not None and kept[0] == data:  # the very bytes: not even hashed again
                if cache is not None:  # unless a stored result will depend on it
                    self._keys[rel] = self.inputs.key(rel)  # type: ignore[assignment]
                self._keep(rel, kept[1], None, parsed=False)
                continue
            self._keys[rel] = self.inputs.key(rel)  # type: ignore[assignment]
            ahead = self._ahead.pop(rel, None)
            if ahead is None and kept is not None and self.functions is not None:
                # other bytes than last time (an edit): extracted here, reusing the functions
                # whose lines are unchanged
                ahead = extract_facts((rel, data, cache is not None), self.functions)
                self.edited.add(rel)
            wanted.append((rel, ahead))
            if ahead is None:
                yield rel, data, cache is not None

    def _keep(
        self, rel: str, result: ModuleFacts | InputError, payload: bytes | None, parsed: bool = True
    ) -> None:
        self.parsed += parsed
        if parsed and self._recorded is not None:
            self._recorded[rel] = (result, payload)
        if parsed and self.memory is not None:
            self.memory[rel] = (self.inputs.read(rel), result)
        if isinstance(result, InputError):
            self.inputs.errors[rel] = result
            self.inputs.failed.add(rel)
            self._facts[rel] = None
            return
        self._facts[rel] = result
        if payload is not None:  # extracted for the cache
            self.inputs.cache.put_facts(self._keys[rel], payload)  # type: ignore[union-attr]

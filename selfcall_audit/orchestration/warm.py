"""What a long-lived process (the language server) keeps of a project between runs: what one run
learns of the files (their listing, bytes, facts, import lines, the words they name, the YAML
instances) is kept for the next, so that analysing an edited buffer again extracts the facts of
that one file and resolves the agents it can affect, instead of reading the project anew.

What is kept is checked against the bytes it came from (facts, import lines, named words), so
that an unsaved buffer never serves stale results; what comes from the disk is kept until
`changed` says the disk moved (an editor's file watcher).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING

from ..workspace.discovery import FileSet
from ..workspace.prefilter import import_lines, word_matcher

if TYPE_CHECKING:
    from typing import Any

    from ..analysis.around import Sites
    from ..analysis.facts import Inlined, ModuleFacts
    from ..analysis.gym_config import AgentInstance
    from ..analysis.index import Names, Paths
    from ..analysis.kept_functions import Functions
    from ..ftypes import InputError


class Warm:
    """What runs over one project share, each part dropped when what it came from changes."""

    __slots__ = (
        "disk",
        "facts",
        "files",
        "functions",
        "inlined",
        "instances",
        "lines",
        "mentioned",
        "named",
        "named_at",
        "names",
        "paths",
        "remembered",
        "sites",
        "version",
    )

    def __init__(self) -> None:  # a plain class: a dataclass would load `dataclasses` in every run
        self.files: FileSet | None = None  # the listing: until files are created or deleted
        self.disk: dict[str, bytes] = {}  # files as read from the disk
        self.facts: dict[str, tuple[bytes | None, ModuleFacts | str]] = {}  # of what
        # the YAML instances, and the configs' errors
        self.instances: tuple[list[AgentInstance], dict[str, InputError]] | None = None
        self.lines: dict[str, tuple[bytes | None, bytes]] = {}  # import lines, and of what
        self.named: dict[str, dict[str, tuple[bytes | None, bool]]] = {}  # word → file → seen
        self.mentioned: dict[frozenset[str], dict[str, tuple[bytes | None, bool]]] = {}
        # `disk`'s version, moved on whenever a file is read from the disk or dropped from it; and for
        # each word searched, the version and the listing its answers are of, and the files that could
        # answer otherwise with the disk unmoved (read from memory, or unreadable, then)
        self.version = 0
        self.named_at: dict[str, tuple[int, tuple[str, ...], set[str]]] = {}
        # each file's self-call sites as the methods around them show them: checked against the
        # methods' text, so kept whatever the disk does
        self.sites: dict[str, Sites] = {}
        # the functions of each file extracted again after an edit, likewise checked against their text
        self.functions: dict[str, Functions] = {}
        self.inlined: Inlined | None = None  # the last run's inlined calls, by the identity of their facts
        self.names: Names = {}  # each module's own names, and the facts they are of
        self.paths: tuple[FileSet, Paths] | None = None  # where imports lead, and the listing that says so
        self.remembered: dict[tuple[str, bytes], Any] = {}  # `Inputs.remembered`: by function and bytes

    def remember(self, rel: str, data: bytes) -> None:
        """A file as read from the disk."""
        self.disk[rel] = data
        self.version += 1

    def import_lines(self, rel: str, data: bytes | None) -> bytes:
        """The file's import lines, worked out again only when its bytes are others."""
        kept = self.lines.get(rel)
        if kept is None or kept[0] != data:
            kept = self.lines[rel] = (data, import_lines(data))
        return kept[1]

    def naming(
        self,
        name: str,
        sources: tuple[str, ...],
        read: Callable[[str], bytes | None],
        memory: Collection[str] = (),
    ) -> list[str]:
        """The files naming `name` as a whole word; each file looked at again only when its bytes
        are others than last time. `memory`: the files read from memory this run (an editor's
        buffers): while nothing on the disk moved, only these, and those that were read from memory
        or could not be read last time, can answer otherwise (an edit does not search every file)."""
        seen = self.named.setdefault(name, {})
        at = self.named_at.get(name)
        if at is not None and at[0] == self.version and at[1] is sources:
            looked = [rel for rel in dict.fromkeys((*memory, *at[2])) if rel in seen]
        else:
            looked = sources
        matcher = None
        unread = set()
        for rel in looked:
            data = read(rel)
            kept = seen.get(rel)
            if kept is None or kept[0] != data:
                matcher = matcher or word_matcher([name])
                kept = seen[rel] = (data, bool(matcher(data)))
            if data is None:
                unread.add(rel)
        self.named_at[name] = (self.version, sources, unread | set(memory))
        return [rel for rel in sources if seen[rel][1]]

    def mentions(self, names: frozenset[str], rel: str, read: Callable[[str], bytes | None]) -> bool:
        """Does the file name one of `names` as a word? Searched again only when its bytes are others."""
        seen = self.mentioned.setdefault(names, {})
        data = read(rel)
        kept = seen.get(rel)
        if kept is None or kept[0] != data:
            kept = seen[rel] = (data, word_matcher(names)(data))
        return kept[1]

    def changed(self, rels: Iterable[str] | None) -> None:
        """Files changed on the disk (root-relative); None: anything may have (files created or
        deleted, settings): everything is read again, but facts of unchanged bytes stay."""
        self.version += 1
        if rels is None:
            self.files = None
            self.disk.clear()
            self.instances = None
            return
        for rel in rels:
            self.disk.pop(rel, None)
            if rel.endswith((".yaml", ".yml")):
                self.instances = None

"""What a long-lived process (the language server) keeps of a project between runs: what one run
learns of the files (their listing, bytes, facts, import lines, the words they name, the YAML
instances) is kept for the next, so that analysing an edited buffer again extracts the facts of
that one file and resolves the agents it can affect, instead of reading the project anew.

What is kept is checked against the bytes it came from (facts, import lines, named words), so
that an unsaved buffer never serves stale results; what comes from the disk is kept until
`changed` says the disk moved (an editor's file watcher).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..workspace.discovery import FileSet
from ..workspace.prefilter import import_lines, word_matcher

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..analysis.facts import ModuleFacts
    from ..analysis.gym_config import AgentInstance


@dataclass
class Warm:
    """What runs over one project share, each part dropped when what it came from changes."""

    files: FileSet | None = None  # the listing: until files are created or deleted
    disk: dict[str, bytes] = field(default_factory=dict)  # files as read from the disk
    facts: dict[str, tuple[bytes | None, ModuleFacts | str]] = field(default_factory=dict)  # of what
    instances: tuple[list[AgentInstance], dict[str, str]] | None = None  # and the configs' errors
    lines: dict[str, tuple[bytes | None, bytes]] = field(default_factory=dict)  # import lines, and of what
    named: dict[str, dict[str, tuple[bytes | None, bool]]] = field(default_factory=dict)  # word → file → seen
    mentioned: dict[frozenset[str], dict[str, tuple[bytes | None, bool]]] = field(default_factory=dict)

    def import_lines(self, rel: str, data: bytes | None) -> bytes:
        """The file's import lines, worked out again only when its bytes are others."""
        kept = self.lines.get(rel)
        if kept is None or kept[0] != data:
            kept = self.lines[rel] = (data, import_lines(data))
        return kept[1]

    def naming(self, name: str, sources: Iterable[str], read: Callable[[str], bytes | None]) -> list[str]:
        """The files naming `name` as a whole word; each file looked at again only when its bytes
        are others than last time."""
        seen = self.named.setdefault(name, {})
        matcher = None
        found = []
        for rel in sources:
            data = read(rel)
            kept = seen.get(rel)
            if kept is None or kept[0] != data:
                matcher = matcher or word_matcher([name])
                kept = seen[rel] = (data, bool(matcher(data)))
            if kept[1]:
                found.append(rel)
        return found

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
        if rels is None:
            self.files = None
            self.disk.clear()
            self.instances = None
            return
        for rel in rels:
            self.disk.pop(rel, None)
            if rel.endswith((".yaml", ".yml")):
                self.instances = None

"""The work a run hands to its worker processes, or does itself when they do not pay: functions
of paths and bytes whose results travel back as plain data or facts."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..workspace.discovery import TooLarge, UnreadableFile, read_file
from ..workspace.prefilter import import_lines, mentions_any, word_matcher
from .cache import facts_payload
from .keys import content_key

if TYPE_CHECKING:
    from ..analysis.facts import ModuleFacts
    from ..analysis.gym_config import AgentInstance
    from ..analysis.kept_functions import Functions
    from ..ftypes import InputError

# A YAML file without these words configures no agent instance.
_CONFIG_TOKENS = (b"responses_api_agents", b"config_paths")


def extract_facts(
    item: tuple[str, bytes, bool], functions: dict[str, Functions] | None = None
) -> tuple[ModuleFacts | InputError, bytes | None]:
    """The facts of a file (`path`, `data`, `cached`), or why there are none; when `cached`, also
    their cache entry, encoded here rather than by the parent, which is busy analysing.
    `functions`: each file's functions as last extracted by this process, reused where their
    lines are unchanged (see `kept_functions.Functions`); this file's are replaced by this extraction's."""
    from ..analysis.extract import extract
    from ..analysis.facts import FactsError
    from ..analysis.kept_functions import Functions

    rel, data, cached = item
    kept = None
    if functions is not None:
        kept = functions[rel] = Functions(functions.get(rel))
    try:
        facts = extract(rel, data, kept)
    except FactsError as exc:
        return exc.entry(rel), None
    return facts, facts_payload(facts) if cached else None


class Search(NamedTuple):
    """Files under `root` to read again and search for `names`."""

    root: Path
    rels: tuple[str, ...]
    names: tuple[str, ...]
    max_size: int


def files_naming(search: Search) -> list[tuple[str, str | None, bool]]:
    """Each file's content key (None: it cannot be read) and whether it names one of the names as
    a whole word."""
    named = word_matcher(search.names)
    found = []
    for rel in search.rels:
        try:
            data = read_file(search.root / rel, search.max_size)
        except UnreadableFile:
            found.append((rel, None, False))
            continue
        found.append((rel, content_key(rel, data), named(data)))
    return found


def import_lines_of(root: Path, rels: tuple[str, ...], max_size: int) -> list[bytes]:
    """Each file's import lines (none for a file that cannot be read)."""
    found = []
    for rel in rels:
        try:
            found.append(import_lines(read_file(root / rel, max_size)))
        except UnreadableFile:
            found.append(b"")
    return found


def instances_of(
    root: Path, configs: tuple[str, ...], max_size: int
) -> tuple[list[AgentInstance], dict[str, str], set[str]]:
    """The instances the configs define, the errors of the configs (with why), and the files among
    them that could not be read or parsed."""
    from ..analysis.gym_config import ConfigSet

    errors: dict[str, InputError] = {}
    failed: set[str] = set()

    @functools.cache
    def read(rel: str) -> bytes | None:
        try:
            return read_file(root / rel, max_size)
        except UnreadableFile as exc:
            errors[rel] = exc.entry(rel)
            if not isinstance(exc, TooLarge):
                failed.add(rel)
            return None

    @functools.cache
    def exists(rel: str) -> bool:  # asked again for each instance in a folder
        return os.path.exists(os.path.join(root, rel))

    config_set = ConfigSet(read, exists)
    instances = config_set.instances(tuple(rel for rel in configs if mentions_any(read(rel), _CONFIG_TOKENS)))
    return instances, {**errors, **config_set.errors}, failed | config_set.failed

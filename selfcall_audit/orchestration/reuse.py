"""Does the last whole-project result still hold after some files changed? Answered without
analysing again, from what that run saw of each file.

A run is a function of the file list, the settings, the YAML configs, the facts of the files it
parsed and a few questions it asked of file bytes: does a file name an agent base class, does it
hold one of the agent names found so far as a word (which decides the round of the prefilter
that parses it), could it post to a server client. If every changed file gives the answers the
last run got (and its facts, when it was parsed, are equal), the run would take the same steps
to the same findings. Most commits change files no analysis parses, or an agent file without
changing its facts (a comment that moves no line, which the file's outline tells without
extracting them: see `comments`), so the one-file runs of pre-commit are then answered about as
fast as for an unchanged tree.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from ..workspace.prefilter import POSTER_TOKENS, as_words, mentions_any, names_found
from .comments import comments_outside_strings, outline

if TYPE_CHECKING:
    from typing import Any

    Observed = dict[str, Any]  # plain data, kept in the cache beside the snapshot

# More changed files than this are analysed again: comparing them would cost as much.
MAX_CHANGED = 20


def observe(
    setup: str,
    contents: Mapping[str, str | None],
    parsed: Mapping[str, str],
    rounds: Sequence[Collection[str]],
    searched: Sequence[Collection[str]],
    posters: Mapping[str, bool],
    outlines: Mapping[str, str | None],
) -> Observed | None:
    """What a whole run saw: `contents` maps each source and config file to its content key,
    `parsed` each parsed file to its content key (and `outlines` to its outline, None if its bytes
    were not had), `rounds` are the
    files each prefilter round parsed (the first: those naming an agent base), `searched` the
    agent names each later round searched for, `posters` the files asked whether they could post.
    None when it cannot be trusted later."""
    if not as_words(name for names in searched for name in names):
        return None  # the names are searched for as `names_found` does
    first_round = {rel: number for number, files in enumerate(rounds) for rel in files}
    return {
        "setup": setup,
        "contents": dict(contents),
        "searched": [tuple(sorted(names)) for names in searched],
        "parsed": {rel: (key, first_round.get(rel), outlines.get(rel)) for rel, key in parsed.items()},
        "posters": dict(posters),
    }


def _first_round(data: bytes, base_tokens: tuple[bytes, ...], searched: list[tuple[str, ...]]) -> int | None:
    """The prefilter round that would parse a source file with these bytes (None: none would)."""
    if mentions_any(data, base_tokens):
        return 0
    found = names_found(name for names in searched for name in names)(data)
    return next((number for number, names in enumerate(searched, 1) if found.intersection(names)), None)


def still_holds(
    observed: Observed,
    setup: str,
    contents: Mapping[str, str | None],
    sources: Collection[str],
    unusable: Collection[str],
    base_tokens: tuple[bytes, ...],
    read: Callable[[str], bytes | None],
    key: Callable[[str], str | None],
    same_facts: Callable[[str, str], bool],
) -> Observed | None:
    """The observations brought up to date when the result they belong to still holds for the
    files as they are now; else None. `unusable`: the files a new look at cannot vouch for (YAML
    configs, whose instances are not observed, and files that had errors); `key` gives a file's
    content key (the files parsed outside `contents`, imported test code, are compared by it);
    `same_facts(rel, then)`: are the file's facts now those its bytes of content key `then` had?"""
    if observed["setup"] != setup:
        return None
    then = observed["contents"]
    changed = {rel for rel in then.keys() | contents.keys() if then.get(rel) != contents.get(rel)}
    changed.update(
        rel for rel, seen in observed["parsed"].items() if rel not in contents and key(rel) != seen[0]
    )
    if len(changed) > MAX_CHANGED:
        return None
    parsed = dict(observed["parsed"])
    for rel in sorted(changed):
        data = read(rel) if rel not in unusable else None
        if data is None:
            return None
        asked = observed["posters"].get(rel)
        if asked is not None and mentions_any(data, POSTER_TOKENS) != asked:
            return None
        seen = parsed.get(rel)
        if rel in sources and _first_round(data, base_tokens, observed["searched"]) != (seen and seen[1]):
            return None
        if seen is not None and key(rel) != seen[0]:
            shape, comment_lines = outline(data)
            comments_alone = shape == seen[2] and comments_outside_strings(data, comment_lines)
            if not comments_alone and not same_facts(rel, seen[0]):
                return None
            parsed[rel] = (key(rel), seen[1], shape)
    return {**observed, "contents": dict(contents), "parsed": parsed}

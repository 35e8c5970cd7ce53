"""Byte-level prefilters: which files can matter, decided without parsing them.

Sound for everything but code that builds names dynamically: a file that names no agent base
class, no agent found so far and no route can only contribute through imports, which the index
follows on demand.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache

# A module without any of these can hold no function that calls a server client.
POSTER_TOKENS = (b"server_client", b"server_name", b".post(", b".request(")


def base_tokens(agent_bases: Iterable[str], route: str = "/v1/responses") -> tuple[bytes, ...]:
    """A file that names no agent base class and registers no agent route as written
    (`app.post("/v1/responses")`, `add_api_route('/v1/responses', ...)`) can only matter
    through names found later."""
    path = route.split("?")[0].encode()
    registered = (b'("' + path + b'"', b"('" + path + b"'")
    return tuple({base.rsplit(".", 1)[-1].encode() for base in agent_bases} | set(registered))


def mentions_any(data: bytes | None, tokens: Iterable[bytes]) -> bool:
    return data is not None and any(token in data for token in tokens)


def _trie(words: Iterable[bytes]) -> bytes:
    """One regex for many words, as a trie (`Agent(?:A|B)`): a flat alternation tries every word
    at every position, which is slow with hundreds of agent names over thousands of files."""
    root: dict = {}
    for word in words:
        node = root
        for byte in word:
            node = node.setdefault(byte, {})
        node[-1] = {}

    def build(node: dict) -> bytes:
        branches = [
            re.escape(bytes([byte])) + build(child) for byte, child in sorted(node.items()) if byte != -1
        ]
        if not branches:
            return b""
        body = branches[0] if len(branches) == 1 else b"(?:" + b"|".join(branches) + b")"
        if -1 not in node:
            return body
        return (body if len(branches) == 1 and len(body) == 1 else b"(?:" + body + b")") + b"?"

    return build(root)


def word_matcher(names: Iterable[str]) -> Callable[[bytes | None], bool]:
    """A predicate: does the text name one of `names` as a whole word? (Plain searches first:
    word-boundary checks are slow, and most files name none.)"""
    unique = {n for n in names if n}
    alternatives = _trie(n.encode() for n in unique)
    if not alternatives:
        return lambda data: False
    anywhere = [(part, re.compile(_trie(n.encode() for n in group))) for part, group in _shared_parts(unique)]
    as_word = re.compile(rb"\b(?:" + alternatives + rb")\b")
    return lambda data: (
        data is not None
        and any(part in data and pattern.search(data) is not None for part, pattern in anywhere)
        and as_word.search(data) is not None
    )


_PART = 5  # bytes of the part names share (`Agent`)
_MAX_GROUPS = 8


def _shared_parts(names: set[str]) -> list[tuple[bytes, set[str]]]:
    """The names in groups, each with a part all its names contain: a text without the part names
    none of them, and a plain search for it is many times faster than the group's regex (agent
    names mostly share `Agent`). Names left over share the empty part."""
    groups: list[tuple[bytes, set[str]]] = []
    left = set(names)
    while left and len(groups) < _MAX_GROUPS - 1:
        holders: dict[bytes, set[str]] = {}
        for name in left:
            raw = name.encode()
            for start in range(len(raw) - _PART + 1):
                holders.setdefault(raw[start : start + _PART], set()).add(name)
        if not holders:
            break
        part, group = max(holders.items(), key=lambda item: (len(item[1]), item[0]))
        if len(group) < 2:
            break
        groups.append((part, group))
        left -= group
    return [*groups, (b"", left)] if left else groups


# In a bytes pattern word characters are ASCII letters, digits and the underscore only.
_WORDS = re.compile(rb"\w+")


def as_words(names: Iterable[str]) -> bool:
    """Does `names_found` answer for these names as `word_matcher` does (ASCII identifiers)?"""
    return all(name.isascii() and name.isidentifier() for name in names)


def names_found(names: Iterable[str]) -> Callable[[bytes | None], frozenset[str]]:
    """Which of `names` the text holds as whole words: for ASCII identifiers, `word_matcher(some)`
    answers True exactly when this set meets `some`. Such a name is a whole word where it is a
    whole run of word characters, so the text's words are looked up (once a plain search found one
    of the names at all: most texts hold none), not searched for name by name."""
    wanted = {name.encode(): name for name in names if name}

    def found(data: bytes | None) -> frozenset[str]:
        if not data or not any(raw in data for raw in wanted):
            return frozenset()
        return frozenset(wanted[word] for word in _WORDS.findall(data) if word in wanted)

    return found


def import_lines(data: bytes | None) -> bytes:
    """Just the lines that start an import statement (`from`/`import` after indentation): all
    `importers` looks at. Found by searching for the two words, many times faster than a
    multi-line regex over every file."""
    if not data:
        return b""
    starts = set()
    for word in (b"import", b"from"):
        after = len(word)
        at = data.find(word)
        while at != -1:
            start = data.rfind(b"\n", 0, at) + 1
            if data[at + after : at + after + 1] in (b" ", b"\t") and not data[start:at].strip(b" \t"):
                starts.add(start)
            at = data.find(word, at + after)
    lines = []
    for start in sorted(starts):
        end = data.find(b"\n", start)
        lines.append(data[start : len(data) if end == -1 else end])
    return b"\n".join(lines)


def importers(modules: Iterable[str], files: Iterable[tuple[str, bytes | None]]) -> list[str]:
    """Files with an import line naming one of `modules` (root-relative .py paths): by its dotted
    tail (`pkg.constants`) anywhere, or by its bare name from the same folder (sibling and
    relative imports)."""
    tails: set[str] = set()
    by_folder: dict[str, set[str]] = {}
    for rel in modules:
        parts = rel.removesuffix(".py").split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not parts:
            continue
        tails.add(".".join(parts[-2:]))
        by_folder.setdefault("/".join(rel.split("/")[:-1]), set()).add(parts[-1])
    tail_line = _import_line(tails)
    # a plain search first: most files name none. A name that is not UTF-8 is searched as its bytes.
    needles = [tail.encode("utf-8", "surrogateescape") for tail in tails]
    sibling_line = {folder: _import_line(names) for folder, names in by_folder.items()}
    found = []
    for rel, data in files:
        if data is None:
            continue
        sibling = sibling_line.get(rel.rpartition("/")[0])
        if (any(n in data for n in needles) and tail_line(data)) or (sibling and sibling(data)):
            found.append(rel)
    return found


@lru_cache(maxsize=256)
def _import_line_pattern(names: frozenset[str]) -> re.Pattern[bytes] | None:
    alternatives = b"|".join(re.escape(n.encode("utf-8", "surrogateescape")) for n in sorted(names))
    if not alternatives:
        return None
    return re.compile(rb"(?m)^[ \t]*(?:from|import)[ \t][^\n]*(?<!\w)(?:" + alternatives + rb")\b")


def _import_line(names: set[str]) -> Callable[[bytes], bool]:
    pattern = _import_line_pattern(frozenset(names))
    return (lambda data: False) if pattern is None else (lambda data: pattern.search(data) is not None)

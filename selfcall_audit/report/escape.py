"""Text taken from the scanned repository (file names, YAML names, code, messages built from
them) made safe to print: a newline in a file name must not start a line of its own (a CI runner
reads `::error ...` at the start of a line as a command) and an escape sequence must not reach a
terminal. Each such character is shown, escaped, where it was: never passed raw, never dropped.
"""

from __future__ import annotations

import re

# C0 controls, DEL and C1 controls; the line and paragraph separators some viewers break lines
# at; bidirectional overrides and isolates, which reorder what a reader sees ("trojan source");
# lone surrogates, which stand for the undecodable bytes of a file name. Compiled when first used
# (`re` keeps it): the JSON report never uses it, and compiling it takes 1 ms.
_UNSAFE = "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

# The colours the reports write themselves, in the SGR codes rich writes for them (a test holds the
# two together): the concise report's, and the text report's lines after its findings.
SGR = {
    "bold": "\x1b[1m",
    "cyan": "\x1b[36m",
    "red": "\x1b[31m",
    "yellow": "\x1b[33m",
    "bold red": "\x1b[1;31m",
    "bold yellow": "\x1b[1;33m",
}
RESET = "\x1b[0m"


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape): shown as that byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def neutralise(text: str, keep: str = "") -> str:
    """`text` with every control character, newline and reordering mark escaped visibly
    (ESC becomes `\\x1b`, a newline `\\n`) but those in `keep` (a code frame keeps its tabs);
    other text, backslashes included, is left as it is."""
    if keep:
        return re.sub(
            _UNSAFE, lambda match: match.group() if match.group() in keep else _escaped(match), text
        )
    return re.sub(_UNSAFE, _escaped, text)


_GIT_NAMED = {
    7: b"\\a",
    8: b"\\b",
    9: b"\\t",
    10: b"\\n",
    11: b"\\v",
    12: b"\\f",
    13: b"\\r",
    34: b'\\"',
    92: b"\\\\",
}


def git_quoted(name: str) -> bytes:
    """A file name in a patch header as git writes it (`quote_c_style`, `core.quotePath` on): as
    it is when every byte is printable ASCII, else in double quotes with each control character,
    quote, backslash and non-ASCII byte escaped, so that `git apply` and `patch` read it back whole
    (a tab would otherwise end the name). The bytes are those of the name on disk."""
    raw = name.encode("utf-8", "surrogateescape")
    if all(0x20 <= byte < 0x7F and byte not in (34, 92) for byte in raw):
        return raw
    quoted = b"".join(
        _GIT_NAMED.get(byte) or (bytes([byte]) if 0x20 <= byte < 0x7F else b"\\%03o" % byte) for byte in raw
    )
    return b'"' + quoted + b'"'

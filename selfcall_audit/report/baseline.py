"""Baselines for gradual adoption: record today's findings, then report only new ones.

A finding is identified by a fingerprint that ignores where it sits in the file: the rule, the
file, the agent and method, the call's source text with formatting and comments removed, and an
occurrence index among identical calls. Line shifts and unrelated edits keep it; editing the
call itself, moving it to another method or renaming the file makes it a new finding.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tokenize
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from ..config import Settings
from ..ftypes import Finding, Report
from ..rules import FINDING_CODES
from ..workspace.discovery import in_scope
from ..workspace.write import replace_file

VERSION = 1
_CLOSERS = frozenset({")", "]", "}"})
_SKIPPED_TOKENS = frozenset(
    {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
)


class BaselineError(Exception):
    """A baseline file that is missing or not one we wrote: a usage error, never a traceback."""


def _call_text(root: Path, finding: Finding, sources: dict[str, list[bytes]]) -> str:
    if finding.path not in sources:
        try:
            sources[finding.path] = (root / finding.path).read_bytes().splitlines()
        except OSError:
            sources[finding.path] = []
    span = sources[finding.path][finding.line - 1 : finding.end_line]
    lines = [line.decode("utf-8", "replace") for line in span]
    if not lines:
        return ""
    if len(lines) == 1:
        return lines[0][finding.column - 1 : finding.end_column - 1]
    return "\n".join([lines[0][finding.column - 1 :], *lines[1:-1], lines[-1][: finding.end_column - 1]])


def normalize_call(text: str) -> str:
    """The call's tokens without layout, comments or a trailing comma, so reformatting keeps it."""
    try:
        found = tokenize.generate_tokens(io.StringIO(text).readline)
        tokens = [t.string for t in found if t.type not in _SKIPPED_TOKENS]
    except (tokenize.TokenError, SyntaxError):
        return " ".join(text.split())
    following = [*tokens[1:], ""][: len(tokens)]  # nothing follows the last token, nor an empty text
    kept = [tok for tok, nxt in zip(tokens, following, strict=True) if not (tok == "," and nxt in _CLOSERS)]
    return " ".join(kept)


def fingerprints(report: Report) -> list[str]:
    """One fingerprint per finding of the report, in the report's order."""
    sources: dict[str, list[bytes]] = {}
    seen: Counter[tuple[str, ...]] = Counter()
    result = []
    for finding in report.findings:
        identity = (
            finding.code,
            finding.path,
            finding.agent,
            finding.method,
            normalize_call(_call_text(report.root, finding, sources)),
        )
        occurrence = seen[identity]
        seen[identity] += 1
        # surrogateescape: a file name that is not UTF-8 comes from the file system as lone surrogates
        digest = hashlib.sha256("\0".join((*identity, str(occurrence))).encode("utf-8", "surrogateescape"))
        result.append(digest.hexdigest()[:20])
    return result


def _entries(report: Report) -> list[dict]:
    entries = [
        {"code": f.code, "path": f.path, "agent": f.agent, "method": f.method, "fingerprint": fp}
        for f, fp in zip(report.findings, fingerprints(report), strict=True)
    ]
    return sorted(entries, key=lambda e: (e["path"], e["agent"], e["method"], e["code"], e["fingerprint"]))


def write_baseline(report: Report, path: Path) -> int:
    """Write the report's findings to `path`; returns how many. Sorted and line-free, so it diffs well."""
    entries = _entries(report)
    document = {"version": VERSION, "tool": "selfcall-audit", "findings": entries}
    replace_file(path, (json.dumps(document, indent=2) + "\n").encode())  # a failed write keeps the old one
    return len(entries)


def load_baseline(path: Path) -> list[dict]:
    """The entries of a baseline file, or BaselineError saying what is wrong with it."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"baseline file not found: {path} (write one with --write-baseline)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"cannot read baseline file {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise BaselineError(f"baseline file {path} is not valid JSON: {exc}") from None
    except RecursionError:  # the decoder's own bound on nesting (a baseline nests 3 levels deep)
        raise BaselineError(f"{path} is not a selfcall-audit baseline (nested too deeply)") from None
    if not isinstance(document, dict) or not isinstance(document.get("findings"), list):
        raise BaselineError(f"{path} is not a selfcall-audit baseline (no `findings` list)")
    if document.get("version") != VERSION:
        found = document.get("version")
        raise BaselineError(f"{path}: unsupported baseline version {found!r} (expected {VERSION})")
    entries = document["findings"]
    required = ("code", "path", "agent", "method", "fingerprint")
    for number, entry in enumerate(entries):
        if not isinstance(entry, dict) or not all(isinstance(entry.get(key), str) for key in required):
            raise BaselineError(f"{path}: entry {number} needs the string fields {', '.join(required)}")
    return entries


def _scopes(root: Path, paths: Iterable[Path]) -> tuple[str, ...]:
    rels = (os.path.relpath(Path(p).resolve(), root).replace(os.sep, "/") for p in paths)
    return tuple("" if rel == "." else rel for rel in rels)


def unmatched(report: Report, known: Counter[str]) -> list[Finding]:
    """The findings of `report` whose fingerprint `known` does not hold: each known fingerprint
    matches as many findings as it counts, and is used up in `known` as it matches."""
    kept = []
    for finding, fingerprint in zip(report.findings, fingerprints(report), strict=True):
        if known[fingerprint] > 0:
            known[fingerprint] -= 1
        else:
            kept.append(finding)
    return kept


def apply_baseline(
    report: Report, entries: list[dict], paths: Iterable[Path], settings: Settings
) -> tuple[Report, int]:
    """The report without baselined findings, its `baseline_stale` set; and how many were hidden.

    An entry is stale when nothing matches it although its file was in the scan and its rule
    selected: a scan of some paths, or of some rules, leaves the other entries alone.
    """
    available = Counter(entry["fingerprint"] for entry in entries)
    kept = unmatched(report, available)
    scopes = _scopes(report.root, paths)
    stale = []
    for entry in entries:
        if available[entry["fingerprint"]] <= 0:
            continue
        available[entry["fingerprint"]] -= 1
        if (
            entry["code"] in FINDING_CODES
            and settings.selects(entry["code"])
            and in_scope(entry["path"], scopes)
        ):
            stale.append(entry)
    hidden = len(report.findings) - len(kept)
    return report._replace(findings=kept, baseline_stale=tuple(stale)), hidden


def notes_for(report: Report, hidden: int, path: Path) -> list[str]:
    """What to tell on stderr after a scan against a baseline."""
    lines = []
    if hidden:
        lines.append(f"selfcall-audit: {hidden} known finding(s) recorded in {path} not shown")
    if report.baseline_stale:
        lines.append(
            f"selfcall-audit: {len(report.baseline_stale)} baseline entr"
            f"{'y' if len(report.baseline_stale) == 1 else 'ies'} no longer found (fixed or changed); "
            f"refresh with --write-baseline {path}:"
        )
        lines += [f"  {e['path']}: {e['code']} {e['agent']}.{e['method']}" for e in report.baseline_stale]
    return lines

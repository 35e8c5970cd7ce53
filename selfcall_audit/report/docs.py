"""The rules page (docs/rules.md) and `explain`'s text, generated from the rules registry so that
neither disagrees with it.

python -m selfcall_audit.report.docs --write docs/rules.md   # regenerate between the markers
python -m selfcall_audit.report.docs --check docs/rules.md   # exit 1 when it is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..rules import FINDING_CODES, RULES, Rule

START, END = "<!-- rules:start -->", "<!-- rules:end -->"


def _default(rule: Rule) -> str:
    if rule.code not in FINDING_CODES:
        return "always (an error entry, not a finding)"
    return "on" if rule.default_on else f"off (`--select {rule.code}` or `--strict`)"


def _example(rule: Rule) -> list[str]:
    return [
        f"## {rule.code} `{rule.name}`",
        "",
        rule.explanation,
        "",
        "Before:",
        "",
        "```python",
        rule.bad,
        "```",
        "",
        "After:",
        "",
        "```python",
        rule.good,
        "```",
        "",
    ]


def explanation(rule: Rule) -> str:
    """The rule as `selfcall-audit explain` prints it: plain text, the examples indented."""
    fixable = "yes, with `selfcall-audit fix`" if rule.fixable else "no"
    lines = [
        f"{rule.code} ({rule.name})",
        "",
        rule.summary,
        "",
        rule.explanation,
        "",
        f"Default: {_default(rule)}. Fixable: {fixable}.",
        "",
        "Example:",
        *(f"    {line}" for line in rule.bad.splitlines()),
        "",
        "Instead:",
        *(f"    {line}" for line in rule.good.splitlines()),
    ]
    return "\n".join(lines)


def render_rules() -> str:
    """The text that belongs between the markers: a table, then each rule with before/after."""
    lines = [
        "| code | name | what it finds | default | fixable |",
        "| --- | --- | --- | --- | --- |",
    ]
    for rule in RULES.values():
        fixable = "yes (`selfcall-audit fix`)" if rule.fixable else "no"
        lines.append(f"| {rule.code} | `{rule.name}` | {rule.summary} | {_default(rule)} | {fixable} |")
    lines.append("")
    for rule in RULES.values():
        lines += _example(rule)
    return "\n".join(lines)


def sync(text: str) -> str:
    """`text` with the rules section replaced by the generated one; ValueError without markers."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {START} ... {END} markers")
    return f"{text[: start + len(START)]}\n{render_rules()}\n{text[end:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m selfcall_audit.report.docs", description=__doc__.splitlines()[0]
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", type=Path, metavar="FILE", help="regenerate the rules section of FILE")
    action.add_argument("--check", type=Path, metavar="FILE", help="exit 1 if FILE's rules section is stale")
    args = parser.parse_args(argv)
    path: Path = args.write or args.check
    text = path.read_text(encoding="utf-8")
    try:
        updated = sync(text)
    except ValueError as exc:
        print(f"{path}: {exc}", file=sys.stderr)
        return 2
    if args.write:
        if updated != text:
            path.write_text(updated, encoding="utf-8")
        return 0
    if updated != text:
        print(
            f"{path}: the rules section is out of date; run python -m selfcall_audit.report.docs --write {path}"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

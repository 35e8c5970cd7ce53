"""The README's rules section is generated from the rules registry and must match it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from selfcall_audit.report.docs import END, START, render_rules, sync
from selfcall_audit.rules import RULES

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_rules_section_is_in_sync_with_the_registry() -> None:
    text = README.read_text(encoding="utf-8")

    assert sync(text) == text, "run: python -m selfcall_audit.report.docs --write README.md"


def test_every_rule_has_a_table_row_and_a_before_after_example() -> None:
    rendered = render_rules()

    for code, rule in RULES.items():
        assert f"| {code} | `{rule.name}` | {rule.summary} |" in rendered
        section = rendered.split(f"#### {code} ")[1].split("#### ")[0]
        assert f"Before:\n\n```python\n{rule.bad}\n```" in section
        assert f"After:\n\n```python\n{rule.good}\n```" in section
    assert "| SCA003 | `possible-agent-self-call` |" in rendered
    assert "off (`--select SCA003` or `--strict`)" in rendered


def test_sync_replaces_only_between_the_markers() -> None:
    stale = f"intro\n{START}\nold table\n{END}\noutro\n"

    synced = sync(stale)

    assert synced == f"intro\n{START}\n{render_rules()}\n{END}\noutro\n"
    assert sync(synced) == synced
    with pytest.raises(ValueError, match="markers"):
        sync("no markers here")


def test_write_and_check_from_the_command_line(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{START}\nold\n{END}\n")

    def docs(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "selfcall_audit.report.docs", *args, str(readme)]
        return subprocess.run(command, capture_output=True, text=True, timeout=60)

    stale = docs("--check")
    written = docs("--write")
    fresh = docs("--check")

    assert stale.returncode == 1
    assert "out of date" in stale.stdout
    assert written.returncode == 0
    assert fresh.returncode == 0
    assert "| SCA001 |" in readme.read_text()

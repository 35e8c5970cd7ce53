"""The text report loads rich only to draw findings: a clean tree, or one whose only entries are
files that could not be analysed, is reported on a terminal without it, in the same bytes."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text
from test_quick_scan import imported

from selfcall_audit.report.escape import SGR
from selfcall_audit.report.text import styled

AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class QuietAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        return body
"""


@pytest.fixture
def clean(tmp_path: Path) -> Path:
    """A project with one agent and no self-call."""
    root = tmp_path / "clean"
    (root / "responses_api_agents" / "quiet").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "clean"\n')
    (root / "responses_api_agents" / "quiet" / "app.py").write_text(AGENT)
    return root


def test_a_report_without_findings_is_written_without_rich(
    clean: Path, demo: Path, command, monkeypatch
) -> None:
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # each import on stderr, as `-X importtime`
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    nothing = command("scan", "--format", "text", cwd=clean)
    (clean / "broken.py").write_text(AGENT.replace("(SimpleResponsesAPIAgent)", "(SimpleResponsesAPIAgent"))
    broken = command("scan", "--format", "text", cwd=clean)
    findings = command("scan", "--format", "text", cwd=demo)

    assert nothing.returncode == 0, nothing.stderr
    assert nothing.stdout.startswith("\x1b[1mNo self-calls in 1 file, 1 agent (")
    assert nothing.stdout.endswith(").\x1b[0m\n")
    error = broken.stdout.splitlines()[0]  # the parser's words differ between Pythons
    assert error.startswith("\x1b[31mbroken.py:4:") and error.endswith("\x1b[0m")
    assert "SCA900 syntax error" in error
    assert broken.stdout.splitlines()[1].startswith(
        "\x1b[1mNo self-calls in 2 files, 1 agent; 1 file could not"
    )
    for run in (nothing, broken):
        assert not {"rich", "pygments"} & imported(run.stderr)
    assert {"rich", "pygments"} <= imported(findings.stderr)  # drawn with rich, as before


@pytest.mark.parametrize("color", [True, False])
@pytest.mark.parametrize("style", sorted(SGR))
@pytest.mark.parametrize(
    "line",
    [
        "No self-calls in 3 files, 1 agent (12 ms).",
        "agents/é/app.py:1:1: SCA900 cannot read: 日本語 " + "x" * 150,
    ],
)
def test_the_colours_written_without_rich_are_what_rich_writes(line: str, style: str, color: bool) -> None:
    buffer = StringIO()
    console = Console(
        file=buffer,
        width=80,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
    )
    console.print(Text(line, style=style), soft_wrap=True)

    assert styled(line, style, color) == buffer.getvalue()

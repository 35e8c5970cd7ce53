"""Read at 80 columns: the `agents` table, the text report's code frames and per-agent table fit,
paths lose their start (with an ellipsis) rather than being wrapped letter by letter (one progress
display per run: tests/test_progress.py)."""

from __future__ import annotations

from pathlib import Path

from selfcall_audit import api
from selfcall_audit.report import inventory, text

DEEP = "responses_api_agents/conversational_tool_use/simulation/with/a/deeply/nested/layout/app.py"
LONG_LINE_AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class ToolUseAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        return await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body.responses_create_params)  # SCA001
"""


def make_project(root: Path) -> Path:
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "wide"\n')
    (root / DEEP).parent.mkdir(parents=True)
    (root / DEEP).write_text(LONG_LINE_AGENT)
    return root


def test_the_agents_table_fits_80_columns_with_paths_abbreviated_from_the_left(
    tmp_path: Path, monkeypatch
) -> None:
    root = make_project(tmp_path / "repo")
    monkeypatch.chdir(root)
    report = api.analyze([root], inventory=True)

    table = inventory.render_table(inventory.rows(report, ("",)), root, 80, color=False)

    lines = table.splitlines()
    assert max(len(line) for line in lines) <= 80
    (class_line,) = [line for line in lines if "ToolUseAgent" in line]
    assert "ToolUseAgent(SimpleResponsesAPIAgent)" in class_line  # whole, not folded letter by letter
    (path_line,) = [line for line in lines if "app.py:4" in line]
    shown = path_line.split()[0]
    assert shown.startswith("…") and f"{DEEP}:4".endswith(shown[1:])  # its end, the file name kept


def test_the_text_report_frames_and_table_fit_80_columns(tmp_path: Path, monkeypatch) -> None:
    root = make_project(tmp_path / "repo")
    monkeypatch.chdir(root)
    report = api.analyze([root])

    rendered = text.render(report, width=80)

    # the finding's header and evidence lines are prose, soft-wrapped by the terminal itself
    prose = ("responses_api_agents/", "  = ", "Found ")
    drawn = [line for line in rendered.splitlines() if not line.startswith(prose)]
    assert drawn and max(len(line) for line in drawn) <= 80
    (call,) = [line for line in drawn if "server_client.post" in line]
    assert call.endswith("…")  # the code line cut, and saying so
    (row,) = [line for line in drawn if "ToolUseAgent" in line]
    assert "…" in row and row.split("…")[1].split()[0] in DEEP  # the path's end, whole words of it


def test_a_frame_at_the_top_of_a_long_file_fits_80_columns(tmp_path: Path, monkeypatch) -> None:
    """The line numbers' column is as wide as the numbers shown (`7`), not as the file's last one
    (`1206`): the code beside it was cut for the narrower column."""
    root = make_project(tmp_path / "repo")
    (root / DEEP).write_text(LONG_LINE_AGENT + "# filler\n" * 1200)
    monkeypatch.chdir(root)
    report = api.analyze([root])

    rendered = text.render(report, width=80, summary=False)

    (call,) = [line for line in rendered.splitlines() if line.startswith("❱")]
    assert call.startswith("❱ 6     ") and call.endswith("…")
    assert len(call) <= 80

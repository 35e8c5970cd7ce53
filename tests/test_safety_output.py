"""Names and code from the scanned repository cannot write commands into CI logs or escape
sequences into a terminal, in any output format: what they hold is shown, escaped."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from cli_support import drained, finding_lines
from safety_support import command_line, run

# A YAML instance name and a folder name that try to start GitHub Actions workflow commands and
# to set the terminal's title; a comment in the self-call that tries to clear the screen.
EVIL_YAML = '"evil\\n::error file=app.py::pwned\\e]0;yaml\\a"'
EVIL_FOLDER = "x\n::add-mask::secret\x1b]0;file\x07"
AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class {name}(SimpleResponsesAPIAgent):
    async def run(self, body):
        await self.server_client.post(
            server_name=self.config.{target},  # \x1b]0;frame\x07\x1b[2J
            url_path="/v1/responses",
            json=body,
        )
"""
RAW_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f]")  # anything but tab and newline


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "repo"
    loop = root / "responses_api_agents" / "loop"
    (loop / "configs").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "hostile"\n')
    (loop / "app.py").write_text(AGENT.format(name="LoopAgent", target="peer.name"))
    (loop / "configs" / "loop.yaml").write_text(
        f"{EVIL_YAML}:\n  responses_api_agents:\n    loop:\n      entrypoint: app.py\n"
        f"      peer: {{type: responses_api_agents, name: {EVIL_YAML}}}\n"
    )
    odd = root / "responses_api_agents" / EVIL_FOLDER
    odd.mkdir()
    (odd / "app.py").write_text(AGENT.format(name="EchoAgent", target="name"))
    return root


def test_piped_concise_output_starts_no_workflow_command(cli, hostile: Path) -> None:
    done = cli("scan", "--no-cache", hostile, cwd=hostile)  # paths are printed relative to the current folder

    assert done.exit_code == 1, done.stderr
    lines = finding_lines(done.stdout)
    assert len(lines) == 2 and all(line.startswith("responses_api_agents/") for line in lines)
    assert "responses_api_agents/x\\n::add-mask::secret\\x1b]0;file\\x07/app.py:6:15: SCA001" in lines[1]
    assert "instance `evil\\n::error file=app.py::pwned\\x1b]0;yaml\\x07`" in lines[0]
    assert not RAW_CONTROLS.search(done.stdout)


def test_github_output_is_one_command_per_finding(cli, hostile: Path) -> None:
    done = cli("scan", "--no-cache", "--format", "github", hostile)

    lines = done.stdout.splitlines()
    assert len(lines) == 2
    assert all(line.startswith("::error file=responses_api_agents/") for line in lines)
    assert not RAW_CONTROLS.search(done.stdout)
    assert "\\x1b]0;yaml\\x07" in lines[0] and "\\x1b]0;file\\x07" in lines[1]


@pytest.mark.parametrize("output_format", ["text", "concise", "github"])
def test_every_line_format_escapes_what_the_repository_holds(cli, output_format: str, hostile: Path) -> None:
    done = cli("scan", "--no-cache", "--format", output_format, hostile)

    assert done.exit_code == 1, done.stderr
    assert not RAW_CONTROLS.search(done.stdout)
    assert not [
        line for line in done.stdout.splitlines() if line.startswith("::") and "title=SCA" not in line
    ]
    assert "\\x1b]0;file\\x07" in done.stdout and "\\x1b]0;yaml\\x07" in done.stdout


@pytest.mark.parametrize("output_format", ["json", "sarif"])
def test_json_formats_escape_control_characters_and_keep_the_exact_values(
    cli, output_format: str, hostile: Path
) -> None:
    done = cli("scan", "--no-cache", "--format", output_format, hostile)

    assert not RAW_CONTROLS.search(done.stdout)
    text = json.dumps(json.loads(done.stdout), ensure_ascii=False)  # the values, decoded
    assert "evil\\n::error file=app.py::pwned\\u001b]0;yaml\\u0007" in text
    assert EVIL_FOLDER.replace("\n", "\\n").replace("\x1b", "\\u001b").replace("\x07", "\\u0007") in text or (
        output_format == "sarif"  # SARIF's locations are URIs: percent-encoded
        and "x%0A%3A%3Aadd-mask%3A%3Asecret%1B%5D0%3Bfile%07" in done.stdout
    )


@pytest.mark.slow
def test_fix_output_escapes_file_names(hostile: Path) -> None:
    done = run("fix", "--check", "--no-cache", hostile)

    assert not RAW_CONTROLS.search(done.stdout + done.stderr)
    assert not [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("::")]
    assert "x\\n::add-mask::secret\\x1b]0;file\\x07/app.py" in done.stdout


@pytest.mark.skipif(os.name != "posix", reason="runs the command on a pseudo-terminal")
@pytest.mark.parametrize("subcommand", [["scan"], ["agents"]])
def test_on_a_terminal_no_sequence_from_the_repository_reaches_it(
    subcommand: list[str], hostile: Path
) -> None:
    import pty

    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        command_line(*subcommand, "--no-cache", hostile),
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
        env={**os.environ, "COLUMNS": "250", "TERM": "xterm-256color"},
    )
    os.close(terminal)
    shown = drained(controller)
    process.wait(timeout=120)

    assert b"\x1b[" in shown  # the report's own colours do reach the terminal
    assert b"\x1b]" not in shown and b"\x07" not in shown and b"\x1b[2J" not in shown
    assert b"\\x1b]0;yaml\\x07" in shown or b"\\x1b]0;file\\x07" in shown
    if subcommand == ["scan"]:
        assert b"\\x1b]0;frame\\x07\\x1b[2J" in shown  # the code frame, escaped


@pytest.mark.slow
def test_fix_diff_headers_escape_file_names(hostile: Path) -> None:
    done = run("fix", "--diff", "--no-cache", hostile)

    headers = [line for line in done.stdout.splitlines() if line.startswith(("--- ", "+++ "))]
    # quoted as git quotes it, so that `git apply` reads the name back whole
    assert '+++ "b/responses_api_agents/x\\n::add-mask::secret\\033]0;file\\a/app.py"' in headers
    assert not [line for line in done.stdout.splitlines() if line.startswith("::")]

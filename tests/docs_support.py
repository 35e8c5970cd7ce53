"""Reading and running the documentation's examples (tests/test_docs.py says how they are written).

A ```console block runs line by line: each `$ ` line is a shell command, the lines under it the
output it must print (in order; a line `...` stands for lines left out, and `...` inside a line
for any text; a duration such as `(40 ms)` matches any duration). An HTML comment just above the
block says where it runs and the exit status of each command:

    <!-- docs-test: in=demo exit=1,0 -->        one status per command, or one for all
    <!-- docs-test: skip="installs packages" --> not run, with the reason (keep these few)

`in=` names one of the WORKSPACES below; each block gets a fresh one in a temporary folder, and
its commands run in one shell, so `cd` carries over to the next command of the block.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "fixtures" / "demo-gym"
PAGES = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]
RULES_PAGE = REPO / "docs" / "rules.md"
INTEGRATION = REPO / "docs" / "integration.md"
USAGE = REPO / "docs" / "usage.md"

DIRECTIVE = re.compile(r"<!-- docs-test: (.*?) -->")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)
DURATION = re.compile(r"\((?:\d[\d.,]*\s?m?s)\)")
EXIT_MARK = "@@docs-test exit "


def _git_init(folder: Path) -> None:
    subprocess.run(["git", "init", "-q", str(folder)], check=True)


def _checkout(tmp: Path) -> Path:
    """The top of a checkout of this repository, as far as the examples read it."""
    top = tmp / "checkout"
    shutil.copytree(DEMO, top / "fixtures" / "demo-gym")
    _git_init(top)
    return top


def demo_repo(tmp: Path) -> Path:
    """A NeMo Gym-style repository: a git copy of the demo."""
    top = tmp / "demo-gym"
    shutil.copytree(DEMO, top)
    _git_init(top)
    return top


def _monorepo(tmp: Path) -> Path:
    """A repository whose own project holds the demo as a nested project in gym/."""
    top = tmp / "monorepo"
    shutil.copytree(DEMO, top / "gym")
    (top / "pyproject.toml").write_text('[project]\nname = "mono"\nversion = "0"\n\n[tool.selfcall-audit]\n')
    _git_init(top)
    return top


WORKSPACES: dict[str, Callable[[Path], Path]] = {
    "checkout": _checkout,
    "demo": demo_repo,
    "monorepo": _monorepo,
}


@dataclass(frozen=True)
class Command:
    line: str
    expected: list[str]


@dataclass(frozen=True)
class Block:
    page: Path
    lineno: int
    options: dict[str, str]
    commands: list[Command]

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.lineno}"


def _options(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) if "=" in item else (item, "") for item in shlex.split(text))


def console_blocks(page: Path) -> Iterator[Block]:
    text = page.read_text(encoding="utf-8")
    for match in FENCE.finditer(text):
        if match.group(1) != "console":
            continue
        lineno = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        directive = DIRECTIVE.fullmatch(before.strip())
        commands: list[Command] = []
        for line in match.group(2).splitlines():
            if line.startswith("$ "):
                commands.append(Command(line[2:], []))
            elif commands:
                commands[-1].expected.append(line)
            else:
                raise AssertionError(f"{page.name}:{lineno}: a console block starts with a `$ ` command")
        yield Block(page, lineno, _options(directive.group(1)) if directive else {}, commands)


ALL_BLOCKS = [block for page in PAGES if page.exists() for block in console_blocks(page)]


def _pattern(line: str) -> re.Pattern[str]:
    """`line` as a regular expression: `...` matches any text, a duration any duration."""
    pieces = [
        ".*".join(re.escape(part) for part in piece.split("...")) for piece in DURATION.split(line.rstrip())
    ]
    return re.compile(DURATION.pattern.join(pieces) + r"\Z")


def missing(expected: list[str], actual: list[str]) -> list[str]:
    """The expected lines not found in `actual` in order (empty when all are)."""
    position = 0
    for line in expected:
        if line.strip() in ("", "..."):
            continue
        pattern = _pattern(line)
        for index in range(position, len(actual)):
            if pattern.match(actual[index].rstrip()):
                position = index + 1
                break
        else:
            return [line]
    return []


def environment(home: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
        "NO_COLOR": "1",
        "COLUMNS": "100",
        "XDG_CACHE_HOME": str(home / "cache"),
        "HOME": str(home),
    }


def run_block(block: Block, tmp: Path) -> list[tuple[int, list[str]]]:
    """Each command's exit status and output lines (stdout and stderr as they were written)."""
    cwd = WORKSPACES[block.options["in"]](tmp)
    script = "".join(f"{command.line}\necho '{EXIT_MARK}'$?\n" for command in block.commands)
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=environment(tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    results: list[tuple[int, list[str]]] = []
    lines: list[str] = []
    for line in done.stdout.splitlines():
        if line.startswith(EXIT_MARK):
            results.append((int(line[len(EXIT_MARK) :]), lines))
            lines = []
        else:
            lines.append(line)
    return results


def fenced(page: Path, language: str) -> list[str]:
    """The text of the page's code blocks in `language`."""
    return [m.group(2) for m in FENCE.finditer(page.read_text(encoding="utf-8")) if m.group(1) == language]

"""The console script runs `scan` without click when the arguments are plain. Spec: it reads them
exactly as click does, hands every other command line to click, and prints, byte for byte, what
the click command prints."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from selfcall_audit.frontends import cli
from selfcall_audit.frontends.launch import scan_parameters

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo-gym"
CLICK = [sys.executable, "-m", "selfcall_audit.frontends.cli"]
LAUNCH = [sys.executable, "-m", "selfcall_audit.frontends.launch"]

PLAIN = [
    [],
    ["responses_api_agents"],
    ["responses_api_agents/simple_agent/app.py", "nemo_gym"],
    ["--format", "json", "--no-cache"],
    ["--format=sarif", "responses_api_agents", "--select", "SCA001,SCA002"],
    ["-q", "--strict"],
    ["--quiet", "--include-tests"],
    ["-v"],
    ["--verbose", "--verbose"],
    ["--exclude", "a/*", "--exclude=b", "--ignore", "SCA002", "--jobs", "0"],
    ["--jobs=3", "--jobs", "007"],
    ["--config", "settings.toml", "--baseline", "baseline.json"],
    ["--write-baseline", "new.json", "--format", "concise", "--format", "github"],
]
NEEDS_CLICK = [
    ["--help"],
    ["-h"],
    ["--version"],
    ["-qv"],
    ["--quiet=yes"],
    ["--format", "JSON"],
    ["--format", "xml"],
    ["--format"],
    ["--jobs", "-1"],
    ["--jobs", "two"],
    ["--jobs", "٣"],
    ["--select", ""],
    ["--select", "--strict"],
    ["--config", "nemo_gym"],
    ["--baseline", "nemo_gym"],
    ["no/such/path.py"],
    ["--", "responses_api_agents"],
    ["--frobnicate"],
]


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns(".selfcall_audit_cache"))
    (root / "settings.toml").write_text("")
    monkeypatch.chdir(root)
    return root


def _click_params(args: list[str]) -> dict:
    with cli.scan.make_context("scan", list(args)) as ctx:
        return ctx.params


@pytest.mark.parametrize("args", PLAIN, ids=" ".join)
def test_plain_arguments_are_read_as_click_reads_them(project: Path, args: list[str]) -> None:
    assert scan_parameters(args) == _click_params(args)


@pytest.mark.parametrize("args", NEEDS_CLICK, ids=" ".join)
def test_anything_else_is_left_to_click(project: Path, args: list[str]) -> None:
    assert scan_parameters(args) is None


def test_a_path_the_user_may_not_read_is_left_to_click(project: Path, monkeypatch) -> None:
    monkeypatch.setattr(os, "access", lambda path, mode, **kwargs: False)

    assert scan_parameters(["nemo_gym"]) is None
    with pytest.raises(click.BadParameter):
        _click_params(["nemo_gym"])


def test_every_scan_option_is_read_without_click() -> None:
    """An option added to `scan` and not to the reader would send every run through click."""
    assert {param.name for param in cli.scan.params} == set(scan_parameters([]))


CASES = {
    "findings, concise": ["scan", "--no-cache", "."],
    "findings, json": ["scan", "--format", "json", "--no-cache", "."],
    "one file, sarif": ["scan", "--format", "sarif", "responses_api_agents/simple_agent/app.py"],
    "quiet text, strict": ["scan", "--format", "text", "-q", "--strict"],
    "a clean folder": ["scan", "nemo_gym"],
    "an unknown rule code": ["scan", "--select", "SCA1,XYZ"],
    "a missing path": ["scan", "no/such/path.py"],
    "a bad settings file": ["scan", "--config", "broken.toml"],
    "both baseline options": ["scan", "--baseline", "a.json", "--write-baseline", "b.json"],
    "help": ["scan", "--help"],
}


@pytest.mark.parametrize("args", CASES.values(), ids=CASES.keys())
def test_the_console_script_prints_what_the_click_command_prints(project: Path, args: list[str]) -> None:
    (project / "broken.toml").write_text("[tool.selfcall-audit]\nexclude = 3\n")
    by_click, by_launch = (
        subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)
        for command in (CLICK, LAUNCH)
    )

    def printed(run: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
        return run.returncode, re.sub(r'"seconds": [0-9.]+', "", run.stdout), run.stderr

    assert by_launch.returncode in (0, 1, 2)
    assert printed(by_launch) == printed(by_click)


def test_a_plain_scan_loads_neither_click_nor_typing_nor_subprocess(project: Path) -> None:
    """Each would cost a pre-commit run a few percent of its time (README, Performance). `.pth`
    files of the environment may have loaded them at start-up: they are forgotten first, so that
    an import of ours shows. (Settings in pyproject.toml bring in tomllib, which imports typing:
    this project has none.)"""
    (project / "pyproject.toml").write_text('[project]\nname = "demo-gym"\n')
    unwanted = ("click", "typing", "subprocess")
    run = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            f"import sys; [sys.modules.pop(name, None) for name in {unwanted}]; "
            "from selfcall_audit.frontends.launch import main; main()",
            *("scan", "--format", "json", "."),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert run.returncode == 1 and run.stdout.startswith("{")
    names = [line.rsplit("|", 1)[-1] for line in run.stderr.splitlines() if line.startswith("import time:")]
    loaded = {name.strip() for name in names[names.index(" site") + 1 :]}
    assert "selfcall_audit.frontends.commands" in loaded
    assert not {name.split(".")[0] for name in loaded} & set(unwanted)


def test_a_usage_error_found_without_click_is_reported_by_click(project: Path) -> None:
    run = subprocess.run([*LAUNCH, "scan", "--ignore", "NOPE"], capture_output=True, text=True, timeout=120)

    assert run.returncode == 2
    assert run.stderr.startswith("Usage: ")
    assert "Error: unknown rule code or prefix 'NOPE'" in run.stderr

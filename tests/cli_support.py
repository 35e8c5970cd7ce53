"""The command line as the tests run it in-process: through `main(argv)`, the one front door the
console script and `python -m selfcall_audit` use, and flake8 through its own `main`, each from a
given folder, with stdout and stderr captured apart."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner
from flake8.main.cli import main as flake8_main

from selfcall_audit.frontends.cli import main


def runner() -> CliRunner:
    """click's runner with stdout and stderr apart: click 8.2 and later always keep them apart,
    8.1 (the lowest version the project supports) when asked."""
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:  # click 8.2+: no such argument, the streams are apart already
        return CliRunner()


@dataclass(frozen=True)
class Ran:
    """One in-process run of a `main(argv)`: its exit code and what it wrote."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout


@contextmanager
def working_folder(folder: Path | None) -> Iterator[None]:
    """The current folder is `folder` inside the block (unchanged if None), and back after."""
    if folder is None:
        yield
        return
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def run_main(
    args: list[str],
    env: Mapping[str, str | None] | None = None,
    input: str | None = None,
    cwd: Path | None = None,
) -> Ran:
    """`main(args)` with its streams captured (click's runner isolates them, as for a terminal-less
    process), the environment changed by `env` for the run (None unsets a variable), from the
    folder `cwd` if given."""
    with working_folder(cwd), runner().isolation(input=input, env=env) as streams:
        code = main(args)
        out, err = streams[0], streams[1]
        return Ran(code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace"))


def run_flake8(args: list[str], cwd: Path) -> Ran:
    """flake8's `main(args)` in-process from `cwd`, its streams captured (it writes bytes to
    stdout's buffer), with --isolated: no user or project flake8 config, only what is passed."""
    stdout, stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    with working_folder(cwd), redirect_stdout(stdout), redirect_stderr(stderr):
        code = flake8_main(["--isolated", *args])
    stdout.flush()
    return Ran(code, stdout.buffer.getvalue().decode(), stderr.getvalue())


def finding_lines(stdout: str) -> list[str]:
    """The lines of a concise report before its closing count (`Found N ...` or `No self-calls
    ...`, as ruff ends with `Found N errors.`), which must be there."""
    *lines, count = stdout.splitlines()
    assert count.startswith(("Found ", "No self-calls in ")) and count.endswith("."), stdout
    return lines


def drained(controller: int) -> bytes:
    """Everything a pseudo-terminal's controller end receives until the command closes the other
    end; the controller is closed after."""
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 1 << 16)
        except OSError:  # the terminal's other end closed: the command is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    return b"".join(chunks)

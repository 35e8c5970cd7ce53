"""The reliability contract: no input breaks a scan, and the scan never runs the code it reads.

Every bad input sits next to a good agent with a real self-call. The scan must give the bad input one
SCA900 entry (JSON `errors`: code, path, message) whose message says what is wrong, still report the
good self-call, keep the documented exit codes (0, 1, 2), and never print a traceback.

Tests run as root in CI, where `chmod 000` does not stop a read; unreadable files are therefore
stood in for by what really cannot be read (broken links, link loops, named pipes, a link to a
folder) and, for "permission denied" itself, by making `os.open` fail in-process.
"""

from __future__ import annotations

import errno
import json
import marshal
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import tracemalloc
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from agent_sources import SELF_CALLING_AGENT
from cli_support import finding_lines
from fixture_annotations import NOT_COPIED, annotated_findings

from selfcall_audit.analysis.gym_config import AgentInstance, ConfigSet
from selfcall_audit.analysis.yaml_nodes import ConfigFileError, parse_yaml
from selfcall_audit.workspace import discovery
from selfcall_audit.workspace.discovery import discover

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"

GOOD = "responses_api_agents/good_agent/app.py"
GOOD_SOURCE = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class GoodAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        return await self.server_client.post(server_name=self.config.name, url_path="/v1/responses", json=body)
"""
GOOD_FINDING = ["SCA001", GOOD, 6, 22]

BAD = "responses_api_agents/bad_agent/app.py"
BAD_YAML = "responses_api_agents/bad_agent/configs/bad.yaml"
AGENT_IMPORT = "from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent\n"


def make_project(root: Path, files: dict[str, str | bytes], good: bool = True) -> Path:
    """A project root (pyproject.toml), the good agent unless told otherwise, and `files`."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "reliability"\n')
    if good:
        files = {GOOD: GOOD_SOURCE, **files}
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return root


def scan(cli, root: Path, *args: object) -> tuple[int, dict]:
    """Scan in-process; the JSON report and the exit code, after checking stderr is clean."""
    result = cli("scan", root, "--format", "json", "--no-cache", *args)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    return result.exit_code, json.loads(result.stdout)


def located(report: dict) -> list[list]:
    return sorted([f["code"], f["path"], f["line"], f["column"]] for f in report["findings"])


def errors(report: dict) -> dict[str, str]:
    keys = {"code", "path", "message", "line", "column", "severity"}
    assert all(set(e) == keys and e["code"] == "SCA900" for e in report["errors"])
    return {e["path"]: e["message"] for e in report["errors"]}


def assert_only_error(report: dict, path: str, *fragments: str) -> None:
    """Exactly one SCA900 entry, for `path`, saying each fragment; the good self-call still found."""
    assert list(errors(report)) == [path], report["errors"]
    for fragment in fragments:
        assert fragment in errors(report)[path]
    assert GOOD_FINDING in located(report)


# each kind of bad input: one SCA900 entry, the rest analysed ----------------------------------------

BAD_INPUTS = {
    "syntax error": (
        {BAD: AGENT_IMPORT + "class Broken(SimpleResponsesAPIAgent:\n    pass\n"},
        BAD,
        ("syntax error at line 2",),
    ),
    "undecodable bytes, no coding declaration": (
        {BAD: (AGENT_IMPORT + "NAME = 'caf\xe9'\n").encode("latin-1")},
        BAD,
        ("cannot decode the source at line 2", "utf-8"),
    ),
    "unknown coding declaration": (
        {BAD: "# -*- coding: klingon -*-\n" + AGENT_IMPORT},
        BAD,
        ("cannot decode the source", "unknown encoding: klingon"),
    ),
    "binary file": (
        {BAD: b"SimpleResponsesAPIAgent\x00\x01\x02\xff\xfe\x89PNG\r\n\x1a\n" + bytes(range(256))},
        BAD,
        ("binary file", "null bytes"),
    ),
    "5,000 nested parentheses": (
        {BAD: AGENT_IMPORT + "x = " + "(" * 5000 + ")" * 5000 + "\n"},
        BAD,
        ("too deeply nested to parse",),
    ),
    "5,000 nested brackets": (
        {BAD: AGENT_IMPORT + "x = " + "[" * 5000 + "]" * 5000 + "\n"},
        BAD,
        ("too deeply nested to parse",),
    ),
    "100,000 nested unary minus signs": (
        {BAD: AGENT_IMPORT + "x = " + "-" * 100_000 + "1\n"},
        BAD,
        ("too deeply nested to parse",),
    ),
    "an attribute chain 100,000 long": (
        {BAD: AGENT_IMPORT + "x = y" + ".z" * 100_000 + "\n"},
        BAD,
        # Python 3.10's parser builds the chain; then the analysis refuses it.
        (f"too deeply nested to {'parse' if sys.version_info >= (3, 11) else 'analyse'}",),
    ),
    "101 levels of indentation": (
        {BAD: AGENT_IMPORT + "".join(" " * i + "if x:\n" for i in range(101)) + " " * 101 + "pass\n"},
        BAD,
        ("too deeply nested to parse", "indentation"),
    ),
    "2,000 nested lambdas (parses, too deep to analyse)": (
        {BAD: AGENT_IMPORT + "x = " + "lambda: " * 2000 + "1\n"},
        BAD,
        ("too deeply nested to analyse",),
    ),
    "YAML with a python tag": (
        {BAD_YAML: "responses_api_agents: !!python/object/apply:os.getcwd []\n"},
        BAD_YAML,
        ("line 1: unknown YAML tag", "python/object/apply:os.getcwd", "not loaded"),
    ),
    "YAML with a custom tag": (
        {BAD_YAML: "bad_agent:\n  responses_api_agents: !Secret {entrypoint: app.py}\n"},
        BAD_YAML,
        ("line 2: unknown YAML tag '!Secret'",),
    ),
    "invalid YAML syntax": (
        {BAD_YAML: "bad_agent:\n  responses_api_agents: [\n    entrypoint: : app.py\n"},
        BAD_YAML,
        (
            "invalid YAML at line 3, column 17: did not find expected node content (while parsing a flow node)",
        ),
    ),
    "YAML whose top level is a list": (
        {BAD_YAML: "- responses_api_agents\n- bad_agent\n"},
        BAD_YAML,
        ("top level is not a mapping",),
    ),
    "YAML whose top level is a scalar": (
        {BAD_YAML: "responses_api_agents\n"},
        BAD_YAML,
        ("top level is not a mapping",),
    ),
    "YAML that is not UTF-8": (
        {BAD_YAML: b"bad_agent:\n  responses_api_agents: caf\xe9\n"},
        BAD_YAML,
        ("not UTF-8",),
    ),
    "YAML nested 10,000 deep in flow style": (
        {BAD_YAML: "responses_api_agents: " + "[" * 10_000 + "]" * 10_000 + "\n"},
        BAD_YAML,
        ("YAML nested more than 100 levels deep",),
    ),
    "YAML nested 150 deep in block style": (
        {
            BAD_YAML: "responses_api_agents:\n"
            + "".join(" " * i + "k:\n" for i in range(1, 151))
            + " " * 151
            + "v\n"
        },
        BAD_YAML,
        ("YAML nested more than 100 levels deep",),
    ),
}


@pytest.mark.parametrize("case", BAD_INPUTS, ids=list(BAD_INPUTS))
def test_bad_input_is_one_clear_sca900_entry_and_the_rest_is_analysed(cli, tmp_path: Path, case: str) -> None:
    files, path, fragments = BAD_INPUTS[case]
    root = make_project(tmp_path / "repo", files)

    exit_code, report = scan(cli, root)

    assert exit_code == 1  # the good self-call; SCA900 alone would be 0
    assert_only_error(report, path, *fragments)


# An agent that posts to a model server: no finding, but the YAML configs are read to tell where.
MODEL_POSTER = (
    AGENT_IMPORT
    + """

class PosterAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        return await self.server_client.post(server_name=self.config.model_server.name, url_path="/v1/responses", json=body)
"""
)
POSTER = "responses_api_agents/poster_agent/app.py"


def test_a_file_that_does_not_parse_fails_the_gate_and_other_sca900_only_with_strict(
    cli, tmp_path: Path
) -> None:
    broken = make_project(tmp_path / "broken", {BAD: AGENT_IMPORT + "def (:\n"}, good=False)
    files, path, _ = BAD_INPUTS["invalid YAML syntax"]
    bad_yaml = make_project(tmp_path / "yaml", {**files, POSTER: MODEL_POSTER}, good=False)

    assert (scan(cli, broken)[0], scan(cli, broken, "--strict")[0]) == (1, 1)
    assert (scan(cli, bad_yaml)[0], scan(cli, bad_yaml, "--strict")[0]) == (0, 1)
    for root, args, expected in ((broken, (), 1), (bad_yaml, (), 0), (bad_yaml, ("--strict",), 1)):
        exit_code, report = scan(cli, root, *args)
        assert exit_code == expected
        assert list(errors(report)) == [BAD if root == broken else path]


def test_invalid_yaml_is_reported_at_its_line_as_a_syntax_error_is(cli, tmp_path: Path) -> None:
    files, path, _ = BAD_INPUTS["invalid YAML syntax"]
    root = make_project(
        tmp_path / "repo", {**files, BAD: AGENT_IMPORT + "def (:\n", POSTER: MODEL_POSTER}, good=False
    )

    done = cli("scan", "--format", "concise", "--no-cache", cwd=root)

    assert done.exit_code == 1, done.stderr  # the Python file that does not parse
    assert finding_lines(done.stdout) == [
        f"{BAD}:2:5: SCA900 syntax error at line 2, column 5: invalid syntax",
        f"{path}:3:17: SCA900 invalid YAML at line 3, column 17: did not find expected node content (while parsing a flow node)",
    ]


def test_findings_exit_1_with_or_without_sca900(cli, tmp_path: Path) -> None:
    clean = make_project(tmp_path / "clean", {})
    broken = make_project(tmp_path / "broken", {BAD: "def (:\n" + AGENT_IMPORT})

    clean_exit_code, clean_report = scan(cli, clean)
    broken_exit_code, broken_report = scan(cli, broken)

    assert (clean_exit_code, clean_report["errors"]) == (1, [])
    assert broken_exit_code == 1
    assert errors(broken_report) == {BAD: "syntax error at line 1, column 5: invalid syntax"}


def test_python_warnings_about_scanned_code_are_not_printed(cli, command, tmp_path: Path) -> None:
    """`"\\d"` is a warning in the audited code (a SyntaxWarning on stderr since Python 3.12), not in the scan."""
    noisy = SELF_CALLING_AGENT + 'PATTERN = "\\d+"\nSAME = 1 is 1\nODD = "a"[1, 2]\n'
    root = make_project(tmp_path / "repo", {BAD: noisy})

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exit_code, report = scan(cli, root)
    done = command("scan", root, "--format", "json", "--no-cache")

    assert [str(w.message) for w in caught] == []
    assert (exit_code, done.returncode, done.stderr) == (1, 1, "")
    assert located(report) == [["SCA001", BAD, 6, 26], GOOD_FINDING] == located(json.loads(done.stdout))


# encodings and line endings: findings at the right place ------------------------------------------


def _range(report: dict, path: str) -> tuple[int, int, int, int]:
    (finding,) = [f for f in report["findings"] if f["path"] == path]
    return finding["line"], finding["column"], finding["end_line"], finding["end_column"]


# How the file is stored, and how many lines it gains in front of the code.
ENCODED = {
    "UTF-8 BOM": (lambda text: b"\xef\xbb\xbf" + text.encode(), 0),
    "CRLF line endings": (lambda text: text.replace("\n", "\r\n").encode(), 0),
    "old Mac CR line endings": (lambda text: text.replace("\n", "\r").encode(), 0),
    "BOM and CRLF": (lambda text: b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode(), 0),
    "Latin-1 with a coding declaration": (
        lambda text: (
            ("# -*- coding: latin-1 -*-\n" + text)
            .replace("json=body", "json={'caf\xe9': body}")
            .encode("latin-1")
        ),
        1,
    ),
}


@pytest.mark.parametrize("variant", ENCODED)
def test_bom_crlf_and_declared_encodings_keep_lines_and_columns(cli, tmp_path: Path, variant: str) -> None:
    encode, shift = ENCODED[variant]
    plain = make_project(tmp_path / "plain", {BAD: SELF_CALLING_AGENT})
    odd = make_project(tmp_path / "odd", {BAD: encode(SELF_CALLING_AGENT)})

    _, plain_report = scan(cli, plain)
    _, odd_report = scan(cli, odd)

    assert _range(plain_report, BAD) == (6, 26, 10, 10)
    assert _range(odd_report, BAD) == (6 + shift, 26, 10 + shift, 10)
    assert odd_report["errors"] == []


def test_columns_count_characters_not_bytes(cli, tmp_path: Path) -> None:
    source = GOOD_SOURCE.replace("GoodAgent", "BadAgent").replace("return await", "café = 1; return await")
    root = make_project(tmp_path / "repo", {BAD: source})

    _, report = scan(cli, root)

    assert _range(report, BAD)[:2] == (6, 22 + len("café = 1; "))


@pytest.mark.parametrize("content", ["", "\n\n\n", "# SimpleResponsesAPIAgent, a comment only\n", "\ufeff"])
def test_empty_and_blank_files_are_no_error(cli, tmp_path: Path, content: str) -> None:
    root = make_project(
        tmp_path / "repo", {BAD: content, "responses_api_agents/bad_agent/__init__.py": content}
    )

    exit_code, report = scan(cli, root)

    assert (exit_code, located(report), report["errors"]) == (1, [GOOD_FINDING], [])


# size limit -------------------------------------------------------------------------------------


def _padded(source: str, size: int) -> bytes:
    """`source` followed by a comment that brings it to exactly `size` bytes."""
    data = source.encode() + b"#"
    return data + b"x" * (size - len(data) - 1) + b"\n"


def test_the_default_size_limit_is_2_000_000_bytes_inclusive(cli, tmp_path: Path) -> None:
    at_limit = GOOD.replace("good_agent", "at_limit_agent")
    over = GOOD.replace("good_agent", "over_limit_agent")
    source = GOOD_SOURCE.replace("GoodAgent", "LimitAgent")
    root = make_project(
        tmp_path / "repo", {at_limit: _padded(source, 2_000_000), over: _padded(source, 2_000_001)}
    )

    exit_code, report = scan(cli, root)

    assert exit_code == 1
    assert located(report) == [["SCA001", at_limit, 6, 22], GOOD_FINDING]  # not the skipped file's
    assert errors(report) == {
        over: "skipped: 2,000,001 bytes is over the max-file-size limit of 2,000,000",
    }


def test_the_max_file_size_setting_applies_to_python_and_yaml(cli, tmp_path: Path) -> None:
    root = make_project(
        tmp_path / "repo",
        {
            BAD: _padded(SELF_CALLING_AGENT, 1_001),
            BAD_YAML: "bad_agent:\n  responses_api_agents:\n    bad_agent: {entrypoint: app.py}\n"
            + "#" * 1_000,
        },
    )
    with (root / "pyproject.toml").open("a") as pyproject:
        pyproject.write("\n[tool.selfcall-audit]\nmax-file-size = 1000\n")

    _, report = scan(cli, root)

    assert errors(report) == {
        BAD: "skipped: 1,001 bytes is over the max-file-size limit of 1,000",
        BAD_YAML: f"skipped: {(root / BAD_YAML).stat().st_size:,} bytes is over the max-file-size limit of 1,000",
    }
    assert located(report) == [GOOD_FINDING]


def test_a_file_growing_past_the_limit_after_it_was_measured_is_skipped(tmp_path: Path, monkeypatch) -> None:
    """The limit is enforced on the bytes read, not only on the size the file had when looked at."""
    path = tmp_path / "growing.py"
    path.write_bytes(b"x" * 10)
    real_fstat = os.fstat

    def stale_fstat(fd: int) -> os.stat_result:
        status = real_fstat(fd)
        path.write_bytes(b"x" * 2_000)  # grows between the size check and the read
        return status

    monkeypatch.setattr(discovery.os, "fstat", stale_fstat)

    with pytest.raises(discovery.UnreadableFile, match="over the max-file-size limit of 100"):
        discovery.read_file(path, 100)


# deep code the parser accepts: the analysis stays bounded ----------------------------------------


def test_a_local_rebound_hundreds_of_times_does_not_stop_the_scan(cli, tmp_path: Path) -> None:
    """`url += ...` 600 times in one function: resolution gives up on `url`, the self-call below is found."""
    source = SELF_CALLING_AGENT.replace(
        "        response = await",
        "        url = '/v1'\n"
        + "        url += '/x'\n" * 600
        + "        self.url = url\n        response = await",
    )
    root = make_project(tmp_path / "repo", {BAD: source})

    cold, warm = (cli("scan", root, "--format", "json") for _ in "12")  # the second from the cache

    assert cold.exit_code == warm.exit_code == 1
    assert cold.stderr == warm.stderr == ""
    report, warm_report = json.loads(cold.stdout), json.loads(warm.stdout)
    assert report["errors"] == warm_report["errors"] == []
    assert located(report) == located(warm_report) == [["SCA001", BAD, 608, 26], GOOD_FINDING]


def test_a_chain_of_600_rebinding_locals_does_not_stop_the_scan(cli, tmp_path: Path) -> None:
    chain = "".join(f"        x{i + 1} = x{i} + 'a'\n" for i in range(600)).replace("x0", "'/v1'")
    source = AGENT_IMPORT + (
        "\n\nclass ChainAgent(SimpleResponsesAPIAgent):\n    async def run(self, body):\n"
        + chain
        + "        return await self.server_client.post(server_name=self.config.name, url_path=x600)\n"
    )
    root = make_project(tmp_path / "repo", {BAD: source})

    exit_code, report = scan(cli, root, "--select", "SCA")

    assert exit_code == 1
    assert report["errors"] == []
    assert located(report) == [GOOD_FINDING, ["SCA002", BAD, 606, 22]]  # its own server, any path


# symbolic links and the file listing -------------------------------------------------------------


def _git_init(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True, capture_output=True)


@pytest.mark.parametrize("in_git", [False, True], ids=["walked", "git checkout"])
def test_a_folder_linked_to_its_parent_is_listed_once(cli, tmp_path: Path, in_git: bool) -> None:
    root = make_project(tmp_path / "repo", {})
    if in_git:
        _git_init(root)
    (root / "responses_api_agents" / "good_agent" / "loop").symlink_to("..", target_is_directory=True)
    (root / "responses_api_agents" / "root_loop").symlink_to(root, target_is_directory=True)

    exit_code, report = scan(cli, root)

    assert (exit_code, located(report), report["errors"]) == (1, [GOOD_FINDING], [])


@pytest.mark.parametrize("in_git", [False, True], ids=["walked", "git checkout"])
def test_a_link_to_a_folder_outside_the_root_is_not_followed(cli, tmp_path: Path, in_git: bool) -> None:
    outside = make_project(tmp_path / "elsewhere", {})
    root = make_project(tmp_path / "repo", {}, good=False)
    if in_git:
        _git_init(root)
    (root / "responses_api_agents").mkdir()
    (root / "responses_api_agents" / "vendored").symlink_to(
        outside / "responses_api_agents", target_is_directory=True
    )

    exit_code, report = scan(cli, root)

    assert (exit_code, report["findings"], report["errors"]) == (0, [], [])


@pytest.mark.parametrize("in_git", [False, True], ids=["walked", "git checkout"])
def test_links_that_cannot_be_read_are_reported(cli, tmp_path: Path, in_git: bool) -> None:
    root = make_project(tmp_path / "repo", {})
    if in_git:
        _git_init(root)
    folder = root / "responses_api_agents" / "linked_agent"
    folder.mkdir()
    (folder / "dangling.py").symlink_to("does_not_exist.py")
    (folder / "ping.py").symlink_to("pong.py")
    (folder / "pong.py").symlink_to("ping.py")

    exit_code, report = scan(cli, root)

    prefix = "responses_api_agents/linked_agent/"
    assert errors(report) == {
        f"{prefix}dangling.py": "broken symbolic link: its target does not exist",
        f"{prefix}ping.py": "cannot read: Too many levels of symbolic links",
        f"{prefix}pong.py": "cannot read: Too many levels of symbolic links",
    }
    assert (exit_code, located(report)) == (1, [GOOD_FINDING])


def test_a_py_link_to_a_folder_in_a_checkout_is_not_a_file(cli, tmp_path: Path) -> None:
    """git lists a symbolic link as a file even when it points at a folder."""
    root = make_project(tmp_path / "repo", {"responses_api_agents/bad_agent/impl/__init__.py": ""})
    _git_init(root)
    (root / BAD).symlink_to("impl", target_is_directory=True)

    _, report = scan(cli, root)

    assert_only_error(report, BAD, "not a regular file: a directory")


def test_a_folder_named_like_a_python_file_is_a_folder(cli, tmp_path: Path) -> None:
    """Not an unreadable file at all: listing never returns folders, and the folder's files are scanned."""
    inside = "responses_api_agents/odd.py/app.py"
    root = make_project(tmp_path / "repo", {inside: GOOD_SOURCE.replace("GoodAgent", "OddAgent")})

    exit_code, report = scan(cli, root)

    assert (exit_code, report["errors"]) == (1, [])
    assert located(report) == [GOOD_FINDING, ["SCA001", inside, 6, 22]]


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging: SIGALRM interrupts a blocking open() or read() in this thread."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"blocked for {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_named_pipe_posing_as_source_does_not_hang_the_scan(cli, tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", {})
    (root / BAD_YAML).parent.mkdir(parents=True)
    os.mkfifo(root / BAD)
    os.mkfifo(root / BAD_YAML)

    with deadline(20):
        exit_code, report = scan(cli, root)
        strict_exit_code, strict_report = scan(cli, root, "--strict")

    expected = {BAD: "not a regular file: a named pipe", BAD_YAML: "not a regular file: a named pipe"}
    assert (exit_code, located(report), errors(report)) == (1, [GOOD_FINDING], expected)
    assert (strict_exit_code, errors(strict_report)) == (1, expected)


def test_permission_denied_is_reported_and_the_scan_goes_on(cli, tmp_path: Path, monkeypatch) -> None:
    """Stands in for `chmod 000` (which root ignores): opening that one file fails as it would."""
    root = make_project(tmp_path / "repo", {BAD: SELF_CALLING_AGENT})
    real_open = os.open

    def os_open(path, flags, *args, **kwargs):
        if str(path).endswith(BAD):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(discovery.os, "open", os_open)

    exit_code, report = scan(cli, root)

    assert exit_code == 1
    assert_only_error(report, BAD, "cannot read: Permission denied")


def test_a_file_deleted_after_listing_is_reported_as_vanished(cli, tmp_path: Path, monkeypatch) -> None:
    root = make_project(tmp_path / "repo", {BAD: SELF_CALLING_AGENT})
    real_listing = discovery.list_project_files

    def list_then_delete(where: Path, early):
        listed = real_listing(where, early)
        (where / BAD).unlink()
        return listed

    monkeypatch.setattr(discovery, "list_project_files", list_then_delete)

    exit_code, report = scan(cli, root)

    assert exit_code == 1
    assert_only_error(report, BAD, "file vanished during the scan")


@pytest.fixture
def locked_folder(tmp_path: Path, monkeypatch) -> Path:
    """A project whose folder responses_api_agents/locked cannot be listed. Stands in for an
    unreadable folder (root can list any): listing that one folder fails."""
    root = make_project(tmp_path / "repo", {"responses_api_agents/locked/app.py": GOOD_SOURCE})
    real_scandir = os.scandir

    def scandir(path=None):
        if str(path).endswith("locked"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    return root


def test_a_folder_that_cannot_be_listed_is_named(locked_folder: Path) -> None:
    files = discover(locked_folder, (), False, ("*.yaml",))

    assert files.sources == (GOOD,)
    assert {rel: e.message for rel, e in files.errors.items()} == {
        "responses_api_agents/locked": "cannot list the folder: Permission denied"
    }


def test_a_folder_that_cannot_be_listed_is_an_sca900_entry(cli, locked_folder: Path) -> None:
    _, report = scan(cli, locked_folder)

    assert_only_error(report, "responses_api_agents/locked", "cannot list the folder: Permission denied")


def test_a_yaml_entrypoint_that_does_not_exist_is_not_a_vanished_file(cli, tmp_path: Path) -> None:
    config = "ghost:\n  responses_api_agents:\n    bad_agent:\n      entrypoint: app.py\n"
    root = make_project(tmp_path / "repo", {BAD_YAML: config})

    for paths in ((), (root / "responses_api_agents" / "bad_agent",)):
        result = cli("scan", *paths or (root,), "--format", "json", "--no-cache")
        report = json.loads(result.stdout)
        assert all("vanished" not in message for message in errors(report).values()), report["errors"]


# names ----------------------------------------------------------------------------------------------


SPACED = "responses_api_agents/my agent/app été.py"
NON_ASCII = "responses_api_agents/ägent_日本/app.py"


def test_paths_with_spaces_and_non_ascii_names(cli, tmp_path: Path) -> None:
    source = GOOD_SOURCE.replace("GoodAgent", "NamedAgent")
    root = make_project(tmp_path / "my repo ü", {SPACED: source, NON_ASCII: source})
    expected = [GOOD_FINDING, ["SCA001", NON_ASCII, 6, 22], ["SCA001", SPACED, 6, 22]]

    exit_code, report = scan(cli, root)
    done = cli("scan", "--format", "json", "--no-cache", cwd=root)
    one_file = cli("scan", SPACED, "--format", "concise", "--no-cache", cwd=root)

    assert (exit_code, located(report), report["errors"]) == (1, sorted(expected), [])
    assert (done.exit_code, located(json.loads(done.stdout))) == (1, sorted(expected))
    assert one_file.stdout.startswith(f"{SPACED}:6:22: SCA001 ")


@pytest.mark.parametrize("output_format", ["json", "text", "concise", "sarif", "github"])
def test_a_file_name_that_is_not_utf8_does_not_break_any_format(
    cli, tmp_path: Path, output_format: str
) -> None:
    root = make_project(tmp_path / "repo", {})
    folder = os.fsencode(root / "responses_api_agents" / "bad_agent")
    os.makedirs(folder)
    with open(folder + b"/caf\xe9.py", "wb") as handle:
        handle.write(SELF_CALLING_AGENT.encode())
    with open(folder + b"/broken\xff.py", "wb") as handle:
        handle.write((AGENT_IMPORT + "def (:\n").encode())

    done = cli("scan", root, "--format", output_format, "--no-cache")

    assert done.exit_code == 1, done.stderr
    assert done.stderr == ""
    assert "SCA001" in done.stdout and "SCA900" in done.stdout
    # escaped, as the output stays valid UTF-8 (a byte that is not would be read back as U+FFFD):
    # in JSON as a lone surrogate, in SARIF's URIs percent-encoded, in text, concise and github
    # output as the byte, visibly
    assert "\ufffd" not in done.stdout
    assert any(name in done.stdout for name in ("caf\\udce9.py", "caf%E9.py", "caf\\xe9.py"))


@pytest.mark.slow
def test_a_file_name_that_is_not_utf8_among_the_paths_given_or_rewritten_by_fix(tmp_path: Path) -> None:
    """pre-commit passes paths, which the scan follows through import lines; fix then looks for the
    tests that name the rewritten module: by its name, which here is not UTF-8."""
    root = make_project(tmp_path / "repo", {"tests/test_other.py": "def test_x():\n    pass\n"})
    folder = os.fsencode(root / "responses_api_agents" / "bad_agent")
    os.makedirs(folder)
    with open(folder + b"/caf\xe9.py", "wb") as handle:
        handle.write(SELF_CALLING_AGENT.encode())

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        command = [sys.executable, "-m", "selfcall_audit", *args, "--no-cache"]
        return subprocess.run(command, cwd=root, capture_output=True, timeout=120)

    scanned = run("scan", "responses_api_agents")
    fixed = run("fix", "--diff")

    assert (scanned.returncode, scanned.stderr) == (1, b"")
    assert scanned.stdout.startswith(b"responses_api_agents/bad_agent/caf\\xe9.py:6:26: SCA001 ")
    assert fixed.returncode == 1, fixed.stderr  # the diff is shown: the call would be rewritten
    assert b"caf\\xe9.py:6: would rewrite self-call" in fixed.stderr
    assert b"internal error" not in fixed.stderr


# everything at once, as a real command ------------------------------------------------------------


def kitchen_sink(root: Path) -> dict[str, str]:
    """One project holding every kind of bad input; the SCA900 message expected for each path."""
    files: dict[str, str | bytes] = {}
    expected: dict[str, str] = {}
    for number, (files_of_case, path, fragments) in enumerate(BAD_INPUTS.values()):
        renamed = path.replace("bad_agent", f"bad_{number:02}")
        files[renamed] = files_of_case[path]
        expected[renamed] = fragments[0]
    make_project(root, files)
    sink = root / "responses_api_agents" / "sink"
    sink.mkdir()
    (sink / "dangling.py").symlink_to("nowhere.py")
    os.mkfifo(sink / "pipe.py")
    (sink / "loop").symlink_to("..", target_is_directory=True)
    expected["responses_api_agents/sink/dangling.py"] = "broken symbolic link"
    expected["responses_api_agents/sink/pipe.py"] = "named pipe"
    return expected


def test_every_bad_input_at_once_as_a_real_command(command, cli, tmp_path: Path) -> None:
    root = tmp_path / "sink repo"
    expected = kitchen_sink(root)

    started = time.perf_counter()
    done = command("scan", root, "--format", "json", "--no-cache", "--jobs", "2")
    seconds = time.perf_counter() - started
    with deadline(60):
        in_process = scan(cli, root, "--jobs", "1")

    assert done.returncode == 1
    assert "Traceback" not in done.stderr and done.stderr == ""
    report = json.loads(done.stdout)
    assert located(report) == [GOOD_FINDING]
    assert sorted(errors(report)) == sorted(expected)
    for path, fragment in expected.items():
        assert fragment in errors(report)[path], (path, errors(report)[path])
    assert in_process == (1, {**report, "summary": in_process[1]["summary"]})
    assert seconds < 30


@pytest.mark.parametrize("output_format", ["text", "concise", "sarif", "github"])
def test_every_bad_input_at_once_in_every_format(cli, tmp_path: Path, output_format: str) -> None:
    root = tmp_path / "repo"
    expected = kitchen_sink(root)

    with deadline(60):
        done = cli("scan", root, "--format", output_format, "--no-cache", "--strict")

    assert done.exit_code == 1
    assert done.stderr == ""
    assert "SCA001" in done.stdout
    assert done.stdout.count("SCA900") >= len(expected)


# hostile YAML -------------------------------------------------------------------------------------


def test_python_tags_never_construct_anything(cli, tmp_path: Path, monkeypatch) -> None:
    marker = tmp_path / "pwned"
    hostile = {
        "responses_api_agents/a/configs/apply.yaml": f"x: !!python/object/apply:os.system ['touch {marker}']\n"
        "responses_api_agents: 1\n",
        "responses_api_agents/b/configs/new.yaml": "responses_api_agents: !!python/object/new:subprocess.Popen\n"
        f"  args: [['touch', '{marker}']]\n",
        "responses_api_agents/c/configs/name.yaml": "responses_api_agents: !!python/name:os.system\n",
        "responses_api_agents/d/configs/module.yaml": "responses_api_agents: !!python/module:antigravity\n",
    }
    root = make_project(tmp_path / "repo", hostile)
    calls: list[object] = []
    monkeypatch.setattr(os, "system", lambda *args: calls.append(args))
    monkeypatch.setattr(subprocess.Popen, "__init__", lambda *args, **kwargs: calls.append(args))

    _, report = scan(cli, root)
    monkeypatch.undo()
    _, unpatched = scan(cli, root)  # os.system and Popen real again: `touch` would leave the marker

    assert calls == []
    assert not marker.exists()
    assert "antigravity" not in sys.modules
    for report_of_run in (report, unpatched):
        assert sorted(errors(report_of_run)) == sorted(hostile)
        assert all("unknown YAML tag 'tag:yaml.org,2002:python/" in m for m in errors(report_of_run).values())
        assert GOOD_FINDING in located(report_of_run)


def _billion_laughs(levels: int = 10) -> str:
    lines = ["responses_api_agents: 1", "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_an_alias_bomb_is_refused_within_bounded_time_and_memory() -> None:
    data = _billion_laughs().encode()  # 10**10 nodes once expanded

    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ConfigFileError, match=r"more than 200,000 YAML nodes once aliases are expanded"):
            parse_yaml("bomb.yaml", data)
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert seconds < 10
    assert peak < 100_000_000


def test_a_merge_key_bomb_is_refused() -> None:
    lines = ["a0: &a0 {k: v}"] + [
        f"a{i}: &a{i} {{<<: [{', '.join([f'*a{i - 1}'] * 10)}], k{i}: v}}" for i in range(1, 10)
    ]
    with pytest.raises(ConfigFileError, match="alias bomb"):
        parse_yaml("merge.yaml", ("\n".join(lines) + "\n").encode())


def test_an_alias_bomb_in_a_project_is_one_sca900_entry(cli, tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo", {BAD_YAML: _billion_laughs()})

    started = time.perf_counter()
    _, report = scan(cli, root)

    assert time.perf_counter() - started < 20
    assert_only_error(report, BAD_YAML, "alias bomb")


def test_a_reference_cycle_in_yaml_is_refused() -> None:
    with pytest.raises(ConfigFileError, match=r"alias bomb|nested more than 100 levels"):
        parse_yaml("cycle.yaml", b"a: &a [*a]\n")


def test_interpolation_that_expands_exponentially_stays_unresolved(tmp_path: Path) -> None:
    """`${l0}` expands to 10**9 characters: the reference is left as written, quickly."""
    levels = "".join(f"l{i}: '" + f"${{l{i + 1}}}" * 10 + "'\n" for i in range(9))
    config = (
        "bomb_agent:\n  responses_api_agents:\n    bomb_agent:\n      entrypoint: app.py\n"
        "      peer: {type: responses_api_agents, name: '${l0}'}\n" + levels + "l9: xxxxxxxxxx\n"
    )
    configs = ConfigSet(lambda rel: config.encode(), lambda rel: False)

    started = time.perf_counter()
    (instance,) = configs.instances(("responses_api_agents/bomb_agent/configs/bomb.yaml",))

    assert time.perf_counter() - started < 5
    assert instance.refs[0].name == "${l0}"


def test_interpolation_cycles_stay_unresolved() -> None:
    config = (
        b"loop_agent:\n  responses_api_agents:\n    loop_agent:\n      entrypoint: app.py\n"
        b"      peer: {type: responses_api_agents, name: '${a}'}\na: '${b}'\nb: '${a}'\n"
    )
    configs = ConfigSet(lambda rel: config, lambda rel: False)

    (instance,) = configs.instances(("responses_api_agents/loop_agent/configs/loop.yaml",))

    assert instance.refs[0].name == "${a}"


def test_config_paths_chains_shared_by_many_files_are_merged_once(cli, tmp_path: Path) -> None:
    """A lattice of 2 x 22 files, each chaining both files of the next level: 2**22 paths, 44 merges."""
    files = {}
    for level in range(22):
        for side in "ab":
            chained = (
                f"config_paths: [conf/l{level + 1}a.yaml, conf/l{level + 1}b.yaml]\n" if level < 21 else ""
            )
            files[f"conf/l{level}{side}.yaml"] = f"{chained}responses_api_agents_level_{level}{side}: 1\n"
    root = make_project(tmp_path / "repo", files)

    started = time.perf_counter()
    exit_code, report = scan(cli, root)

    assert time.perf_counter() - started < 20
    assert (exit_code, located(report), report["errors"]) == (1, [GOOD_FINDING], [])


def test_config_paths_and_entrypoints_never_leave_the_root() -> None:
    asked: list[str] = []
    documents = {
        "configs/a.yaml": b"config_paths: [../outside.yaml, /configs/b.yaml, configs/../../x.yaml, 5, null]\n"
        b"escape_agent:\n  responses_api_agents:\n    escape_agent:\n      entrypoint: ../../../../etc/x.py\n",
        "configs/b.yaml": b"config_paths: [configs/a.yaml]\nshared: 1\n",
    }

    def exists(rel: str) -> bool:
        asked.append(rel)
        return rel in documents

    configs = ConfigSet(documents.__getitem__, exists)
    (instance,) = configs.instances(("configs/a.yaml",))

    assert isinstance(instance, AgentInstance)
    assert instance.entrypoint is None
    assert not [rel for rel in asked if rel.startswith("..")]
    assert "configs/b.yaml" in asked


# never runs the scanned code, never touches the network ------------------------------------------


def test_scanned_code_is_never_imported_or_executed(cli, command, tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    side_effect = f"open({str(marker)!r}, 'w').write('ran')\nimport sys\nsys.exit(3)\n"
    files = {
        BAD: SELF_CALLING_AGENT + side_effect,
        "responses_api_agents/bad_agent/__init__.py": side_effect,
        "responses_api_agents/bad_agent/helpers.py": AGENT_IMPORT + side_effect,
        "nemo_gym/base_responses_api_agent.py": side_effect + "class SimpleResponsesAPIAgent: ...\n",
        "conftest.py": side_effect,
        "setup.py": side_effect,
        "sitecustomize.py": side_effect,
    }
    root = make_project(tmp_path / "repo", files)

    exit_code, report = scan(cli, root, "--include-tests")
    done = command("scan", "--format", "json", "--no-cache", cwd=root)
    cached = command("scan", "--format", "json", cwd=root)

    assert not marker.exists()
    assert exit_code == done.returncode == cached.returncode == 1
    assert located(report) == [["SCA001", BAD, 6, 26], GOOD_FINDING]
    assert "responses_api_agents.bad_agent" not in sys.modules and "helpers" not in sys.modules


def test_a_scan_makes_no_network_access(cli, tmp_path: Path, monkeypatch) -> None:
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object):
        attempts.append(args)
        raise OSError("network access during a scan")

    for name in ("connect", "connect_ex", "sendto", "bind"):
        monkeypatch.setattr(socket.socket, name, refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    root = tmp_path / "demo-gym"
    shutil.copytree(FIXTURES / "demo-gym", root, ignore=NOT_COPIED)
    expected = annotated_findings(root)

    result = cli("scan", root, "--format", "json", "--jobs", "1")

    assert attempts == []
    assert result.exit_code == 1, result.stderr
    assert (
        sorted([f["code"], f["path"], f["line"]] for f in json.loads(result.stdout)["findings"]) == expected
    )


def test_the_only_command_a_scan_runs_is_git_ls_files(cli, tmp_path: Path, monkeypatch) -> None:
    root = make_project(tmp_path / "repo", {BAD: SELF_CALLING_AGENT})
    _git_init(root)
    commands: list[list[str]] = []
    real_popen_init, real_spawn = subprocess.Popen.__init__, os.posix_spawnp

    def record_popen(self, args, *rest, **kwargs):
        commands.append([str(a) for a in args])
        real_popen_init(self, args, *rest, **kwargs)

    def record_spawn(path, args, *rest, **kwargs):
        commands.append([str(a) for a in args])
        return real_spawn(path, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", record_popen)
    monkeypatch.setattr(os, "posix_spawnp", record_spawn)

    exit_code, report = scan(cli, root)

    assert exit_code == 1 and len(report["findings"]) == 2
    assert len(commands) == 1 and commands[0][0] == "git" and "ls-files" in commands[0], commands


# the documented limit of the prefilter --------------------------------------------------------------


def test_an_agent_base_named_only_dynamically_is_not_seen(cli, tmp_path: Path) -> None:
    """Documented limitation: a file is parsed only if it names an agent base or a known agent class;
    a base reached through a string built at run time is invisible, so its self-call is not reported."""
    dynamic = (
        "import nemo_gym.base_responses_api_agent as base\n\n"
        'Base = getattr(base, "Simple" + "ResponsesAPIAgent")\n\n\n'
        "class HiddenAgent(Base):\n"
        "    async def run(self, body):\n"
        '        return await self.server_client.post(server_name=self.config.name, url_path="/v1/responses")\n'
    )
    root = make_project(tmp_path / "repo", {BAD: dynamic})

    exit_code, report = scan(cli, root)

    assert (exit_code, located(report), report["errors"]) == (1, [GOOD_FINDING], [])
    assert report["summary"]["files_parsed"] == 1


# the cache is input too ---------------------------------------------------------------------------


# Damage a cache can take: cut short, overwritten, or JSON of the wrong shape. (A well-formed entry
# with other content, such as `[]` for a YAML file, cannot be told from a real one.)
DAMAGE = [
    b"",
    b'{"@": "Modu',
    b"\x00\xff garbage",
    b"{}",
    b"null",
    b"5",
    b'"text"',
    b'{"@": "ModuleFacts", "v": []}',
    b"[[1]]",
]


@pytest.mark.parametrize("damage", DAMAGE, ids=repr)
def test_a_damaged_cache_is_recomputed_not_trusted(cli, tmp_path: Path, damage: bytes) -> None:
    root = tmp_path / "demo-gym"
    shutil.copytree(FIXTURES / "demo-gym", root, ignore=NOT_COPIED)
    cold = cli("scan", root, "--format", "json")
    entries = [p for p in (root / ".selfcall_audit_cache").rglob("*.dat")]
    assert entries
    for entry in entries:
        entry.write_bytes(damage)

    warm = cli("scan", root, "--format", "json")

    assert warm.stderr == "", warm.stderr
    assert warm.exit_code == cold.exit_code == 1
    assert json.loads(warm.stdout)["findings"] == json.loads(cold.stdout)["findings"]
    assert json.loads(warm.stdout)["errors"] == json.loads(cold.stdout)["errors"] == []


def test_a_well_formed_but_altered_cache_entry_is_not_trusted(cli, tmp_path: Path) -> None:
    """Entries are signed with a key outside the repository: well-formed entries written into the
    cache folder (say, committed with the checkout) that would hide self-calls are ignored."""
    root = tmp_path / "demo-gym"
    shutil.copytree(FIXTURES / "demo-gym", root, ignore=NOT_COPIED)
    honest = json.loads(cli("scan", root, "--format", "json", "--no-cache").stdout)["findings"]
    cli("scan", root, "--format", "json")
    cache = root / ".selfcall_audit_cache"
    # What an entry would hold if every config were empty: no instances, so no YAML-bound self-call.
    forgeries = {"yaml": [], "instances": {"instances": (), "errors": {}}}
    forged = 0
    for entry in cache.rglob("*.dat"):
        if entry.parent.name in (*forgeries, "snapshots"):
            signature, _, _ = entry.read_bytes().partition(b"\n")
            entry.write_bytes(signature + b"\n" + marshal.dumps(forgeries.get(entry.parent.name, {}), 4))
            forged += 1
    assert forged

    altered = json.loads(cli("scan", root, "--format", "json").stdout)["findings"]

    assert altered == honest


# which files a scan reads ---------------------------------------------------------------------------


def test_a_broken_file_that_cannot_matter_is_not_read_by_a_whole_project_scan(cli, tmp_path: Path) -> None:
    """The prefilter reads only files that can hold a self-call: a broken module that names no
    agent is not parsed, so it is no SCA900 entry (documented in docs/guarantees.md)."""
    root = make_project(tmp_path / "p", {"tools/broken.py": "def helper(:\n"})

    _, report = scan(cli, root)

    assert errors(report) == {}
    assert located(report) == [GOOD_FINDING]


@pytest.mark.parametrize("fillers", [0, 80], ids=["few files", "more files than a scoped run follows"])
def test_a_broken_file_named_on_the_command_line_is_always_read(cli, tmp_path: Path, fillers: int) -> None:
    files = {f"tools/filler_{n}.py": f"VALUE = {n}\n" for n in range(fillers)}
    root = make_project(tmp_path / "p", {**files, "tools/broken.py": "def helper(:\n"})
    named = [root / rel for rel in (*files, "tools/broken.py", GOOD)]

    _, report = scan(cli, *named)

    assert_only_error(report, "tools/broken.py", "syntax error")


@pytest.mark.parametrize("in_git", [False, True], ids=["walked", "git checkout"])
def test_a_file_link_out_of_the_root_named_on_the_command_line_is_read_as_a_whole_scan_reads_it(
    cli, tmp_path: Path, in_git: bool
) -> None:
    outside = tmp_path / "elsewhere" / "agent.py"
    outside.parent.mkdir()
    outside.write_text(GOOD_SOURCE.replace("GoodAgent", "ElsewhereAgent"))
    root = make_project(tmp_path / "repo", {})
    if in_git:
        _git_init(root)
    folder = root / "responses_api_agents" / "linked_agent"
    folder.mkdir()
    (folder / "device.py").symlink_to(os.devnull)
    (folder / "elsewhere.py").symlink_to(outside)
    linked = "responses_api_agents/linked_agent/"

    _, whole = scan(cli, root)
    _, named = scan(cli, folder / "device.py", folder / "elsewhere.py")

    assert errors(whole) == errors(named) == {f"{linked}device.py": "not a regular file: a device"}
    assert located(named) == [["SCA001", f"{linked}elsewhere.py", 6, 22]]
    assert located(whole) == sorted([GOOD_FINDING, *located(named)])


def test_without_a_writable_key_folder_the_scan_runs_without_a_cache(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", {})
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the key folder would go")
    env = {**os.environ, "XDG_CACHE_HOME": str(blocked)}

    result = subprocess.run(
        [sys.executable, "-m", "selfcall_audit", "scan", str(root), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )

    assert result.returncode == 1, result.stderr
    assert result.stderr == ""
    assert located(json.loads(result.stdout)) == [GOOD_FINDING]
    assert not (root / ".selfcall_audit_cache").exists()


FORK_COUNTING_RUN = """\
import concurrent.futures, json, sys, threading
from pathlib import Path

from selfcall_audit.config import Settings
from selfcall_audit.orchestration.project import Project

pools = []
real = concurrent.futures.ProcessPoolExecutor
concurrent.futures.ProcessPoolExecutor = lambda *a, **k: pools.append(1) or real(*a, **k)
settings = Settings(cache_dir="", jobs=2)
alone = Project(Path(sys.argv[1]), settings).analyze()
forked_alone = len(pools)
stop = threading.Event()
thread = threading.Thread(target=stop.wait)
thread.start()
try:
    beside = Project(Path(sys.argv[1]), settings).analyze()
finally:
    stop.set()
    thread.join()
print(json.dumps({
    "forked": [forked_alone, len(pools) - forked_alone],
    "same": [(f.path, f.line) for f in alone.findings] == [(f.path, f.line) for f in beside.findings],
    "found": len(alone.findings),
}))
"""


def test_worker_processes_are_not_forked_beside_other_threads(tmp_path: Path) -> None:
    """A fork copies locks other threads may hold (a test suite calling `assert_no_self_calls`
    from a threaded process): there the files are parsed in the calling process instead."""
    copies = {GOOD.replace("good_agent", f"good_agent_{n}"): GOOD_SOURCE for n in range(30)}
    root = make_project(tmp_path / "repo", copies)

    done = subprocess.run(
        [sys.executable, "-c", FORK_COUNTING_RUN, str(root)], capture_output=True, text=True, check=True
    )

    assert json.loads(done.stdout) == {"forked": [1, 0], "same": True, "found": 31}

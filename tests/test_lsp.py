"""`selfcall-audit server`, driven end to end by a real LSP client over stdio (pytest-lsp): the
diagnostics of an open file and their evidence, a buffer edit that removes the self-call, the quick
fix compared with what `fix` writes, and a YAML change on the disk that is analysed again."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import pytest_lsp
from agent_sources import JUDGE_CONFIG
from click.testing import Result
from lsprotocol import types as lsp
from pygls import uris
from pygls.workspace import TextDocument
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from selfcall_audit.frontends.editor import Document, Editor

pytestmark = pytest.mark.slow  # a server process each: seconds per test

JUDGE = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class JudgeAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        critique = await self.server_client.post(  # SCA001
            server_name=self.config.critic.name,
            url_path="/v1/responses",
            json=body,
        )
        return await critique.json()
"""
APP = "responses_api_agents/judge/app.py"
YAML = "responses_api_agents/judge/configs/judge.yaml"


def make_project(root: Path) -> Path:
    for rel, text in {
        "pyproject.toml": '[project]\nname = "fake-gym"\nversion = "0"\n',
        "nemo_gym/__init__.py": "",
        APP: JUDGE,
        YAML: JUDGE_CONFIG,
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "gym")


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "selfcall_audit", "server"]),
)
async def client(lsp_client: LanguageClient, tmp_path: Path):
    registrations: list[lsp.Registration] = []

    @lsp_client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
    def register(params: lsp.RegistrationParams) -> None:
        registrations.extend(params.registrations)

    lsp_client.registrations = registrations
    await lsp_client.initialize_session(
        lsp.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=uris.from_fs_path(str(tmp_path / "gym")),
        )
    )
    yield
    await lsp_client.shutdown_session()


def uri(project: Path, rel: str) -> str:
    return uris.from_fs_path(str(project / rel))


async def diagnostics_after(client: LanguageClient, send) -> list[lsp.Diagnostic]:
    """Send a notification, then wait for the diagnostics it brings."""
    waiting = asyncio.ensure_future(client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS))
    send()
    await asyncio.wait_for(waiting, 60)
    return waiting.result().diagnostics


async def open_app(client: LanguageClient, project: Path) -> list[lsp.Diagnostic]:
    item = lsp.TextDocumentItem(uri(project, APP), "python", 1, JUDGE)
    return await diagnostics_after(
        client, lambda: client.text_document_did_open(lsp.DidOpenTextDocumentParams(item))
    )


@pytest.mark.asyncio
async def test_an_open_file_gets_its_self_call_with_the_evidence(
    client: LanguageClient, project: Path
) -> None:
    (diagnostic,) = await open_app(client, project)

    assert (diagnostic.code, diagnostic.source) == ("SCA001", "selfcall-audit")
    assert diagnostic.severity == lsp.DiagnosticSeverity.Error
    # the call from `self.server_client.post(` (line 6, 0-based 5, column 25) to its `)`
    assert diagnostic.range == lsp.Range(lsp.Position(5, 25), lsp.Position(9, 9))
    (related,) = diagnostic.related_information
    assert related.location.uri == uri(project, YAML)
    assert related.location.range.start.line == 6  # `name: judge`, line 7
    assert "routes `critic` back to itself" in related.message
    assert [r.method for r in client.registrations] == [lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES]


@pytest.mark.asyncio
async def test_an_unsaved_edit_that_removes_the_self_call_clears_it(
    client: LanguageClient, project: Path
) -> None:
    await open_app(client, project)
    edited = JUDGE.replace("self.config.critic.name", '"policy_model"')
    change = lsp.TextDocumentContentChangeWholeDocument(edited)
    params = lsp.DidChangeTextDocumentParams(
        lsp.VersionedTextDocumentIdentifier(uri=uri(project, APP), version=2), [change]
    )

    after = await diagnostics_after(client, lambda: client.text_document_did_change(params))
    back = lsp.DidChangeTextDocumentParams(
        lsp.VersionedTextDocumentIdentifier(uri=uri(project, APP), version=3),
        [lsp.TextDocumentContentChangeWholeDocument(JUDGE)],
    )
    again = await diagnostics_after(client, lambda: client.text_document_did_change(back))

    assert list(after) == []
    assert (project / APP).read_text() == JUDGE  # nothing written: the buffer was analysed
    assert [d.code for d in again] == ["SCA001"]


@pytest.mark.asyncio
async def test_the_quick_fix_makes_what_fix_writes(
    client: LanguageClient, project: Path, tmp_path: Path, cli: Callable[..., Result]
) -> None:
    (diagnostic,) = await open_app(client, project)
    context = lsp.CodeActionContext(diagnostics=[diagnostic])
    params = lsp.CodeActionParams(lsp.TextDocumentIdentifier(uri(project, APP)), diagnostic.range, context)
    (action,) = await client.text_document_code_action_async(params)
    fixed = make_project(tmp_path / "fixed")
    assert cli("fix", "--no-cache", "-q", fixed).exit_code == 0

    assert action.kind == lsp.CodeActionKind.QuickFix
    edits = [change for change in action.edit.document_changes if isinstance(change, lsp.TextDocumentEdit)]
    created = [change.uri for change in action.edit.document_changes if isinstance(change, lsp.CreateFile)]
    texts = {}
    for edit in edits:  # applied as an editor applies them, to the text it holds
        path = uris.to_fs_path(edit.text_document.uri)
        document = TextDocument(edit.text_document.uri, Path(path).read_text() if Path(path).exists() else "")
        for text_edit in edit.edits:
            document.apply_change(lsp.TextDocumentContentChangePartial(text_edit.range, text_edit.new_text))
        texts[Path(path).relative_to(project).as_posix()] = document.source
    assert texts[APP] == (fixed / APP).read_text()
    assert created == [uri(project, "nemo_gym/inprocess.py")]
    assert texts["nemo_gym/inprocess.py"] == (fixed / "nemo_gym/inprocess.py").read_text()
    assert (project / APP).read_text() == JUDGE  # the editor applies the edit, the server writes nothing


@pytest.mark.asyncio
async def test_a_yaml_change_on_the_disk_is_analysed_again(client: LanguageClient, project: Path) -> None:
    await open_app(client, project)
    (project / YAML).write_text(JUDGE_CONFIG.replace("name: judge", "name: other_agent"))
    event = lsp.FileEvent(uri(project, YAML), lsp.FileChangeType.Changed)

    after = await diagnostics_after(
        client, lambda: client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams([event]))
    )

    assert list(after) == []


@pytest.mark.asyncio
async def test_a_pyproject_that_comes_with_settings_makes_its_folder_the_project(
    client: LanguageClient, project: Path
) -> None:
    await open_app(client, project)
    nested = "responses_api_agents/judge/pyproject.toml"
    (project / nested).write_text('[tool.selfcall-audit]\nignore = ["SCA001"]\n')
    event = lsp.FileEvent(uri(project, nested), lsp.FileChangeType.Created)

    after = await diagnostics_after(
        client, lambda: client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams([event]))
    )

    assert list(after) == []  # the judge's own settings now apply to it


def test_the_project_of_a_document_is_found_again_when_a_pyproject_comes(project: Path) -> None:
    editor = Editor(uris.from_fs_path)
    app = project / APP
    editor.documents[app] = Document(app, JUDGE)
    before = editor.session(app).root
    (app.parent / "pyproject.toml").write_text('[tool.selfcall-audit]\nignore = ["SCA001"]\n')
    kept = editor.session(app).root  # not looked for at each edit
    editor.disk_changed([app.parent / "pyproject.toml"], listing=True)

    assert (before, kept, editor.session(app).root) == (project, project, app.parent)


@pytest.mark.asyncio
async def test_hover_explains_the_rule(client: LanguageClient, project: Path) -> None:
    await open_app(client, project)

    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri(project, APP)), lsp.Position(6, 12))
    )
    outside = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri(project, APP)), lsp.Position(0, 1))
    )

    assert hover.contents.value.startswith("**SCA001** (agent-self-call)")
    assert "`selfcall-audit fix`" in hover.contents.value
    assert outside is None

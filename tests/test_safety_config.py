"""YAML `config_paths`: found as NeMo Gym finds them, a missing file reported, a chain of any
length read without recursion and within bounds."""

from __future__ import annotations

from pathlib import Path

from safety_support import APP, make_project

LOOP_AGENT = """\
from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent


class LoopAgent(SimpleResponsesAPIAgent):
    async def run(self, body):
        return await self.server_client.post(
            server_name=self.config.peer.name, url_path="/v1/responses", json=body
        )
"""


def test_a_chain_of_a_thousand_config_files_is_read_within_bounds(cli, tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")
    (root / "conf").mkdir()
    for number in range(1000):
        chained = f"config_paths: [conf/c{number + 1:04d}.yaml]\n" if number < 999 else ""
        (root / "conf" / f"c{number:04d}.yaml").write_text(f"{chained}level_{number}: {number}\n")

    done = cli("scan", "--no-cache", root, cwd=root)  # paths are printed relative to the current folder

    assert done.exit_code == 1 and done.stderr == "", done.stderr
    assert f"{APP}:34:26: SCA001" in done.stdout
    assert (
        "conf/c0099.yaml:1:1: SCA900 config_paths chain more than 100 files deep; conf/c0100.yaml not read"
        in (done.stdout)
    )


def test_a_missing_config_paths_file_is_an_sca900_entry(cli, tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")
    config = root / "responses_api_agents" / "x" / "configs" / "x.yaml"
    config.parent.mkdir()
    config.write_text(
        "config_paths: [responses_api_agents/x/configs/gone.yaml, '${oc.env:HOME}/private.yaml']\n"
        "x_agent:\n  responses_api_agents:\n    x:\n      entrypoint: app.py\n"
    )

    done = cli("scan", "--no-cache", root, cwd=root)  # paths are printed relative to the current folder

    assert done.exit_code == 1, done.stderr
    assert (
        "responses_api_agents/x/configs/x.yaml:1:1: SCA900 config_paths entry "
        "'responses_api_agents/x/configs/gone.yaml' was not found "
        "(looked for responses_api_agents/x/configs/gone.yaml)\n"
    ) in done.stdout
    assert "private.yaml" not in done.stdout  # built by a resolver, which is never run: not judged


def test_config_paths_resolve_from_the_gym_root_of_a_project_in_a_sub_folder(cli, tmp_path: Path) -> None:
    """NeMo Gym reads `config_paths` from the folder it runs in, its own root: in a monorepo, the
    sub-folder holding its pyproject.toml, not the repository's root."""
    root = tmp_path / "monorepo"
    loop = root / "gym" / "responses_api_agents" / "loop"
    (loop / "configs").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "outer"\n')
    (root / "gym" / "pyproject.toml").write_text('[project]\nname = "gym"\n')
    (loop / "app.py").write_text(LOOP_AGENT)
    (loop / "configs" / "loop.yaml").write_text(
        "config_paths: [responses_api_agents/loop/configs/peer.yaml]\n"
        "loop_agent:\n  responses_api_agents:\n    loop:\n      entrypoint: app.py\n"
    )
    (loop / "configs" / "peer.yaml").write_text(
        "loop_agent:\n  responses_api_agents:\n    loop:\n"
        "      peer: {type: responses_api_agents, name: loop_agent}\n"
    )

    done = cli("scan", "--no-cache", root, cwd=root)  # paths are printed relative to the current folder

    assert done.exit_code == 1, done.stderr
    assert done.stdout.startswith(
        "gym/responses_api_agents/loop/app.py:6:22: SCA001 LoopAgent.run posts to its own /v1/responses"
    )
    assert "SCA900" not in done.stdout

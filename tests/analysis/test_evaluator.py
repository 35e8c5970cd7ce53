"""Evaluation: url paths built the ways Python builds strings, and target names kept on `self`."""

from __future__ import annotations

import pytest
from stages import AGENT_IMPORT, Analysed

from selfcall_audit.analysis.values import OwnName, Unresolved

APP = "responses_api_agents/a/app.py"


def _paths(expression: str, prelude: str = "", members: str = "", modules: dict | None = None) -> list[str]:
    source = (
        AGENT_IMPORT
        + prelude
        + "\n\nclass A(SimpleResponsesAPIAgent):\n"
        + members
        + "    async def m(self, b, request=None):\n"
        + f"        await self.server_client.post(server_name=self.config.name, url_path={expression}, json=b)\n"
    )
    return Analysed({APP: source, **(modules or {})}).paths(APP, "A", "m")


@pytest.mark.parametrize(
    ("expression", "prelude", "expected"),
    [
        ('"/v1/responses"', "", ["/v1/responses"]),
        ('"/v1/%s" % "responses"', "", ["/v1/responses"]),
        ('"/%s/%s" % ("v1", "responses")', "", ["/v1/responses"]),
        ('"/%(v)s/responses" % {"v": "v1"}', "", ["/v1/responses"]),
        ('"/v1/%d" % b', "", ["/v1/{?}"]),
        ('"/{}/{}".format("v1", "responses")', "", ["/v1/responses"]),
        ('"/{1}/{0}".format("responses", "v1")', "", ["/v1/responses"]),
        ('"/{v}/responses".format(v=VERSION)', 'VERSION = "v1"', ["/v1/responses"]),
        ('"/".join(["", "v1", "responses"])', "", ["/v1/responses"]),
        ('"/".join(("", "v1", b.route))', "", ["/v1/{?}"]),
        ('posixpath.join("/v1", "responses")', "import posixpath", ["/v1/responses"]),
        ('os.path.join("/v1/", "responses")', "import os", ["/v1/responses"]),
        ('posixpath.join("/ignored", "/v1/responses")', "import posixpath", ["/v1/responses"]),
        ('f"/{VERSION}/responses"', 'VERSION = "v1"', ["/v1/responses"]),
        (
            'f"{prefix(b.rid)}/v1/responses"',
            'def prefix(rid):\n    return f"/ng-rollout/{rid}"',
            ["/ng-rollout/{rid}/v1/responses"],
        ),
        ('"/v1/responses/".rstrip("/")', "", ["/v1/responses"]),
        ("b.path", "", ["{?}"]),
    ],
)
def test_a_path_evaluates_to_what_python_would_build(
    expression: str, prelude: str, expected: list[str]
) -> None:
    assert _paths(expression, prelude) == expected


def test_unknown_parts_are_named_by_the_expression_written_there() -> None:
    prelude = "from nemo_gym.server_utils import rollout_path_prefix"
    members = '    def rollout_id_of(self, b):\n        return f"{b.task}-{b.seed}-a{b.attempt}"\n\n'

    # upstream's prefix helper (not in this repo) builds `/ng-rollout/{rollout_id}` from an id
    assert _paths('f"{rollout_path_prefix(self.rollout_id_of(b))}/v1/responses"', prelude, members) == [
        "/v1/responses",
        "/ng-rollout/{rollout_id}/v1/responses",
    ]
    assert _paths('f"/v1/sessions/{b.session_id}/close"') == ["/v1/sessions/{b.session_id}/close"]
    assert _paths('f"/v1/{kind}"', "kind = input()") == ["/v1/{kind}"]


def test_a_prefix_helper_of_the_repo_is_read_from_its_body() -> None:
    helpers = {
        "responses_api_agents/a/paths.py": (
            "def rollout_path_prefix(rollout_id, *, token_capture=False):\n"
            "    if not rollout_id:\n"
            '        return ""\n'
            '    return f"/ng-rollout/{rollout_id}"\n'
        )
    }
    prelude = "from .paths import rollout_path_prefix"

    assert _paths('f"{rollout_path_prefix(b.rid)}/v1/responses"', prelude, modules=helpers) == [
        "/v1/responses",
        "/ng-rollout/{rollout_id}/v1/responses",
    ]


def test_enum_members_and_their_value_across_modules() -> None:
    routes = {
        "responses_api_agents/a/routes.py": (
            "from enum import Enum, StrEnum\n\n"
            "class Route(str, Enum):\n    RESPONSES = '/v1/responses'\n\n"
            "class Plain(StrEnum):\n    RUN = '/run'\n"
        )
    }
    prelude = "from .routes import Plain, Route"

    assert _paths("Route.RESPONSES.value", prelude, modules=routes) == ["/v1/responses"]
    assert _paths("Route.RESPONSES", prelude, modules=routes) == ["/v1/responses"]
    assert _paths("Plain.RUN", prelude, modules=routes) == ["/run"]


def test_class_constants_and_values_stored_on_self_in_another_method() -> None:
    members = (
        '    PATH = "/v1/responses"\n\n'
        "    def model_post_init(self, context):\n"
        '        self._path = "/run"\n\n'
    )

    assert _paths("self.PATH", members=members) == ["/v1/responses"]
    assert _paths("self._path", members=members) == ["/run"]


def test_a_helper_is_read_from_what_its_body_returns() -> None:
    members = (
        "    def resolve_call_path(self, path, request):\n"
        "        if request is None:\n"
        "            return path\n"
        '        return f"{path}/ng-rollout/{request.id}"\n\n'
        "    def _with_prefix(self, path, body):\n"
        '        return "/ng-rollout/" + body.rid + path\n\n'
    )

    assert _paths('self.resolve_call_path("/v1/responses", request)', members=members) == [
        "/v1/responses",
        "/v1/responses/ng-rollout/{request.id}",
    ]
    assert _paths('self._with_prefix("/v1/responses", b)', members=members) == [
        "/ng-rollout/{?}/v1/responses"
    ]


def test_names_stored_on_self_in_any_method_are_followed() -> None:
    source = AGENT_IMPORT + (
        "\n\nclass A(SimpleResponsesAPIAgent):\n"
        "    def model_post_init(self, context):\n"
        "        self._me = self.config.name\n"
        "        self._other = pick(context)\n\n"
        "    async def m(self, b):\n"
        '        await self.server_client.post(server_name=self._me, url_path="/v1/responses", json=b)\n\n'
        "    async def n(self, b):\n"
        '        await self.server_client.post(server_name=self._other, url_path="/v1/responses", json=b)\n'
    )
    analysis = Analysed({APP: source})

    assert analysis.servers(APP, "A", "m") == [OwnName()]
    assert analysis.servers(APP, "A", "n") == [Unresolved()]

"""Deployment: the routes an agent serves, and which of them reach its /v1/responses handler."""

from __future__ import annotations

from stages import AGENT_IMPORT, Analysed

from selfcall_audit.analysis.classify import may_match, reachable
from selfcall_audit.analysis.index import ClassRef
from selfcall_audit.analysis.values import HOLE

APP = "responses_api_agents/a/app.py"
SOURCE = AGENT_IMPORT + (
    "class A(SimpleResponsesAPIAgent):\n"
    "    def setup_webserver(self):\n"
    "        app = super().setup_webserver()\n"
    '        app.post("/v1/responses/ng-rollout/{rollout_id}")(self.responses)\n'
    '        app.add_api_route("/score", self.score, methods=["POST"])\n'
    "        return app\n"
)


def test_routes_registered_by_the_class_and_its_bases_with_their_handlers() -> None:
    deployment = Analysed({APP: SOURCE}).resolver.deployment
    routes = deployment.own_routes(ClassRef(APP, "A"))

    assert routes["/v1/responses"] == "responses"
    assert routes["/v1/responses/ng-rollout/{rollout_id}"] == "responses"
    assert routes["/score"] == "score"
    assert routes["/run"] == "run"


def test_a_twin_registered_with_the_responses_handler_counts_as_v1_responses() -> None:
    deployment = Analysed({APP: SOURCE}).resolver.deployment

    assert deployment.responses_routes(ClassRef(APP, "A")) == {
        "/v1/responses",
        "/v1/responses/ng-rollout/{rollout_id}",
    }


def test_unknown_parts_of_a_path_match_as_wildcards() -> None:
    routes = ["/v1/responses", "/run", "/rollouts/{rollout_id}/stop"]

    assert reachable(("/v1/", HOLE), routes) == {"/v1/responses"}
    assert reachable((HOLE,), routes) == set(routes)
    assert reachable(("/rollouts/", HOLE, "/stop"), routes) == {"/rollouts/{rollout_id}/stop"}
    assert reachable(("/ng-rollout/", HOLE, "/v1/responses"), routes) == {"/v1/responses"}
    assert reachable(("/health",), routes) == set()


def test_a_template_parameter_never_spans_a_slash() -> None:
    assert may_match(list("/rollouts/a/stop"), ["/", *"rollouts/", None, *"/stop"])
    assert not may_match(list("/rollouts/a/b/stop"), ["/", *"rollouts/", None, *"/stop"])
    assert may_match([*"/rollouts/", None, *"/stop"], ["/", *"rollouts/", None, *"/stop"])


def test_routes_registered_on_an_app_passed_as_a_parameter() -> None:
    source = AGENT_IMPORT + (
        "class A(SimpleResponsesAPIAgent):\n"
        "    def setup_capture_routes(self, app):\n"
        '        app.post("/v1/responses/ng-rollout/{rollout_id}")(self.responses)\n'
    )
    deployment = Analysed({APP: source}).resolver.deployment

    assert "/v1/responses/ng-rollout/{rollout_id}" in deployment.responses_routes(ClassRef(APP, "A"))

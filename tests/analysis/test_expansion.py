"""Call expansion: the client calls a call site makes, through helpers, partials and stored callables."""

from __future__ import annotations

from stages import AGENT_IMPORT, Analysed

from selfcall_audit.analysis.expr import SELF, Attr, Str

APP = "responses_api_agents/a/app.py"


def _calls(members: str, body: str) -> list:
    source = AGENT_IMPORT + "import functools\n\n\nclass A(SimpleResponsesAPIAgent):\n" + members
    source += "    async def m(self, b):\n" + body
    return Analysed({APP: source}).client_calls(APP, "A", "m")


def test_a_partial_stored_on_self_in_model_post_init() -> None:
    members = (
        "    def model_post_init(self, context):\n"
        "        self._post = functools.partial(self.server_client.post, server_name=self.config.name)\n\n"
    )
    [call] = _calls(members, '        await self._post(url_path="/v1/responses", json=b)\n')

    assert (call.via_partial, call.client_method, call.path) == (True, "post", Str("/v1/responses"))


def test_a_client_stored_on_self_in_another_method() -> None:
    members = "    def model_post_init(self, context):\n        self._client = self.server_client\n\n"
    [call] = _calls(
        members, '        await self._client.post(server_name=self.config.name, url_path="/v1/responses")\n'
    )

    assert (call.via_partial, call.helper, call.site.callee) == (False, None, "self._client.post")


def test_a_helper_forwarding_its_parameters_is_expanded_at_the_call_site() -> None:
    members = (
        "    async def _send(self, path, body):\n"
        "        return await self.server_client.post(server_name=self.config.name, url_path=path, json=body)\n\n"
    )
    [call] = _calls(members, '        await self._send("/v1/responses", b)\n')

    assert (call.helper, call.path, call.site.line) == ("_send", Str("/v1/responses"), 10)


def test_a_helper_that_names_its_own_route_is_not_expanded_again() -> None:
    members = (
        "    async def _send(self, body):\n"
        '        return await self.server_client.post(server_name=self.config.name, url_path="/run", json=body)\n\n'
    )

    assert _calls(members, "        await self._send(b)\n") == []


def test_arguments_and_local_bindings_are_described_as_written() -> None:
    body = (
        "        config = self.config\n"
        '        await self.server_client.post(server_name=config.name, url_path="/v1/responses", **b)\n'
    )
    [call] = _calls("", body)

    assert call.site.written == (("server_name", "", None), ("url_path", "", None), (None, "**", None))
    assert call.site.aliases == (("config", 7, "server_name"),)


HOLDER = """\
class Chat:
    def __init__(self, agent, label="chat"):
        self.agent = agent
        self.label = label

    async def ask(self, body):
        return await self.agent.server_client.post(server_name=self.agent.config.name, url_path="/v1/responses")

    async def own(self, path):
        return await self.agent.server_client.post(server_name=self.config.name, url_path=path)


"""


def _held_calls(members: str, body: str) -> list:
    source = AGENT_IMPORT + HOLDER + "class A(SimpleResponsesAPIAgent):\n" + members
    source += "    async def m(self, b):\n" + body
    return Analysed({APP: source}).client_calls(APP, "A", "m")


def test_a_method_of_an_object_stored_on_self_sees_what_its_construction_gave_it() -> None:
    members = "    def model_post_init(self, context):\n        self.chat = Chat(self)\n\n"
    [call] = _held_calls(members, "        await self.chat.ask(b)\n")

    assert (call.helper, call.server, call.path) == (
        "ask",
        Attr(Attr(SELF, "config"), "name"),
        Str("/v1/responses"),
    )


def test_a_method_of_an_object_built_in_place_and_a_keyword_for_the_attribute() -> None:
    [call] = _held_calls("", "        await Chat(agent=self).ask(b)\n")

    assert call.server == Attr(Attr(SELF, "config"), "name")


def test_what_the_object_reads_of_itself_is_not_taken_for_the_agent() -> None:
    """`self.config.name` inside the object is the object's own config, even where the call
    takes its route from the agent: no client call of the agent's comes from it."""
    members = "    def model_post_init(self, context):\n        self.chat = Chat(self)\n\n"

    assert _held_calls(members, '        await self.chat.own("/v1/responses")\n') == []


def test_an_attribute_set_outside_init_is_not_taken_from_the_construction() -> None:
    source = HOLDER.replace(
        "        self.agent = agent\n",
        "        pass\n\n    def bind(self, agent):\n        self.agent = agent\n",
    )
    members = "    def model_post_init(self, context):\n        self.chat = Chat(self)\n\n"
    analysis = Analysed(
        {
            APP: AGENT_IMPORT
            + source
            + "class A(SimpleResponsesAPIAgent):\n"
            + members
            + "    async def m(self, b):\n        await self.chat.ask(b)\n"
        }
    )

    assert analysis.client_calls(APP, "A", "m") == []

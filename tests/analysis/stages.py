"""The analysis stages over sources held in memory, for the unit specs."""

from __future__ import annotations

from textwrap import dedent

from selfcall_audit.analysis.classify import path_text
from selfcall_audit.analysis.evaluate import Ctx
from selfcall_audit.analysis.extract import extract
from selfcall_audit.analysis.gym_config import AgentInstance
from selfcall_audit.analysis.hierarchy import Hierarchy
from selfcall_audit.analysis.index import ClassRef, FunctionRef, Index
from selfcall_audit.analysis.resolve import Resolver
from selfcall_audit.config import Settings

BASE_MODULE = "nemo_gym/base_responses_api_agent.py"
BASE_SOURCE = """\
class SimpleResponsesAPIAgent:
    def setup_webserver(self):
        app = FastAPI()
        app.post("/v1/responses")(self.responses)
        app.post("/run")(self.run)
        return app
"""
AGENT_IMPORT = "from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent\n"


class Analysed:
    """The stages over a set of modules, and questions a spec asks them."""

    def __init__(self, sources: dict[str, str], instances: list[AgentInstance] = ()):
        files = {BASE_MODULE: BASE_SOURCE, **{path: dedent(text) for path, text in sources.items()}}
        self.index = Index(set(files), lambda path: extract(path, files[path].encode()))
        self.hierarchy = Hierarchy(self.index, frozenset(Settings().agent_bases))
        self.resolver = Resolver(self.hierarchy, Settings(), list(instances))

    def client_calls(self, path: str, cls: str, method: str) -> list:
        ref = ClassRef(path, cls)
        function = self.hierarchy.method(ref, method)[1]
        return self.resolver.expander.client_calls(function, FunctionRef(path, cls, method), ref)

    def paths(self, path: str, cls: str, method: str) -> list[str]:
        """What the url path of the method's client call(s) can be, unknown parts as `{?}`."""
        ctx = Ctx(path, ClassRef(path, cls))
        return [
            path_text(alternative)
            for call in self.client_calls(path, cls, method)
            for alternative in self.resolver.evaluator.path(call.path, ctx)
        ]

    def servers(self, path: str, cls: str, method: str) -> list:
        ctx = Ctx(path, ClassRef(path, cls))
        return [
            s
            for call in self.client_calls(path, cls, method)
            for s in self.resolver.evaluator.server(call.server, ctx)
        ]

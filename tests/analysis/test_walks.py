"""The walks the site check makes of a method (`reaching.children`, `reaching.walk`) meet the
nodes in `ast`'s own order: the first binding found, the first nested function that rebinds a
name, are the ones `ast.walk` and `ast.iter_child_nodes` would give."""

from __future__ import annotations

import ast

from selfcall_audit.analysis import reaching

SOURCE = """\
@decorator(arg)
class Agent(Base, metaclass=Meta):
    async def run(self, body, *args, key=None, **kwargs):
        total: int = 0
        for item, (a, *rest) in enumerate(body):
            total += item if a else -item
        with open(path) as stream, lock:
            data = [x async for x in stream if (y := x)]
        try:
            response = await self.server_client.post(server_name=self.config.name, json={**body})
        except (ValueError, KeyError) as error:
            del total
        else:
            pass
        finally:
            nonlocal_value = lambda q, /, r=1: q + r
        match response:
            case {"a": 1, **others} | [1, *_] if others:
                global COUNT
            case Point(x=0) as p:
                return f"{p!r:>10}"
        return await response.json()
"""


def test_children_and_walk_meet_the_nodes_in_asts_order() -> None:
    module = ast.parse(SOURCE)

    assert reaching.walk(module) == list(ast.walk(module))
    assert all(reaching.children(node) == list(ast.iter_child_nodes(node)) for node in ast.walk(module))

"""Hierarchy: which classes are agents and in which order their members are found."""

from __future__ import annotations

from stages import AGENT_IMPORT, BASE_MODULE, Analysed

from selfcall_audit.analysis.index import ClassRef

APP = "responses_api_agents/graph/app.py"
SIBLING = "responses_api_agents/graph/critic_agent.py"


def test_a_long_inheritance_chain_is_walked_without_recursion_or_depth_cut() -> None:
    chain = AGENT_IMPORT + "class C0(SimpleResponsesAPIAgent):\n    pass\n"
    chain += "".join(f"class C{i}(C{i - 1}):\n    pass\n" for i in range(1, 3000))
    analysis = Analysed({APP: chain})
    last = ClassRef(APP, "C2999")

    # asked first about the deepest class: nothing is memoised yet
    assert analysis.hierarchy.is_agent(last)
    assert len(analysis.hierarchy.mro(last)) == 3001
    assert analysis.hierarchy.agents_using(last)[0] == last


def test_a_base_imported_from_a_sibling_module_with_an_alias() -> None:
    app = AGENT_IMPORT + "class GraphAdapter(SimpleResponsesAPIAgent):\n    pass\n"
    sibling = "from app import GraphAdapter as Adapter\n\nclass CriticAgent(Adapter):\n    pass\n"
    analysis = Analysed({APP: app, SIBLING: sibling})

    assert analysis.hierarchy.bases(ClassRef(SIBLING, "CriticAgent")) == [ClassRef(APP, "GraphAdapter")]
    assert analysis.hierarchy.is_agent(ClassRef(SIBLING, "CriticAgent"))


def test_the_same_bare_name_in_two_files_is_two_classes() -> None:
    other = "responses_api_agents/tools/app.py"
    analysis = Analysed(
        {
            APP: AGENT_IMPORT + "class Base(SimpleResponsesAPIAgent):\n    pass\n",
            other: "class Base:\n    pass\n\nclass Tool(Base):\n    pass\n",
        }
    )

    assert analysis.hierarchy.is_agent(ClassRef(APP, "Base"))
    assert not analysis.hierarchy.is_agent(ClassRef(other, "Tool"))


def test_a_base_imported_inside_try_except_import_error() -> None:
    source = (
        "try:\n"
        "    from nemo_gym.base_responses_api_agent import SimpleResponsesAPIAgent as Base\n"
        "except ImportError:\n"
        "    Base = object\n\n"
        "class Agent(Base):\n    pass\n"
    )

    assert Analysed({APP: source}).hierarchy.is_agent(ClassRef(APP, "Agent"))


def test_a_class_defined_inside_a_function_is_a_class() -> None:
    source = (
        AGENT_IMPORT
        + "def build():\n    class Inner(SimpleResponsesAPIAgent):\n        pass\n    return Inner\n"
    )

    assert Analysed({APP: source}).hierarchy.is_agent(ClassRef(APP, "Inner"))


def test_an_inheritance_cycle_is_no_agent_and_ends() -> None:
    source = "class A(B):\n    pass\n\nclass B(A):\n    pass\n"
    analysis = Analysed({APP: source})

    assert not analysis.hierarchy.is_agent(ClassRef(APP, "A"))
    assert analysis.hierarchy.mro(ClassRef(APP, "A")) == [ClassRef(APP, "A"), ClassRef(APP, "B")]


def test_aliases_naming_each_other_are_each_followed_once() -> None:
    """Two aliases, each either itself or the other: following every branch to the depth limit
    would ask about 2**30 names; each alias is read once, and the real base behind one is found."""
    source = AGENT_IMPORT + (
        "FLAG = True\n"
        "Base = Base if FLAG else Other\n"
        "Other = Other if FLAG else SimpleResponsesAPIAgent\n\n"
        "class Agent(Base):\n    pass\n"
    )
    analysis = Analysed({APP: source})
    asked = []
    candidates = analysis.index.candidates
    analysis.index.candidates = lambda path, expr: asked.append(expr) or candidates(path, expr)

    assert analysis.hierarchy.bases(ClassRef(APP, "Agent")) == [
        ClassRef(BASE_MODULE, "SimpleResponsesAPIAgent")
    ]
    assert [expr.name for expr in asked] == ["Base", "Other", "SimpleResponsesAPIAgent"]
    assert analysis.index.cut == {}

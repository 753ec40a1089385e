"""The delegate tool in the real graph with real PostgreSQL: the call waits as a Delegation
waitpoint, re-dispatches idempotently on resume, and returns the child's outcome."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.tools import ToolException

from sessionops.agent import build_agent, waitpoint_from_state
from sessionops.agent.delegate import delegate_tool, result_text
from sessionops.agent.waitpoints import (
    ResumeInvalid,
    build_delegation_resume,
    build_resume,
    delegation_children,
    validate_resume,
)
from tests.agent.harness import last_ai_text, messages, resume, say, snapshot, thread, tool_results
from tests.agent.scripted import ScriptedChatModel, tool_call_id

CFG = thread()


class Children:
    """A dispatch that records its calls; the child name derives from the call like the worker's."""

    def __init__(self, refuse: set[str] = frozenset()) -> None:
        self.calls: list[tuple[str, str, str, str | None]] = []
        self.refuse = refuse

    def dispatch(self, tool_call_id: str, name: str, message: str, agent: str | None) -> str:
        if agent in self.refuse:
            raise ToolException(f"delegate: refused: alice may not get agents {agent!r}")
        self.calls.append((tool_call_id, name, message, agent))
        return f"{name.lower()}-{tool_call_id[-3:].replace('_', '')}"


def agent(saver, workdir: Path, script: list, children: Children):
    model = ScriptedChatModel(script=script)
    graph = build_agent(snapshot(approval_mode="AlwaysTrust"), model=model, workdir=workdir, checkpointer=saver,
                        extra_tools=[delegate_tool(children.dispatch)])
    return graph, model


def test_parallel_delegations_wait_as_one_waitpoint_and_resume_with_each_childs_outcome(saver, workdir):
    children = Children()
    graph, model = agent(saver, workdir, [
        [("delegate", {"name": "a", "message": "task A"}), ("delegate", {"name": "b", "message": "task B",
                                                                           "agent": "reviewer"}),
         ("list_files", {})],
        "Both answered."], children)
    say(graph, "split the work", CFG)
    state = graph.get_state(CFG)
    waitpoint = waitpoint_from_state(state)
    assert waitpoint.kind == "Delegation" and waitpoint.children == ["a-00", "b-01"]
    assert delegation_children(state) == ["a-00", "b-01"]
    # The calls run as parallel tasks: in any order.
    assert sorted(children.calls) == [(tool_call_id(0, 0), "a", "task A", None),
                                      (tool_call_id(0, 1), "b", "task B", "reviewer")]
    # The sibling that needs no child already ran and persisted its result.
    assert tool_call_id(0, 2) in tool_results(messages(graph, CFG))
    # A Resume input can never answer a delegation.
    assert validate_resume(waitpoint)[0].status == 409
    with pytest.raises(ResumeInvalid):
        build_resume(state, answers=["x"])

    outcomes = {"a-00": {"session": "a-00", "phase": "Succeeded", "text": "A is done"},
                "b-01": {"session": "b-01", "phase": "Failed", "message": "model down"}}
    out = resume(graph, build_delegation_resume(state, outcomes), CFG)
    results = tool_results(out["messages"])
    assert results[tool_call_id(0, 0)].content == "A is done" and results[tool_call_id(0, 0)].status == "success"
    assert results[tool_call_id(0, 1)].status == "error"
    assert "child 'b' (session b-01) ended Failed: model down" in results[tool_call_id(0, 1)].content
    assert last_ai_text(out["messages"]) == "Both answered." and model.model_calls == 2
    # Resuming re-ran the tools from their start: dispatch is asked again for the same calls.
    assert sorted(children.calls[2:]) == sorted(children.calls[:2])


def test_a_refused_or_malformed_delegation_is_an_error_result_without_waiting(saver, workdir):
    children = Children(refuse={"secret"})
    graph, _ = agent(saver, workdir, [
        [("delegate", {"name": "x", "message": "m", "agent": "secret"}),
         ("delegate", {"name": "bad name!", "message": "m"}), ("delegate", {"name": "ok", "message": " "})],
        "I will do it myself."], children)
    out = say(graph, "try", CFG)
    results = tool_results(out["messages"])
    assert "refused: alice may not get agents 'secret'" in results[tool_call_id(0, 0)].content
    assert "name must be 1 to 64 characters" in results[tool_call_id(0, 1)].content
    assert "message must not be empty" in results[tool_call_id(0, 2)].content
    assert {r.status for r in results.values()} == {"error"} and children.calls == []
    assert waitpoint_from_state(graph.get_state(CFG)) is None
    assert last_ai_text(out["messages"]) == "I will do it myself."


def test_a_delegation_resume_needs_every_childs_outcome(saver, workdir):
    graph, _ = agent(saver, workdir, [[("delegate", {"name": "a", "message": "t"})], "ok"], Children())
    say(graph, "go", CFG)
    with pytest.raises(ResumeInvalid, match="no outcome for child 'a-00'"):
        build_delegation_resume(graph.get_state(CFG), {})


def test_the_tool_result_says_when_the_deadline_cut_a_child_off() -> None:
    with pytest.raises(ToolException, match="did not finish before the deadline \\(it was Running\\)"):
        result_text("w", {"session": "w-1", "phase": "Running", "deadlinePassed": True})
    assert result_text("w", {"phase": "Succeeded", "text": "fine"}) == "fine"

"""The agent graph against real PostgreSQL: turns, per-call approval, questions, access, limits."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from sessionops.agent import (
    AgentNodes,
    ResumeInvalid,
    build_agent,
    build_resume,
    node_names,
    waitpoint_from_state,
)
from sessionops.agent.access import refusal_message
from sessionops.agent.approval import call_id
from sessionops.agent.limits import step_limit_message
from sessionops.api.run import WaitpointKind
from tests.agent.harness import last_ai_text, messages, resume, say, snapshot, thread, tool_results
from tests.agent.scripted import ScriptedChatModel, tool_call_id

CFG = thread()


def agent(saver, workdir: Path, script: list, snap: dict | None = None, **kwargs):
    """The graph of a snapshot (``snap`` overrides) with a scripted model; ``kwargs`` go to build_agent."""
    model = ScriptedChatModel(script=script)
    graph = build_agent(snapshot(**(snap or {})), model=model, workdir=workdir, checkpointer=saver, **kwargs)
    return graph, model


def test_the_topology_is_fixed(saver, workdir):
    graph, _ = agent(saver, workdir, [])
    assert node_names(graph) == [
        "model", "steering.after_model", "steering.before_model", "step_limit.before_agent",
        "step_limit.before_model", "summarization.before_model", "tools"]
    assert AgentNodes.MODEL in graph.nodes and AgentNodes.TOOLS in graph.nodes
    assert {"messages", "files_written", "delivered_steers", "turn_model_calls"} <= set(graph.channels)


def test_a_follow_up_turn_is_answered_with_tools(saver, workdir):
    (workdir / "notes.txt").write_text("buy milk")
    graph, model = agent(saver, workdir, [
        [("list_files", {})], "There is notes.txt.",
        [("read_file", {"path": "notes.txt"})], "It says: buy milk.",
    ])
    say(graph, "What files are there?", CFG)
    assert last_ai_text(messages(graph, CFG)) == "There is notes.txt."
    out = say(graph, "What does it say?", CFG)
    assert last_ai_text(out["messages"]) == "It says: buy milk."
    assert tool_results(out["messages"])[tool_call_id(2, 0)].content == "buy milk"
    assert model.model_calls == 4
    assert graph.get_state(CFG).next == ()


def test_a_parallel_result_is_persisted_while_a_sibling_waits_for_approval(saver, workdir):
    graph, model = agent(saver, workdir, [
        [("write_file", {"path": "a.txt", "content": "A"}), ("run_shell", {"command": "echo hi"})],
        "Both done.",
    ])
    out = say(graph, "write and run", CFG)

    assert len(out["__interrupt__"]) == 1
    waitpoint = waitpoint_from_state(graph.get_state(CFG))
    assert waitpoint.kind == WaitpointKind.APPROVAL.value
    [call] = waitpoint.calls
    assert (call.tool, call.tool_call_id, call.args) == ("run_shell", tool_call_id(0, 1), {"command": "echo hi"})
    assert call.call_id == call_id("ai-0", tool_call_id(0, 1))
    # The completed sibling's result is a pending write of the current checkpoint.
    pending = saver.get_tuple(CFG).pending_writes
    written = {channel for _, channel, _ in pending}
    assert {"messages", "files_written", "__interrupt__"} <= written
    [write_result] = [v for _, ch, v in pending if ch == "messages"]
    assert write_result[0].tool_call_id == tool_call_id(0, 0)
    assert (workdir / "a.txt").read_text() == "A"
    assert model.model_calls == 1

    out = resume(graph, build_resume(graph.get_state(CFG), waitpoint_id=waitpoint.id,
                                     decisions=[{"callId": call.call_id, "decision": "Approve"}]), CFG)
    results = tool_results(out["messages"])
    assert results[tool_call_id(0, 1)].content == "exit code 0\nhi\n"
    assert results[tool_call_id(0, 0)].content == "wrote 1 characters to a.txt"
    assert out["files_written"] == ["a.txt"]
    assert last_ai_text(out["messages"]) == "Both done."
    # Approving ran the pending call; the only new model call is the one after the results.
    assert model.model_calls == 2
    assert model.calls[-1][-2:] == [results[tool_call_id(0, 0)], results[tool_call_id(0, 1)]]


def test_a_rejected_call_returns_an_error_result_to_the_model(saver, workdir):
    graph, model = agent(saver, workdir, [[("run_shell", {"command": "rm -rf /"})], "Understood."])
    say(graph, "clean up", CFG)
    waitpoint = waitpoint_from_state(graph.get_state(CFG))
    out = resume(graph, build_resume(graph.get_state(CFG), decisions=[
        {"callId": waitpoint.calls[0].call_id, "decision": "Reject", "message": "too dangerous"}]), CFG)
    result = tool_results(out["messages"])[tool_call_id(0, 0)]
    assert (result.status, result.content) == ("error", "rejected by the user: too dangerous")
    assert model.calls[-1][-1] == result
    assert last_ai_text(out["messages"]) == "Understood."


def test_several_waiting_calls_form_one_waitpoint_decided_by_one_resume(saver, workdir):
    graph, model = agent(saver, workdir, [
        [("run_shell", {"command": "echo one"}), ("list_files", {}), ("run_shell", {"command": "echo two"})],
        "ok",
    ])
    out = say(graph, "go", CFG)
    assert len(out["__interrupt__"]) == 2
    state = graph.get_state(CFG)
    waitpoint = waitpoint_from_state(state)
    assert [c.tool_call_id for c in waitpoint.calls] == [tool_call_id(0, 0), tool_call_id(0, 2)]
    assert waitpoint_from_state(graph.get_state(CFG)).id == waitpoint.id  # deterministic
    command = build_resume(state, waitpoint_id=waitpoint.id, decisions=[
        {"callId": waitpoint.calls[1].call_id, "decision": "Reject"},
        {"callId": waitpoint.calls[0].call_id, "decision": "Approve"},
    ])
    assert set(command.resume) == {i.id for i in state.interrupts}
    out = resume(graph, command, CFG)
    results = tool_results(out["messages"])
    assert results[tool_call_id(0, 0)].content == "exit code 0\none\n"
    assert results[tool_call_id(0, 2)].content == "rejected by the user"
    assert graph.get_state(CFG).next == () and model.model_calls == 2


def test_always_trust_never_pauses(saver, workdir):
    graph, _ = agent(saver, workdir, [[("run_shell", {"command": "echo trusted"})], "done"],
                     snap={"approval_mode": "AlwaysTrust"})
    out = say(graph, "go", CFG)
    assert "__interrupt__" not in out
    assert tool_results(out["messages"])[tool_call_id(0, 0)].content == "exit code 0\ntrusted\n"


def test_ask_user_resumes_with_complete_answers(saver, workdir):
    questions = [
        {"question": "Which environment?", "options": ["dev", "prod"]},
        {"question": "Which regions?", "options": ["eu", "us", "ap"], "multi_select": True},
        {"question": "Anything else?", "options": ["no"], "allow_other": True},
    ]
    graph, model = agent(saver, workdir, [[("ask_user", {"questions": questions})], "Deploying."])
    say(graph, "deploy", CFG)
    state = graph.get_state(CFG)
    waitpoint = waitpoint_from_state(state)
    assert waitpoint.kind == WaitpointKind.QUESTION.value
    assert [q.question for q in waitpoint.questions] == [q["question"] for q in questions]
    assert [q.multi_select for q in waitpoint.questions] == [False, True, False]

    out = resume(graph, build_resume(state, waitpoint_id=waitpoint.id,
                                     answers=["prod", ["eu", "us"], "be careful"]), CFG)
    result = tool_results(out["messages"])[tool_call_id(0, 0)]
    assert '"answer": ["eu", "us"]' in result.content and '"answer": "be careful"' in result.content
    assert last_ai_text(out["messages"]) == "Deploying." and model.model_calls == 2


def test_questions_of_parallel_ask_user_calls_are_answered_by_one_resume(saver, workdir):
    graph, _ = agent(saver, workdir, [[("ask_user", {"questions": [{"question": "A?"}, {"question": "B?"}]}),
                                        ("ask_user", {"questions": [{"question": "C?", "options": ["x", "y"]}]})],
                                       "ok"])
    say(graph, "ask", CFG)
    waitpoint = waitpoint_from_state(graph.get_state(CFG))
    assert [q.question for q in waitpoint.questions] == ["A?", "B?", "C?"]
    out = resume(graph, build_resume(graph.get_state(CFG), answers=["a", "b", "y"]), CFG)
    results = tool_results(out["messages"])
    assert '"answer": "a"' in results[tool_call_id(0, 0)].content and '"answer": "b"' in results[tool_call_id(0, 0)].content
    assert '"answer": "y"' in results[tool_call_id(0, 1)].content


def test_approvals_are_asked_before_questions_of_the_same_step(saver, workdir):
    graph, _ = agent(saver, workdir, [
        [("ask_user", {"questions": [{"question": "Name?"}]}), ("run_shell", {"command": "echo x"})], "done"])
    say(graph, "go", CFG)
    first = waitpoint_from_state(graph.get_state(CFG))
    assert first.kind == WaitpointKind.APPROVAL.value
    resume(graph, build_resume(graph.get_state(CFG), decisions=[
        {"callId": first.calls[0].call_id, "decision": "Approve"}]), CFG)
    second = waitpoint_from_state(graph.get_state(CFG))
    assert second.kind == WaitpointKind.QUESTION.value and second.id != first.id
    out = resume(graph, build_resume(graph.get_state(CFG), answers=["Ada"]), CFG)
    assert '"answer": "Ada"' in tool_results(out["messages"])[tool_call_id(0, 0)].content
    assert tool_results(out["messages"])[tool_call_id(0, 1)].content == "exit code 0\nx\n"


def test_a_tool_hidden_by_the_filter_is_refused_at_the_call_boundary(saver, workdir):
    graph, model = agent(saver, workdir, [[("run_shell", {"command": "echo no"})], "ok"],
                         tool_filter=lambda names: {n for n in names if n != "run_shell"})
    out = say(graph, "go", CFG)
    assert "run_shell" not in model.bound_tools[0] and "read_file" in model.bound_tools[0]
    result = tool_results(out["messages"])[tool_call_id(0, 0)]
    assert (result.status, result.content) == ("error", refusal_message("run_shell"))
    assert "__interrupt__" not in out  # refused before approval is even asked


def test_access_revoked_while_waiting_is_enforced_when_the_call_resumes(saver, workdir):
    allowed = {"run_shell": True}
    graph, _ = agent(saver, workdir, [[("run_shell", {"command": "touch ran"})], "ok"],
                     tool_filter=lambda names: {n for n in names if allowed.get(n, True)})
    say(graph, "go", CFG)
    waitpoint = waitpoint_from_state(graph.get_state(CFG))
    allowed["run_shell"] = False
    out = resume(graph, build_resume(graph.get_state(CFG), decisions=[
        {"callId": waitpoint.calls[0].call_id, "decision": "Approve"}]), CFG)
    assert tool_results(out["messages"])[tool_call_id(0, 0)].content == refusal_message("run_shell")
    assert not (workdir / "ran").exists()


def test_the_step_limit_ends_the_turn(saver, workdir):
    graph, model = agent(saver, workdir, [[("list_files", {})]] * 10, snap={"max_execution_steps": 3})
    out = say(graph, "loop forever", CFG)
    assert model.model_calls == 3
    assert out["messages"][-1].content == step_limit_message(3)
    assert graph.get_state(CFG).next == ()


def test_the_step_limit_counts_the_turn_across_segments_and_resets_for_the_next_turn(saver, workdir):
    graph, model = agent(saver, workdir, [[("run_shell", {"command": "true"})], [("list_files", {})],
                                          [("list_files", {})], "second turn answer"],
                         snap={"max_execution_steps": 2})
    say(graph, "go", CFG)
    waitpoint = waitpoint_from_state(graph.get_state(CFG))
    out = resume(graph, build_resume(graph.get_state(CFG), decisions=[
        {"callId": waitpoint.calls[0].call_id, "decision": "Approve"}]), CFG)
    # 1 call before the pause + 1 after the resume: the limit of 2 holds for the whole turn.
    assert model.model_calls == 2 and out["messages"][-1].content == step_limit_message(2)
    out = say(graph, "next turn", CFG)
    assert last_ai_text(out["messages"]) == "second turn answer" and model.model_calls == 3


def test_selected_tools_and_preloaded_skills_shape_the_model_request(saver, workdir):
    graph, model = agent(saver, workdir, ["hello"],
                         snap={"tools": ["read_file", "load_skill"], "skills": ["style"],
                               "preload_skills": ["style", "gone"]},
                         skills={"style": "Write tersely.", "other": "x"})
    say(graph, "hi", CFG)
    assert model.bound_tools[0] == ["read_file", "load_skill"]
    system = model.calls[0][0]
    assert isinstance(system, SystemMessage)
    assert "## Skill: style\n\nWrite tersely." in system.content
    assert "load_skill tool: style" in system.content and "other" not in system.content


def test_long_tool_results_are_truncated(saver, workdir):
    (workdir / "big.txt").write_text("y" * 2000)
    graph, _ = agent(saver, workdir, [[("read_file", {"path": "big.txt"})], "ok"],
                     snap={"summarization": {"toolResultTokenLimit": 100}})
    out = say(graph, "read", CFG)
    content = tool_results(out["messages"])[tool_call_id(0, 0)].content
    assert content.startswith("y" * 400) and "truncated: 1600 more characters" in content


def test_long_histories_are_summarized_keeping_call_pairs(saver, workdir):
    graph, model = agent(saver, workdir, [[("list_files", {})], "a", "b", "c", "d"],
                         snap={"summarization": {"thresholdMessages": 5, "keepMessages": 2}})
    for text in ["one", "two", "three"]:
        say(graph, text, CFG)
    msgs = messages(graph, CFG)
    assert any("summary of the conversation" in str(m.content) for m in msgs if isinstance(m, HumanMessage))
    assert len(msgs) < 8
    assert model.model_calls == 4 and len(model.calls) > model.model_calls


def test_a_model_that_keeps_failing_fails_the_turn(saver, workdir):
    def broken(_messages):
        raise ConnectionError("model endpoint down")

    graph, model = agent(saver, workdir, [broken], snap={"model_retries": 0})
    with pytest.raises(ConnectionError):
        say(graph, "hi", CFG)
    assert not any(isinstance(m, AIMessage) for m in messages(graph, CFG))


def test_build_resume_rejects_a_run_that_is_not_waiting(saver, workdir):
    graph, _ = agent(saver, workdir, ["hi"])
    say(graph, "hello", CFG)
    with pytest.raises(ResumeInvalid, match="not waiting"):
        build_resume(graph.get_state(CFG), answers=["x"])

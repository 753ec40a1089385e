"""Cleaning a cancelled thread: three guarded commits, crash and retry at every point.

Real PostgreSQL, real PostgresSaver, real reducers, the real ``create_agent`` graph to
reach the waiting state, and the checkpoint-only graph to clean it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.postgres import PostgresSaver

from sessionops.agent import AgentNodes, build_agent, node_names, waitpoint_from_state
from sessionops.cancellation import (
    CANCEL_CONTENT,
    STEPS,
    CheckpointOnlyError,
    CleanupError,
    acleanup_thread,
    cancel_message_id,
    checkpoint_graph,
    cleanup_thread,
    missing_results,
)
from sessionops.cancellation.cleanup import STEP_CANCEL_RESULTS, STEP_CLEAR, STEP_MERGE
from sessionops.platform import checkpoints
from tests.agent.harness import say, snapshot, thread, tool_results
from tests.agent.scripted import ScriptedChatModel, tool_call_id

SNAP = snapshot()
CFG = thread("session-to-cancel")


class Crash(Exception):
    """The operator process dying at a chosen moment."""


class CrashingSaver(PostgresSaver):
    """Counts commits (``put``) and raises at a chosen one: ``("after_put", n)`` once the
    n-th checkpoint is durable, ``("before_put", n)`` after the step's pending writes were
    stored but before its checkpoint is."""

    def __init__(self, conn: Any, crash: tuple[str, int] | None = None) -> None:
        super().__init__(conn)
        self.crash = crash
        self.puts = 0
        self.write_calls = 0

    def put(self, config, checkpoint, metadata, new_versions):
        attempt = self.puts + 1
        if self.crash == ("before_put", attempt):
            raise Crash(f"killed before checkpoint {attempt} (after {self.write_calls} put_writes)")
        result = super().put(config, checkpoint, metadata, new_versions)
        self.puts = attempt
        if self.crash == ("after_put", attempt):
            raise Crash(f"killed after checkpoint {attempt}")
        return result

    def put_writes(self, config, writes, task_id, task_path=""):
        self.write_calls += 1
        return super().put_writes(config, writes, task_id, task_path)


def waiting_run(saver, workdir: Path, calls: list[tuple[str, dict]], config=CFG):
    """A real turn stopped with parallel calls: all but the approval-gated ones completed."""
    model = ScriptedChatModel(script=[calls, "next turn answer"])
    graph = build_agent(SNAP, model=model, workdir=workdir, checkpointer=saver)
    out = say(graph, "do it all", config)
    assert out["__interrupt__"], "the run must be waiting"
    return graph, model


def parallel_calls(count: int) -> list[tuple[str, dict]]:
    """``count - 1`` writes that complete and one shell call that waits for approval."""
    writes = [("write_file", {"path": f"f{i}.txt", "content": str(i)}) for i in range(count - 1)]
    return [*writes, ("run_shell", {"command": "echo never"})]


def end_state(config=CFG, dsn: str | None = None, saver=None):
    graph = checkpoint_graph(SNAP, saver)
    state = graph.get_state(config)
    msgs = [(type(m).__name__, m.id if (m.id or "").startswith(("cancel:", "ai-")) else None, str(m.content),
             getattr(m, "tool_call_id", None), getattr(m, "status", None)) for m in state.values["messages"]]
    return {"messages": msgs, "files_written": state.values.get("files_written"), "next": state.next,
            "tasks": len(state.tasks), "interrupts": len(state.interrupts)}


def expected_end_state(count: int) -> dict:
    calls = parallel_calls(count)
    msgs = [("HumanMessage", None, "do it all", None, None), ("AIMessage", "ai-0", "", None, None)]
    for i, (_, args) in enumerate(calls[:-1]):
        msgs.append(("ToolMessage", None, f"wrote {len(args['content'])} characters to {args['path']}",
                     tool_call_id(0, i), "success"))
    waiting = tool_call_id(0, count - 1)
    msgs.append(("ToolMessage", cancel_message_id("ai-0", waiting), CANCEL_CONTENT, waiting, "error"))
    return {"messages": msgs, "files_written": [f"f{i}.txt" for i in range(count - 1)], "next": (),
            "tasks": 0, "interrupts": 0}


def test_the_checkpoint_only_graph_has_the_agents_topology_and_runs_nothing(saver, workdir):
    real = build_agent(SNAP, model=ScriptedChatModel(), workdir=workdir, checkpointer=saver)
    assert node_names(checkpoint_graph(snapshot(approval_mode="AlwaysTrust", tools=[]), saver)) == node_names(real)
    stand_in = checkpoint_graph(snapshot(model_retries=0), saver)
    assert node_names(stand_in) == node_names(real)
    assert set(stand_in.channels) == set(real.channels)
    assert {n: sorted(map(str, real.builder.branches.get(n, {}))) for n in real.nodes} == \
        {n: sorted(map(str, stand_in.builder.branches.get(n, {}))) for n in stand_in.nodes}
    with pytest.raises(CheckpointOnlyError):
        say(stand_in, "hi", thread("other"))


def test_a_waiting_run_with_two_completed_calls_is_cleaned(saver, workdir):
    (workdir / "seed.txt").write_text("seed")
    calls = [("write_file", {"path": "a.txt", "content": "A"}), ("read_file", {"path": "seed.txt"}),
             ("run_shell", {"command": "echo never"})]
    graph, model = waiting_run(saver, workdir, calls)
    [pending] = waitpoint_from_state(graph.get_state(CFG)).calls
    assert pending.tool_call_id == tool_call_id(0, 2)

    report = cleanup_thread(checkpoint_graph(SNAP, saver), CFG)

    assert report.committed == list(STEPS) and report.commits == 3
    assert report.cancelled_calls == report.closed_calls == [tool_call_id(0, 2)]
    state = graph.get_state(CFG)
    assert state.next == () and state.tasks == () and state.interrupts == ()
    msgs = state.values["messages"]
    results = [m for m in msgs if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == [tool_call_id(0, i) for i in range(3)]  # each exactly once
    by_call = tool_results(msgs)
    assert by_call[tool_call_id(0, 0)].content == "wrote 1 characters to a.txt"
    assert by_call[tool_call_id(0, 1)].content == "seed"
    cancel = by_call[tool_call_id(0, 2)]
    assert (cancel.id, cancel.status, cancel.content) == (
        cancel_message_id("ai-0", tool_call_id(0, 2)), "error", CANCEL_CONTENT)
    assert state.values["files_written"] == ["a.txt"]  # business state merged exactly once

    # The thread continues: a follow-up turn sends a history a strict provider accepts.
    out = say(graph, "what happened?", CFG)
    assert out["messages"][-1].content == "next turn answer"
    assert model.model_calls == 2
    assert isinstance(model.calls[-1][-1], HumanMessage)


@pytest.mark.parametrize("count", [1, 2, 8, 64])
@pytest.mark.parametrize("crash, failed_step, retry_commits", [
    (("after_put", 1), STEP_MERGE, [STEP_CANCEL_RESULTS, STEP_CLEAR]),
    (("before_put", 2), STEP_CANCEL_RESULTS, [STEP_CANCEL_RESULTS, STEP_CLEAR]),
    (("after_put", 2), STEP_CANCEL_RESULTS, [STEP_CLEAR]),
    (("after_put", 3), STEP_CLEAR, []),
], ids=["after-commit-1", "inside-step-2", "after-commit-2", "after-commit-3"])
def test_a_crash_at_any_point_is_finished_by_a_fresh_retry(pg_dsn, workdir, count, crash, failed_step,
                                                           retry_commits):
    with checkpoints.saver(pg_dsn) as saver:
        waiting_run(saver, workdir, parallel_calls(count))

    with checkpoints.connect(pg_dsn) as conn:
        crashing = CrashingSaver(conn, crash)
        with pytest.raises(CleanupError) as failure:
            cleanup_thread(checkpoint_graph(SNAP, crashing), CFG)
        assert failure.value.step == failed_step
        assert isinstance(failure.value.__cause__, Crash)
        if crash[0] == "before_put":
            # Step 2's writes are stored on the merged checkpoint; its own checkpoint is not.
            stored = [v for _, channel, v in crashing.get_tuple(CFG).pending_writes if channel == "messages"]
            assert [m.id for m in stored[0]] == [cancel_message_id("ai-0", tool_call_id(0, count - 1))]

    with checkpoints.connect(pg_dsn) as conn:  # a new operator process
        fresh = CrashingSaver(conn)
        report = cleanup_thread(checkpoint_graph(SNAP, fresh), CFG)
        assert report.committed == retry_commits
        assert fresh.puts == len(retry_commits)
        assert end_state(saver=fresh) == expected_end_state(count)
        # The closed calls are read from the clean checkpoint: the retry knows them even when
        # the crashed call committed them (what the transcript records does not depend on who did).
        assert report.closed_calls == [tool_call_id(0, count - 1)]

        again = cleanup_thread(checkpoint_graph(SNAP, fresh), CFG)
        assert again.committed == [] and fresh.puts == len(retry_commits)
        assert again.closed_calls == [tool_call_id(0, count - 1)]


def test_cleanup_of_a_clean_thread_commits_nothing(saver, workdir):
    model = ScriptedChatModel(script=[[("list_files", {})], "done"])
    graph = build_agent(SNAP, model=model, workdir=workdir, checkpointer=saver)
    say(graph, "hi", CFG)
    before = saver.get_tuple(CFG).checkpoint["id"]
    report = cleanup_thread(checkpoint_graph(SNAP, saver), CFG)
    assert report.committed == [] and report.skipped == list(STEPS)
    assert saver.get_tuple(CFG).checkpoint["id"] == before
    assert cleanup_thread(checkpoint_graph(SNAP, saver), thread("never-used")).commits == 0


def test_a_waiting_question_is_cancelled_like_an_approval(saver, workdir):
    calls = [("ask_user", {"questions": [{"question": "Proceed?", "options": ["yes", "no"]}]}),
             ("write_file", {"path": "b.txt", "content": "B"})]
    graph, _ = waiting_run(saver, workdir, calls)
    report = cleanup_thread(checkpoint_graph(SNAP, saver), CFG)
    assert report.cancelled_calls == [tool_call_id(0, 0)]
    state = graph.get_state(CFG)
    assert state.values["files_written"] == ["b.txt"] and state.next == ()


def test_step_2_before_step_1_loses_a_completed_result(saver, workdir):
    """Why the order is fixed: adding the missing results first commits a new checkpoint
    built from the committed channels; the completed tasks' results were only pending
    writes of the old checkpoint, and are gone."""
    calls = [("write_file", {"path": "a.txt", "content": "A"}), ("run_shell", {"command": "echo never"})]
    waiting_run(saver, workdir, calls)
    graph = checkpoint_graph(SNAP, saver)

    # The live view shows the completed result, so only the waiting call looks unanswered...
    ai, missing = missing_results(graph.get_state(CFG).values["messages"])
    assert [c["id"] for c in missing] == [tool_call_id(0, 1)]
    graph.update_state(CFG, {"messages": [
        ToolMessage(CANCEL_CONTENT, status="error", tool_call_id=c["id"], name=c["name"],
                    id=cancel_message_id(ai.id, c["id"])) for c in missing]}, as_node=AgentNodes.TOOLS)
    # ...but the new checkpoint does not carry it: the parallel tasks are gone with their writes,
    # and the completed call now looks unanswered.
    state = graph.get_state(CFG)
    assert tool_call_id(0, 0) not in tool_results(state.values["messages"])
    assert [t.name for t in state.tasks] == [AgentNodes.LOOP_ENTRY]
    assert [c["id"] for c in missing_results(state.values["messages"])[1]] == [tool_call_id(0, 0)]

    cleanup_thread(graph, CFG)
    state = graph.get_state(CFG)
    lost = tool_results(state.values["messages"])[tool_call_id(0, 0)]
    assert lost.content == CANCEL_CONTENT  # the write ran (the file exists) but its result is lost
    assert (workdir / "a.txt").exists() and state.values["files_written"] == []


def test_the_model_round_a_tools_update_triggers_is_the_loop_entry(saver, workdir):
    waiting_run(saver, workdir, parallel_calls(1))
    graph = checkpoint_graph(SNAP, saver)
    graph.update_state(CFG, None, as_node="__end__")
    _, missing = missing_results(graph.get_state(CFG).values["messages"])
    graph.update_state(CFG, {"messages": [ToolMessage("x", tool_call_id=missing[0]["id"])]}, as_node=AgentNodes.TOOLS)
    assert [t.name for t in graph.get_state(CFG).tasks] == [AgentNodes.LOOP_ENTRY]


def test_a_failing_step_is_named(pg_dsn, workdir):
    with checkpoints.saver(pg_dsn) as saver:
        waiting_run(saver, workdir, parallel_calls(2))
    with checkpoints.connect(pg_dsn) as conn, pytest.raises(CleanupError) as failure:
        cleanup_thread(checkpoint_graph(SNAP, CrashingSaver(conn, ("before_put", 1))), CFG)
    assert failure.value.step == STEP_MERGE and "killed before checkpoint 1" in str(failure.value)


def test_missing_results_reads_only_results_after_the_current_ai_message():
    old = AIMessage(content="", id="ai-0", tool_calls=[{"name": "t", "args": {}, "id": "same"}])
    new = AIMessage(content="", id="ai-1", tool_calls=[{"name": "t", "args": {}, "id": "same"},
                                                        {"name": "t", "args": {}, "id": "other"}])
    history = [HumanMessage("x"), old, ToolMessage("r", tool_call_id="same"), new, ToolMessage("r2", tool_call_id="other")]
    ai, missing = missing_results(history)
    assert ai is new and [c["id"] for c in missing] == ["same"]


async def test_the_async_path_waits_per_call_and_cleans_the_same_way(pg_dsn, workdir):
    calls = [("write_file", {"path": "a.txt", "content": "A"}), ("run_shell", {"command": "echo never"}),
             ("ask_user", {"questions": [{"question": "Sure?"}]})]
    model = ScriptedChatModel(script=[calls, "after cancel"])
    async with checkpoints.async_saver(pg_dsn) as saver:
        graph = build_agent(SNAP, model=model, workdir=workdir, checkpointer=saver)
        out = await graph.ainvoke({"messages": [HumanMessage("go")]}, CFG, durability="sync")
        assert len(out["__interrupt__"]) == 2
        assert (workdir / "a.txt").exists()

        report = await acleanup_thread(checkpoint_graph(SNAP, saver), CFG)
        assert report.committed == list(STEPS)
        assert report.cancelled_calls == [tool_call_id(0, 1), tool_call_id(0, 2)]
        state = await graph.aget_state(CFG)
        assert state.values["files_written"] == ["a.txt"] and state.next == ()

        out = await graph.ainvoke({"messages": [HumanMessage("and now?")]}, CFG, durability="sync")
        assert out["messages"][-1].content == "after cancel"

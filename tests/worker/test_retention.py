"""Checkpoint retention runs: each segment prunes its thread to ``checkpointRetention`` (1 in
these tests: ``tests/worker/conftest.py``) and the turn goes on from the pruned thread."""

from __future__ import annotations

from sessionops.platform import checkpoints
from tests.worker.harness import Stack


def rows(stack: Stack, session: str) -> dict[str, int]:
    uid = stack.get("agentsessions", session)["metadata"]["uid"]
    with checkpoints.connect(stack.dsn) as conn:
        return {table: conn.execute(f"SELECT count(*) AS n FROM {table} WHERE thread_id = %s",  # noqa: S608
                                    (uid,)).fetchone()["n"]
                for table in ("checkpoints", "checkpoint_writes")}


def test_each_segment_prunes_its_thread_and_a_waiting_turn_resumes_from_the_pruned_thread(stack: Stack) -> None:
    stack.session("s1", stack.snapshot("parallel-approval"))
    stack.message("s1-i1", "s1", "Write the script and run it.")
    stack.turn("s1-t1", "s1", ["s1-i1"])
    run, execution = stack.segment("s1-t1")
    assert run["status"]["phase"] == "Waiting"
    assert "pruned" in execution.log_path.read_text()
    # One checkpoint left: the waiting one, with its pending writes (the sibling's result, the interrupt).
    kept = rows(stack, "s1")
    assert kept["checkpoints"] == 1 and kept["checkpoint_writes"] > 0

    call = run["status"]["waitpoint"]["calls"][0]
    stack.resume("s1-i2", "s1-t1", decisions=[{"callId": call["callId"], "decision": "Approve"}])
    run, _ = stack.segment("s1-t1")
    assert run["status"]["phase"] == "Succeeded"
    assert run["status"]["result"]["text"] == "Wrote hello.sh and ran it."
    assert rows(stack, "s1")["checkpoints"] == 1
    messages = stack.thread("s1").values["messages"]
    assert [type(m).__name__ for m in messages] == [
        "HumanMessage", "AIMessage", "ToolMessage", "ToolMessage", "AIMessage"]

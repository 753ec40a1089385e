"""The worker end to end: real subprocesses (pod runner), the test cluster, PostgreSQL and
the replay model over HTTP. The test plays admission and the operator (``Stack``)."""

from __future__ import annotations

from tests.cluster.authz import Policy
from tests.worker.harness import Stack


def test_follow_up_answered_with_tools_succeeds_with_result_and_usage(stack: Stack) -> None:
    stack.session("s1", stack.snapshot("tools-then-answer"))
    (stack.workdir("s1") / "README.md").write_text("# demo\nA small project.\n")
    stack.message("s1-i1", "s1", "What is in this project?")
    stack.turn("s1-t1", "s1", ["s1-i1"])

    run, execution = stack.segment("s1-t1")

    assert execution.exit_code == 0
    assert run["status"]["phase"] == "Succeeded"
    assert run["status"]["result"] == {
        "text": "I listed the work directory and read README.md: it describes the project in a few lines.",
        "segment": "s1-t1-1"}
    assert run["status"]["usage"]["inputTokens"] > 0 and run["status"]["usage"]["outputTokens"] > 0
    assert run["status"]["segments"][-1]["outcome"] == "Succeeded"
    requests = stack.requests("tools-then-answer")
    assert len(requests) == 3
    assert any("A small project." in str(m.get("content")) for m in requests[-1]["messages"])
    assert not (stack.lease("s1") or {}).get("spec", {}).get("holderIdentity")


def _tool_messages(request: dict) -> dict[str, str]:
    """tool_call_id -> content of the tool results in a recorded model request."""
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m.get("role") == "tool"}


def _approval_turn(stack: Stack) -> dict:
    stack.session("s1", stack.snapshot("parallel-approval"))
    stack.message("s1-i1", "s1", "Write the script and run it.")
    stack.turn("s1-t1", "s1", ["s1-i1"])
    run, _ = stack.segment("s1-t1")
    return run


def test_parallel_calls_wait_for_approval_with_the_sibling_result_persisted(stack: Stack) -> None:
    run = _approval_turn(stack)

    assert run["status"]["phase"] == "Waiting"
    waitpoint = run["status"]["waitpoint"]
    assert waitpoint["kind"] == "Approval"
    assert [(c["tool"], c["toolCallId"]) for c in waitpoint["calls"]] == [
        ("run_shell", "call_parallel-approval_0_1")]
    assert waitpoint["calls"][0]["args"] == {"command": "sh hello.sh", "timeout_seconds": 30}
    assert (stack.workdir("s1") / "hello.sh").exists()
    state = stack.thread("s1")
    done = [t for t in state.tasks if t.result is not None]
    waiting = [t for t in state.tasks if t.interrupts]
    assert len(done) == 1 and "wrote" in str(done[0].result)
    assert len(waiting) == 1
    assert len(stack.requests("parallel-approval")) == 1


def test_approved_call_runs_exactly_as_requested_without_a_new_model_call(stack: Stack) -> None:
    run = _approval_turn(stack)
    call = run["status"]["waitpoint"]["calls"][0]
    stack.resume("s1-i2", "s1-t1", decisions=[{"callId": call["callId"], "decision": "Approve"}])

    run, execution = stack.segment("s1-t1")

    assert execution.exit_code == 0
    assert run["status"]["phase"] == "Succeeded"
    assert run["status"]["result"] == {"text": "Wrote hello.sh and ran it.", "segment": "s1-t1-2"}
    requests = stack.requests("parallel-approval")
    assert len(requests) == 2  # the waiting call was not asked for again: only the final answer
    results = _tool_messages(requests[-1])
    assert "hello from sessionops" in results["call_parallel-approval_0_1"]
    assert results["call_parallel-approval_0_0"].startswith("wrote")
    assert sum(m.get("role") == "tool" for m in requests[-1]["messages"]) == 2
    assert stack.get("agentinputs", "s1-i2")["status"] == {"phase": "Consumed", "run": "s1-t1"}
    assert "waitpoint" not in run["status"]


def test_rejected_call_returns_an_error_result_to_the_model(stack: Stack) -> None:
    run = _approval_turn(stack)
    call = run["status"]["waitpoint"]["calls"][0]
    stack.resume("s1-i2", "s1-t1", decisions=[{"callId": call["callId"], "decision": "Reject",
                                              "message": "not on a Friday"}])

    run, _ = stack.segment("s1-t1")

    assert run["status"]["phase"] == "Succeeded"
    results = _tool_messages(stack.requests("parallel-approval")[-1])
    assert results["call_parallel-approval_0_1"] == "rejected by the user: not on a Friday"


def test_question_waitpoint_is_answered_by_a_resume(stack: Stack) -> None:
    stack.session("s1", stack.snapshot("ask-user"))
    stack.message("s1-i1", "s1", "Set up an example project.")
    stack.turn("s1-t1", "s1", ["s1-i1"])
    run, _ = stack.segment("s1-t1")
    assert run["status"]["phase"] == "Waiting"
    waitpoint = run["status"]["waitpoint"]
    assert waitpoint["kind"] == "Question"
    assert [q["question"] for q in waitpoint["questions"]] == [
        "Which language should the example use?", "Which checks should run?"]
    assert waitpoint["questions"][1]["multiSelect"] is True

    stack.resume("s1-i2", "s1-t1", answers=["Go", ["lint", "unit tests"]])
    run, _ = stack.segment("s1-t1")

    assert run["status"]["phase"] == "Succeeded"
    assert run["status"]["result"]["text"] == "Thanks, I will use your choices for the example."
    answer = next(iter(_tool_messages(stack.requests("ask-user")[-1]).values()))
    assert '"answer": "Go"' in answer and '"answer": ["lint", "unit tests"]' in answer


def _revoke_agent(stack: Stack) -> Policy:
    """alice may use everything except the Agent itself."""
    policy = Policy()
    policy.deny(user="alice", verbs=["get"], resources=["agents"], api_groups=["sessionops.dev"], names=["helper"])
    policy.allow(user="*")
    stack.cluster.authz_policy = policy
    return policy


def test_revoked_agent_access_fails_the_run_before_any_model_call(stack: Stack) -> None:
    stack.session("s1", stack.snapshot("tools-then-answer"))
    stack.message("s1-i1", "s1", "Hello?")
    stack.turn("s1-t1", "s1", ["s1-i1"])
    policy = _revoke_agent(stack)

    run, execution = stack.segment("s1-t1")

    assert execution.exit_code == 0
    assert run["status"]["phase"] == "Failed"
    [condition] = run["status"]["conditions"]
    assert (condition["type"], condition["reason"]) == ("Failed", "AccessRevoked")
    assert "'helper'" in condition["message"] and "alice" in condition["message"]
    assert stack.requests() == []
    assert policy.record[0]["user"] == "alice"


def test_resume_after_revocation_fails_without_running_the_approved_call(stack: Stack) -> None:
    run = _approval_turn(stack)
    call = run["status"]["waitpoint"]["calls"][0]
    stack.resume("s1-i2", "s1-t1", decisions=[{"callId": call["callId"], "decision": "Approve"}])
    _revoke_agent(stack)

    run, _ = stack.segment("s1-t1")

    assert run["status"]["phase"] == "Failed"
    assert run["status"]["conditions"][0]["reason"] == "AccessRevoked"
    assert len(stack.requests("parallel-approval")) == 1
    state = stack.thread("s1")
    assert [t.name for t in state.tasks if t.interrupts] == ["tools"]  # still waiting: never executed
    tool_ids = [m.tool_call_id for m in state.values["messages"] if m.type == "tool"]
    assert "call_parallel-approval_0_1" not in tool_ids


def test_revoked_tool_is_hidden_from_the_model_and_refused_at_the_call(stack: Stack) -> None:
    policy = Policy()
    policy.deny(user="*", verbs=["use"], resources=["tools"], api_groups=["sessionops.dev"], names=["read_file"])
    policy.allow(user="*")
    stack.cluster.authz_policy = policy
    stack.session("s1", stack.snapshot("tools-then-answer"))
    stack.message("s1-i1", "s1", "What is in this project?")
    stack.turn("s1-t1", "s1", ["s1-i1"])

    run, _ = stack.segment("s1-t1")

    assert run["status"]["phase"] == "Succeeded"
    requests = stack.requests("tools-then-answer")
    assert all("read_file" not in r["tools"] for r in requests) and "list_files" in requests[0]["tools"]
    refused = _tool_messages(requests[-1])["call_tools-then-answer_1_0"]
    assert "not available" in refused

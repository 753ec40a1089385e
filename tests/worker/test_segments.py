"""The worker end to end: real subprocesses (pod runner), the test cluster, PostgreSQL and
the replay model over HTTP. The test plays admission and the operator (``Stack``)."""

from __future__ import annotations

import collections
import datetime
import signal

from sessionops.cancellation import pairing_errors
from tests.worker.harness import NS, Stack, wait_for


def failed_condition(run: dict) -> dict:
    """The run's true Failed condition (the other phase conditions are False beside it)."""
    [condition] = [c for c in run["status"]["conditions"] if c["type"] == "Failed" and c["status"] == "True"]
    return condition

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


def test_parallel_calls_wait_for_approval_then_the_approved_call_runs_without_a_new_model_call(
        stack: Stack) -> None:
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
    assert len(done) == 1 and "wrote" in str(done[0].result)  # the sibling's result is persisted
    assert len([t for t in state.tasks if t.interrupts]) == 1
    assert len(stack.requests("parallel-approval")) == 1

    call = waitpoint["calls"][0]
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
    steps = stack.transcript("s1-t1")
    assert [(s["kind"], s.get("tool"), s["segment"]) for s in steps] == [
        ("UserMessage", None, "s1-t1-1"), ("AssistantMessage", None, "s1-t1-1"),
        ("ToolCall", "write_file", "s1-t1-1"), ("ToolCall", "run_shell", "s1-t1-1"),
        ("ToolResult", "write_file", "s1-t1-1"), ("Wait", None, "s1-t1-1"),
        ("Decision", "run_shell", "s1-t1-2"), ("ToolResult", "run_shell", "s1-t1-2"), ("FinalAnswer", None, "s1-t1-2")]
    assert steps[6]["decidedBy"] == "alice" and steps[6]["status"] == "Approve"
    assert "hello from sessionops" in steps[7]["text"]
    assert steps[-1]["text"] == "Wrote hello.sh and ran it." and steps[-1]["usage"]["outputTokens"] > 0


def test_rejected_call_returns_an_error_result_to_the_model(stack: Stack) -> None:
    run = _approval_turn(stack)
    call = run["status"]["waitpoint"]["calls"][0]
    stack.resume("s1-i2", "s1-t1", decisions=[{"callId": call["callId"], "decision": "Reject",
                                              "message": "not on a Friday"}])

    run, _ = stack.segment("s1-t1")

    assert run["status"]["phase"] == "Succeeded"
    results = _tool_messages(stack.requests("parallel-approval")[-1])
    assert results["call_parallel-approval_0_1"] == "rejected by the user: not on a Friday"
    by_id = {s["id"]: s for s in stack.transcript("s1-t1")}
    decision = by_id["decision:call_parallel-approval_0_1"]
    assert (decision["status"], decision["text"], decision["decidedBy"]) == ("Reject", "not on a Friday", "alice")
    assert by_id["result:call_parallel-approval_0_1"]["status"] == "error"


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
    steps = stack.transcript("s1-t1")
    assert [s["kind"] for s in steps] == ["UserMessage", "AssistantMessage", "Question", "Wait", "Answer", "Answer",
                                          "ToolResult", "FinalAnswer"]
    assert [s["text"] for s in steps if s["kind"] == "Answer"] == [
        "Which language should the example use? -> Go", "Which checks should run? -> lint, unit tests"]


USE_EVERYTHING = {"apiGroups": ["sessionops.dev"], "resources": ["tools", "skills", "mcpservers"], "verbs": ["use"]}
TOOLS = ["read_file", "write_file", "list_files", "run_shell", "ask_user", "load_skill", "delegate"]


def _revoke_agent(stack: Stack) -> None:
    """alice may use every tool, skill and MCP server, but no longer the Agent itself."""
    stack.restrict_alice([USE_EVERYTHING])


def test_revoked_agent_access_fails_the_run_before_any_model_call(stack: Stack) -> None:
    stack.session("s1", stack.snapshot("tools-then-answer"))
    stack.message("s1-i1", "s1", "Hello?")
    stack.turn("s1-t1", "s1", ["s1-i1"])
    _revoke_agent(stack)

    run, execution = stack.segment("s1-t1")

    assert execution.exit_code == 0
    assert run["status"]["phase"] == "Failed"
    condition = failed_condition(run)
    assert (condition["type"], condition["reason"]) == ("Failed", "AccessRevoked")
    assert "'helper'" in condition["message"] and "alice" in condition["message"]
    assert stack.requests() == []
    [review] = [r for r in stack.cluster.access_reviews if r["resource"] == "agents"]
    assert review["user"] == "alice" and not review["allowed"]


def test_resume_after_revocation_fails_without_running_the_call_and_the_next_turn_closes_it(
        stack: Stack) -> None:
    run = _approval_turn(stack)
    call = run["status"]["waitpoint"]["calls"][0]
    stack.resume("s1-i2", "s1-t1", decisions=[{"callId": call["callId"], "decision": "Approve"}])
    _revoke_agent(stack)

    run, _ = stack.segment("s1-t1")

    assert run["status"]["phase"] == "Failed"
    assert failed_condition(run)["reason"] == "AccessRevoked"
    assert len(stack.requests("parallel-approval")) == 1
    state = stack.thread("s1")
    assert [t.name for t in state.tasks if t.interrupts] == ["tools"]  # still waiting: never executed
    assert "call_parallel-approval_0_1" not in [m.tool_call_id for m in state.values["messages"] if m.type == "tool"]

    # Access is back: the next turn first pairs the failed turn's open call with an error result.
    stack.restore_alice()
    stack.message("s1-i3", "s1", "Try something else.")
    stack.turn("s1-t2", "s1", ["s1-i3"])
    run, _ = stack.segment("s1-t2")

    assert run["status"]["phase"] == "Succeeded"
    last = stack.requests("parallel-approval")[-1]
    assert last["status"] == 200  # the replay model accepts only histories with every call answered once
    assert _tool_messages(last)["call_parallel-approval_0_1"] == "cancelled by the user"
    assert pairing_errors(stack.thread("s1").values["messages"]) == []


def test_revoked_tool_is_hidden_from_the_model_and_refused_at_the_call(stack: Stack) -> None:
    stack.restrict_alice([
        {"apiGroups": ["sessionops.dev"], "resources": ["agents"], "verbs": ["get"]},
        {"apiGroups": ["sessionops.dev"], "resources": ["tools"], "verbs": ["use"],
         "resourceNames": [t for t in TOOLS if t != "read_file"]},
        {"apiGroups": ["sessionops.dev"], "resources": ["skills", "mcpservers"], "verbs": ["use"]}])
    stack.session("s1", stack.snapshot("tools-then-answer"))
    stack.message("s1-i1", "s1", "What is in this project?")
    stack.turn("s1-t1", "s1", ["s1-i1"])

    run, _ = stack.segment("s1-t1")

    assert run["status"]["phase"] == "Succeeded"
    requests = stack.requests("tools-then-answer")
    assert all("read_file" not in r["tools"] for r in requests) and "list_files" in requests[0]["tools"]
    refused = _tool_messages(requests[-1])["call_tools-then-answer_1_0"]
    assert "not available" in refused
    # Three model calls and two tool calls, one review per check: the Agent and each tool, once.
    reviews = collections.Counter((r["user"], r["verb"], r["resource"], r["name"])
                                  for r in stack.cluster.access_reviews)
    assert reviews == collections.Counter([("alice", "get", "agents", "helper"),
                                           *(("alice", "use", "tools", t) for t in TOOLS)])


def test_killed_worker_is_retried_from_the_checkpoint_without_repeating_completed_calls(stack: Stack) -> None:
    stack.session("s1", stack.snapshot("crash-then-retry", approval="AlwaysTrust"))
    stack.message("s1-i1", "s1", "Write notes and run the command.")
    stack.turn("s1-t1", "s1", ["s1-i1"])
    stack.reconcile("s1-t1")
    wait_for("write_file's result in the checkpoint while run_shell hangs",
             lambda: (stack.workdir("s1") / ".attempt").exists()
             and any(t.result is not None for t in stack.thread("s1").tasks))
    wait_for("the worker to publish its tool calls", lambda: len(stack.transcript("s1-t1")) >= 4)

    stack.runner.kill("s1-t1-1", signal.SIGKILL)
    killed = stack.runner.wait_execution("s1-t1-1")
    wait_for("the Job to fail", lambda: stack.job_finished("s1-t1-1"))
    assert killed.exit_code == 137
    assert stack.job("s1-t1-1")["status"]["failed"] == 1
    run, retry = stack.segment("s1-t1")

    assert [(s["kind"], s["outcome"]) for s in run["status"]["segments"]] == [
        ("Start", "Lost"), ("Retry", "Succeeded")]
    assert run["status"]["phase"] == "Succeeded"
    assert run["status"]["result"]["segment"] == "s1-t1-2"
    # The dead worker's Lease was taken over at once (its pod has ended), not waited out (30 s).
    log = retry.output()
    assert "has ended; taking over" in log and "held by another worker: waiting" not in log, log
    state = stack.thread("s1")
    assert state.values["files_written"] == ["notes.txt"]
    assert pairing_errors(state.values["messages"]) == []
    results = _tool_messages(stack.requests("crash-then-retry")[-1])
    assert results["call_crash-then-retry_0_1"].startswith("exit code 0\nsecond attempt")
    assert len(stack.requests("crash-then-retry")) == 2
    # The transcript lists each step once: published by the killed worker or by its retry.
    steps = stack.transcript("s1-t1")
    ids = [s["id"] for s in steps]
    assert len(ids) == len(set(ids))
    assert [s["kind"] for s in steps] == ["UserMessage", "AssistantMessage", "ToolCall", "ToolCall",
                                          "ToolResult", "ToolResult", "FinalAnswer"]
    assert steps[3]["segment"] == "s1-t1-1" and steps[-1]["segment"] == "s1-t1-2"


def test_steer_is_delivered_into_the_running_turn_exactly_once(stack: Stack) -> None:
    stack.session("s1", stack.snapshot("wait-for-go", approval="AlwaysTrust"))
    stack.message("s1-i1", "s1", "Write the report.")
    stack.turn("s1-t1", "s1", ["s1-i1"])
    stack.reconcile("s1-t1")
    wait_for("the first model call", lambda: stack.requests("wait-for-go"))
    steer = stack.message("s1-i2", "s1", "Focus on the summary.", delivery="Steer")
    (stack.workdir("s1") / "go").touch()
    stack.runner.wait_execution("s1-t1-1")
    stack.reconcile("s1-t1")

    run = stack.get("agentruns", "s1-t1")
    assert run["status"]["phase"] == "Succeeded"
    assert run["status"]["steered"] == ["s1-i2"]
    assert stack.get("agentinputs", "s1-i2")["status"] == {"phase": "Consumed", "run": "s1-t1"}
    first, second = stack.requests("wait-for-go")
    assert "Focus on the summary." not in str(first["messages"])
    roles = [(m["role"], m.get("content")) for m in second["messages"]]
    assert roles.count(("user", "Focus on the summary.")) == 1
    assert [r for r, _ in roles][-2:] == ["tool", "user"]  # after the call's result, before the answer
    ids = [m.id for m in stack.thread("s1").values["messages"]]
    assert ids.count(f"steer:{steer['metadata']['uid']}") == 1
    kinds = [s["kind"] for s in stack.transcript("s1-t1")]
    assert kinds.count("Steer") == 1 and kinds[-2:] == ["Steer", "FinalAnswer"]


def test_a_second_worker_of_the_session_waits_for_the_lease(stack: Stack) -> None:
    stack.session("s1", stack.snapshot("wait-for-go", approval="AlwaysTrust"))
    stack.message("s1-i1", "s1", "First turn.")
    stack.turn("s1-t1", "s1", ["s1-i1"])
    stack.reconcile("s1-t1")
    wait_for("the first worker's model call", lambda: stack.requests("wait-for-go"))
    first = stack.runner.executions_of("s1-t1-1")[0]
    stack.message("s1-i2", "s1", "Second turn.")
    stack.turn("s1-t2", "s1", ["s1-i2"])
    stack.reconcile("s1-t2")
    second = stack.runner.wait_execution("s1-t2-1", finished=False)
    wait_for("the second worker to wait", lambda: "is held by another worker" in second.output())
    assert stack.lease("s1")["spec"]["holderIdentity"] == f"pod:{first.pod}"
    assert len(stack.requests("wait-for-go")) == 1

    (stack.workdir("s1") / "go").touch()
    stack.runner.wait_execution("s1-t2-1")

    assert stack.runner.wait_execution("s1-t1-1").finished <= second.finished
    for run in ("s1-t1", "s1-t2"):
        stack.reconcile(run)
        assert stack.get("agentruns", run)["status"]["phase"] == "Succeeded"
    assert stack.get("agentruns", "s1-t2")["status"]["result"]["text"] == "Nothing more to do."
    lease = stack.lease("s1")["spec"]
    assert not lease.get("holderIdentity") and lease["leaseTransitions"] == 1


def test_a_worker_gives_up_on_a_lease_held_by_a_live_writer(stack: Stack) -> None:
    # The shortest Lease the operator configures: its worker waits twice that for a live holder.
    stack.config = stack.config.model_copy(update={"worker": stack.config.worker.model_copy(
        update={"lease_duration_seconds": 5})})
    stack.session("s1", stack.snapshot("hello"))
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    stack.kube.create_lease(NS, {"metadata": {"name": "sessionops-s1"}, "spec": {
        "holderIdentity": "host:elsewhere:1", "leaseDurationSeconds": 30, "renewTime": now}})
    stack.message("s1-i1", "s1", "Hello?")
    stack.turn("s1-t1", "s1", ["s1-i1"])

    run, execution = stack.segment("s1-t1")

    assert execution.exit_code == 3
    assert run["status"]["segments"][0]["outcome"] == "Lost"
    assert stack.requests() == []
    assert stack.lease("s1")["spec"]["holderIdentity"] == "host:elsewhere:1"


def test_a_cancel_is_never_overwritten_by_the_worker(stack: Stack) -> None:
    stack.session("s1", stack.snapshot("wait-for-go", approval="AlwaysTrust"))
    stack.message("s1-i1", "s1", "Work.")
    stack.turn("s1-t1", "s1", ["s1-i1"])
    stack.reconcile("s1-t1")
    wait_for("the first model call", lambda: stack.requests("wait-for-go"))
    stack.patch("agentruns", "s1-t1", {"spec": {"cancel": True}})
    stack.patch_status("agentruns", "s1-t1", {"phase": "Cancelling"})
    (stack.workdir("s1") / "go").touch()

    execution = stack.runner.wait_execution("s1-t1-1")

    assert execution.exit_code == 0
    status = stack.get("agentruns", "s1-t1")["status"]
    assert status["phase"] == "Cancelling" and "result" not in status
    assert "not reporting Succeeded" in execution.output()


def test_deleting_the_job_stops_the_worker_and_releases_the_lease(stack: Stack) -> None:
    stack.session("s1", stack.snapshot("wait-for-go", approval="AlwaysTrust"))
    stack.message("s1-i1", "s1", "Work.")
    stack.turn("s1-t1", "s1", ["s1-i1"])
    stack.reconcile("s1-t1")
    wait_for("the first model call", lambda: stack.requests("wait-for-go"))

    stack.kube.request("DELETE", f"/apis/batch/v1/namespaces/{NS}/jobs/s1-t1-1",
                       body={"propagationPolicy": "Foreground"})
    execution = stack.runner.wait_execution("s1-t1-1")

    assert execution.exit_code == 143 and execution.signals == [signal.SIGTERM]
    assert not stack.lease("s1")["spec"].get("holderIdentity")
    wait_for("the Job and its pod to be gone", lambda: stack.job("s1-t1-1") is None)
    assert stack.get("agentruns", "s1-t1")["status"]["phase"] == "Running"


def test_step_limit_fails_the_turn(stack: Stack) -> None:
    stack.session("s1", stack.snapshot("tools-then-answer", max_execution_steps=1))
    stack.message("s1-i1", "s1", "Look around.")
    stack.turn("s1-t1", "s1", ["s1-i1"])

    run, _ = stack.segment("s1-t1")

    assert run["status"]["phase"] == "Failed"
    assert failed_condition(run)["reason"] == "StepLimit"
    assert len(stack.requests("tools-then-answer")) == 1


def test_a_failing_model_fails_the_turn_with_model_error(stack: Stack) -> None:
    snapshot = stack.snapshot("hello", model_retries=0)
    snapshot["model"] = "replay/missing"
    stack.session("s1", snapshot)
    stack.message("s1-i1", "s1", "Hello?")
    stack.turn("s1-t1", "s1", ["s1-i1"])

    run, execution = stack.segment("s1-t1")

    assert execution.exit_code == 0
    assert run["status"]["phase"] == "Failed"
    condition = failed_condition(run)
    assert condition["reason"] == "ModelError" and "no-such-scenario" in condition["message"]
    assert [r["status"] for r in stack.requests()] == [404]

"""Rendering a transcript (pure): one line per step, cancelled calls as the cancellation stored them."""

from __future__ import annotations

from sessionops.cli.transcript import line

CALL = {"id": "call:c1", "kind": "ToolCall", "tool": "run_shell", "toolCallId": "c1",
        "args": {"command": "sh hello.sh"}, "at": "2026-12-03T11:00:01.250Z", "segment": "r-1"}


def test_a_step_line_names_time_segment_and_what_happened() -> None:
    assert line(CALL) == '11:00:01 [r-1] call run_shell command="sh hello.sh"'
    decision = {"id": "decision:c1", "kind": "Decision", "tool": "run_shell", "status": "Reject",
                "decidedBy": "bob", "text": "not today", "at": "2026-12-03T11:00:02.000Z", "segment": "r-2"}
    assert line(decision) == "11:00:02 [r-2] rejected run_shell by bob: not today"
    result = {"id": "result:c1", "kind": "ToolResult", "tool": "run_shell", "status": "success",
              "text": "x" * 300 + "\nmore", "at": "2026-12-03T11:00:03.000Z", "segment": "r-2"}
    assert line(result) == "11:00:03 [r-2] result run_shell (success): " + "x" * 200 + "..."
    final = {"id": "assistant:a", "kind": "FinalAnswer", "text": "done", "usage": {"inputTokens": 5,
             "outputTokens": 2}, "at": "2026-12-03T11:00:04.000Z", "segment": "r-2"}
    assert line(final) == "11:00:04 [r-2] final answer: done (5 in / 2 out tokens)"


def test_a_cancelled_call_reads_as_stored_by_the_cancellation() -> None:
    cancelled = {"id": "result:c1", "kind": "ToolResult", "tool": "run_shell", "toolCallId": "c1",
                 "status": "cancelled", "text": "cancelled by the user", "at": "2026-12-03T11:00:05.000Z",
                 "segment": "r-1"}
    assert line(cancelled) == "11:00:05 [r-1] result run_shell (cancelled): cancelled by the user"


def test_following_stops_at_an_unanswered_waitpoint_not_at_one_just_answered() -> None:
    from sessionops.cli.transcript import _ended
    from tests.cli.fake import FakeKube

    kube = FakeKube()
    run = kube.put("agentruns", {"metadata": {"name": "s1-t1", "creationTimestamp": "2026-12-03T11:00:00Z"},
                                 "spec": {"sessionRef": {"name": "s1"}},
                                 "status": {"phase": "Waiting", "waitpoint": {"id": "wp-1", "kind": "Approval"}}})
    assert _ended(kube, None, [run]) and _ended(kube, "s1", [run])
    # Approved, and the operator has not resumed the run yet: the turn goes on.
    resume = kube.put("agentinputs", {"metadata": {"name": "s1-t1-wp-1"}, "spec": {
        "kind": "Resume", "sessionRef": {"name": "s1"}, "run": "s1-t1", "waitpointId": "wp-1"}})
    assert not _ended(kube, None, [run]) and not _ended(kube, "s1", [run])
    # An answer admission refused, or one for an older waitpoint, answers nothing.
    resume["status"] = {"phase": "Rejected"}
    assert _ended(kube, None, [run])
    resume["status"], resume["spec"]["waitpointId"] = {"phase": "Pending"}, "wp-0"
    assert _ended(kube, None, [run])
    run["status"] = {"phase": "Succeeded"}
    assert _ended(kube, None, [run])

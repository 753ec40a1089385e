"""Conversations end to end: turns as AgentRuns, worker Jobs, waitpoints, the queue, cancellation."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.e2e import manifests as m
from tests.e2e.conftest import REAL
from tests.e2e.manifests import phase, start_turn
from tests.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def refused(stack: Stack, manifest: dict) -> str:
    res = await stack.kubectl("create", "-f", "-", input=yaml.safe_dump(manifest), check=False)
    assert res.returncode != 0, res.stdout
    return res.stderr


async def test_a_follow_up_answered_with_tools(stack: Stack, name: str) -> None:
    await start_turn(stack, name, "replay/tools-then-answer")
    run = await stack.wait_for("arun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=90)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    # The worker writes the verdict; the operator records the segment once its Job has ended.
    run = await stack.wait_for("arun", f"{name}-t1", lambda r: r["status"]["segments"][-1].get("outcome"))
    assert run["status"]["result"]["text"] and run["status"]["result"]["segment"] == f"{name}-t1-1"
    assert run["status"]["usage"]["inputTokens"] > 0
    assert [s["outcome"] for s in run["status"]["segments"]] == ["Succeeded"]
    inp = await stack.get("ainput", f"{name}-1")
    assert inp["status"] == {**inp["status"], "phase": "Consumed", "run": f"{name}-t1"}
    await stack.wait_for("asess", name, phase("Idle"))


async def test_parallel_calls_wait_for_approval_and_resume_the_same_run(stack: Stack, name: str) -> None:
    await start_turn(stack, name, "replay/parallel-approval", text=f"please {name}")
    run = await stack.wait_for("arun", f"{name}-t1", phase("Waiting", "Failed"), timeout=90)
    waitpoint = run["status"]["waitpoint"]
    assert waitpoint["kind"] == "Approval" and [c["tool"] for c in waitpoint["calls"]] == ["run_shell"]
    await stack.wait_for("asess", name, phase("Waiting"))
    err = await refused(stack, m.message(f"{name}-2", name, "are you there?"))
    assert "waits for a Resume input" in err
    err = await refused(stack, m.resume(f"{name}-r0", name, f"{name}-t1", waitpoint["id"], decisions=[]))
    assert "spec.decisions" in err and "missing" in err
    call = waitpoint["calls"][0]["callId"]
    await stack.apply(m.resume(f"{name}-r1", name, f"{name}-t1", waitpoint["id"],
                               decisions=[{"callId": call, "decision": "Approve"}]))
    run = await stack.wait_for("arun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=90)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert run["status"]["result"]["text"] == "Wrote hello.sh and ran it."
    assert [s["kind"] for s in run["status"]["segments"]] == ["Start", "Resume"]
    assert run["status"]["result"]["segment"] == f"{name}-t1-2"
    err = await refused(stack, m.resume(f"{name}-r2", name, f"{name}-t1", waitpoint["id"],
                                        decisions=[{"callId": call, "decision": "Approve"}]))
    assert "is not waiting" in err
    if not REAL:  # two model calls in all: approving runs the pending call, with no model call of its own
        requests = await stack.replay_requests("parallel-approval")
        mine = [r for r in requests if any(msg.get("role") == "user" and msg.get("content") == f"please {name}"
                                           for msg in r["messages"])]
        assert len(mine) == 2, [len(r["messages"]) for r in mine]


async def test_a_question_needs_complete_answers(stack: Stack, name: str) -> None:
    await start_turn(stack, name, "replay/ask-user")
    run = await stack.wait_for("arun", f"{name}-t1", phase("Waiting", "Failed"), timeout=90)
    waitpoint = run["status"]["waitpoint"]
    assert waitpoint["kind"] == "Question" and len(waitpoint["questions"]) == 2
    err = await refused(stack, m.resume(f"{name}-r0", name, f"{name}-t1", waitpoint["id"], answers=["Go"]))
    assert "spec.answers" in err and "expected 2 answers" in err
    await stack.apply(m.resume(f"{name}-r1", name, f"{name}-t1", waitpoint["id"],
                               answers=["Go", ["lint", "unit tests"]]))
    run = await stack.wait_for("arun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=90)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    err = await refused(stack, m.resume(f"{name}-r2", name, f"{name}-t1", waitpoint["id"], answers=["Go", ["lint"]]))
    assert "is not waiting" in err


async def test_a_failed_turn_pauses_the_queue_until_continue(stack: Stack, name: str) -> None:
    # replay/hello has one answer: the second turn's model call fails (scenario exhausted).
    await start_turn(stack, name, "replay/hello")
    await stack.wait_for("arun", f"{name}-t1", phase("Succeeded"), timeout=90)
    await stack.apply(m.message(f"{name}-2", name, "again", delivery="FollowUp"))
    failed = await stack.wait_for("arun", f"{name}-t2", phase("Failed", "Succeeded"), timeout=90)
    assert failed["status"]["phase"] == "Failed"
    session = await stack.wait_for("asess", name, phase("Paused"))
    assert f"{name}-t2" in session["status"]["queue"]["pausedReason"]
    await stack.apply(m.message(f"{name}-3", name, "third", delivery="FollowUp"))
    session = await stack.wait_for("asess", name, lambda s: s["status"]["queue"]["pending"] == 1)
    assert session["status"]["phase"] == "Paused"
    res = await stack.kubectl("get", "arun", f"{name}-t3", check=False)
    assert res.returncode != 0  # nothing ran while paused
    await stack.apply(m.cont(f"{name}-c", name))
    await stack.wait_for("arun", f"{name}-t3", lambda r: True, timeout=30)
    assert (await stack.get("ainput", f"{name}-c"))["status"]["phase"] == "Consumed"


async def test_follow_ups_run_fifo_one_turn_at_a_time(stack: Stack, name: str) -> None:
    await stack.apply(m.agent(name))
    await stack.apply(m.session(name, name, model="replay/steer"))
    for i in (1, 2, 3):
        await stack.apply(m.message(f"{name}-{i}", name, f"q{i}", delivery="FollowUp"))
    for i in (1, 2, 3):
        run = await stack.wait_for("arun", f"{name}-t{i}", phase("Succeeded", "Failed"), timeout=90)
        assert run["status"]["phase"] == "Succeeded" and run["spec"]["inputs"] == [f"{name}-{i}"]
    created = [(await stack.get("arun", f"{name}-t{i}"))["metadata"]["creationTimestamp"] for i in (1, 2, 3)]
    assert created == sorted(created)


async def test_cancelling_a_waiting_turn_pauses_the_queue_until_continue(stack: Stack, name: str) -> None:
    await start_turn(stack, name, "replay/parallel-approval")
    run = await stack.wait_for("arun", f"{name}-t1", phase("Waiting"), timeout=90)
    waitpoint = run["status"]["waitpoint"]
    await stack.kubectl("patch", "arun", f"{name}-t1", "--type=merge", "-p", '{"spec":{"cancel":true}}')
    run = await stack.wait_for("arun", f"{name}-t1", phase("Cancelled"), timeout=60)
    assert run["status"]["cancellation"]["completedSteps"] == ["MergeCompletedTasks", "AddCancellationResults",
                                                               "ClearTasks"]
    # A waiting turn holds no pod: its last segment ended as Waiting (or, when the cancel came
    # before the operator saw the Job end, the cancellation closed it).
    assert run["status"].get("waitpoint") is None
    assert run["status"]["segments"][-1]["outcome"] in ("Waiting", "Cancelled")
    # Repeating the request is a no-op; undoing it is refused by the API server.
    await stack.kubectl("patch", "arun", f"{name}-t1", "--type=merge", "-p", '{"spec":{"cancel":true}}')
    res = await stack.kubectl("patch", "arun", f"{name}-t1", "--type=merge", "-p", '{"spec":{"cancel":false}}',
                              check=False)
    assert res.returncode != 0 and "cancel can only change from false to true" in res.stderr
    err = await refused(stack, m.resume(f"{name}-late", name, f"{name}-t1", waitpoint["id"],
                                        decisions=[{"callId": waitpoint["calls"][0]["callId"], "decision": "Approve"}]))
    assert "is not waiting" in err
    session = await stack.wait_for("asess", name, phase("Paused"))
    assert "cancelled" in session["status"]["queue"]["pausedReason"]
    await stack.apply(m.message(f"{name}-2", name, "next", delivery="FollowUp"))
    await stack.apply(m.cont(f"{name}-c", name))
    # The next turn's history (completed write_file result + a cancel result) satisfies the
    # replay model's strict pairing check: the thread was cleaned consistently.
    run = await stack.wait_for("arun", f"{name}-t2", phase("Succeeded", "Failed"), timeout=90)
    assert run["status"]["phase"] == "Succeeded", json.dumps(run["status"])[:2000]

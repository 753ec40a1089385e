"""Transcripts end to end, through kubectl only: one turn that does everything a transcript
shows (ARCHITECTURE section 10), with its worker killed mid-turn and retried."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import manifests as m
from tests.e2e.manifests import listed, phase
from tests.stack import TOOLS, Stack, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

RUN_LABEL = "sessionops.dev/run"


async def transcript(stack: Stack, ref: str) -> dict[str, Any]:
    """``kubectl sessionops transcript REF -o json`` as a process, found by kubectl on PATH."""
    bin_dir = Path(sys.executable).parent
    res = await run_cli(TOOLS / "kubectl", "sessionops", "transcript", ref, "-o", "json",
                        "--kubeconfig", str(stack.kubeconfig), "-n", stack.namespace,
                        env={"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"})
    return json.loads(res.stdout)


async def stored_steps(stack: Stack, run: str) -> list[dict[str, Any]]:
    """``kubectl get agenttranscripts -l sessionops.dev/run=RUN``: the chunks' steps by index."""
    chunks = sorted(await listed(stack, "agenttranscripts", f"{RUN_LABEL}={run}"), key=lambda c: c["spec"]["index"])
    assert [c["spec"]["index"] for c in chunks] == list(range(len(chunks)))
    return [s for c in chunks for s in c["spec"]["steps"]]


async def until_step(stack: Stack, run: str, found: Callable[[dict[str, Any]], bool],
                     timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        steps = await stored_steps(stack, run)
        if hit := next((s for s in steps if found(s)), None):
            return hit
        assert time.monotonic() < deadline, [(s["kind"], s.get("tool")) for s in steps]
        await asyncio.sleep(0.2)


def waiting_on(kind: str) -> Callable[[dict[str, Any]], bool]:
    def done(run: dict[str, Any]) -> bool:
        status = run.get("status") or {}
        return status.get("phase") in ("Failed", "Succeeded") or (
            status.get("phase") == "Waiting" and (status.get("waitpoint") or {}).get("kind") == kind)
    return done


def summary(step: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies a step for the reader, beside its id."""
    kind = step["kind"]
    if kind in ("ToolCall", "ToolResult"):
        return kind, step["tool"], (step.get("args") or {}).get("path"), step.get("status")
    if kind == "Decision":
        return kind, step["tool"], step["status"], step.get("decidedBy"), step.get("text")
    if kind in ("Answer",):
        return kind, step.get("decidedBy"), step["text"]
    if kind in ("Wait", "Child"):
        return kind, step.get("status")
    return kind, step.get("text")


async def test_a_turn_with_every_kind_of_step_reads_back_once_in_order_after_its_worker_is_killed(
        stack: Stack, name: str, kill_worker: Callable[[str], Awaitable[None]]) -> None:
    run_name = f"{name}-t1"
    await stack.apply(m.agent(name, requireApproval=["write_file"], maxExecutionSteps=60))
    await stack.apply(m.session(name, name, model="replay/transcript-tour"))
    await stack.apply(m.message(f"{name}-1", name, f"tour {name}", delivery="FollowUp"))

    # Three parallel calls: list_files runs, the two write_file calls wait; one approved, one rejected.
    run = await stack.wait_for("arun", run_name, waiting_on("Approval"), timeout=90)
    waitpoint = run["status"]["waitpoint"]
    calls = {c["args"]["path"]: c["callId"] for c in waitpoint["calls"]}
    assert sorted(calls) == ["drop.txt", "keep.txt"], waitpoint
    await stack.apply(m.resume(f"{name}-r1", name, run_name, waitpoint["id"], decisions=[
        {"callId": calls["keep.txt"], "decision": "Approve"},
        {"callId": calls["drop.txt"], "decision": "Reject", "message": "not this one"}]))

    # A question, answered.
    run = await stack.wait_for("arun", run_name, waiting_on("Question"), timeout=90)
    waitpoint = run["status"]["waitpoint"]
    await stack.apply(m.resume(f"{name}-r2", name, run_name, waitpoint["id"], answers=["blue"]))

    # The slow command runs: once its call is published, steer the turn and kill the worker.
    shell = await until_step(stack, run_name, lambda s: s["kind"] == "ToolCall" and s["tool"] == "run_shell")
    await stack.apply(m.message(f"{name}-steer", name, "Keep the summary short.", delivery="Steer"))
    killed = (await stack.get("arun", run_name))["status"]["segments"][-1]
    assert killed["name"] == shell["segment"] and killed.get("outcome") is None, killed
    await kill_worker(killed["job"])

    # The retry runs the command again, delivers the steer, delegates; the child's answer resumes it.
    run = await stack.wait_for("arun", run_name, phase("Succeeded", "Failed"), timeout=300)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    # The worker writes the verdict; the operator records the segment once its Job has ended.
    run = await stack.wait_for("arun", run_name, lambda r: r["status"]["segments"][-1].get("outcome"))
    segments = run["status"]["segments"]
    assert [(s["kind"], s.get("outcome")) for s in segments] == [
        ("Start", "Waiting"), ("Resume", "Waiting"), ("Resume", "Lost"), ("Retry", "Waiting"),
        ("Resume", "Succeeded")], segments
    assert run["status"]["steered"] == [f"{name}-steer"]

    doc = await transcript(stack, run_name)
    assert (doc["run"], doc["session"], doc["phase"]) == (run_name, name, "Succeeded")
    steps = doc["steps"]
    assert steps == await stored_steps(stack, run_name)  # the plugin shows what is stored, in order
    ids = [s["id"] for s in steps]
    assert len(ids) == len(set(ids)), ids
    question = "Which colour should the report use? -> blue"
    me = (await stack.get("ainput", f"{name}-r1"))["spec"]["submittedBy"]["username"]  # alice, locally
    # list_files ran beside the waiting calls: its result is published before the wait or,
    # when it ended after the interrupt, with the others after the decisions. Anywhere else is wrong.
    listed_at = next(i for i, s in enumerate(steps) if s["kind"] == "ToolResult" and s["tool"] == "list_files")
    assert 4 < listed_at < 11, listed_at
    rest = steps[:listed_at] + steps[listed_at + 1:]
    assert [summary(s) for s in rest] == [
        ("UserMessage", f"tour {name}"),
        ("AssistantMessage", "I will look around and write two files."),
        ("ToolCall", "list_files", ".", None),
        ("ToolCall", "write_file", "keep.txt", None),
        ("ToolCall", "write_file", "drop.txt", None),
        ("Wait", "Approval"),
        ("Decision", "write_file", "Approve", me, None),
        ("Decision", "write_file", "Reject", me, "not this one"),
        ("ToolResult", "write_file", None, "success"),
        ("ToolResult", "write_file", None, "error"),
        ("AssistantMessage", ""),
        ("Question", None),
        ("Wait", "Question"),
        ("Answer", me, question),
        ("ToolResult", "ask_user", None, "success"),
        ("AssistantMessage", "Now the slow part."),
        ("ToolCall", "run_shell", None, None),
        ("ToolResult", "run_shell", None, "success"),
        ("Steer", "Keep the summary short."),
        ("AssistantMessage", "Handing the summary to a helper."),
        ("ToolCall", "delegate", None, None),
        ("Wait", "Delegation"),
        ("Child", "success"),
        ("FinalAnswer", "All done: keep.txt written, the summary is in."),
    ], [(s["kind"], s["id"]) for s in steps]
    by_id = {s["id"]: s for s in steps}
    # Results belong to their calls: the rejected write's result says so, the approved one ran.
    [keep, drop] = [s for s in steps if s["kind"] == "ToolCall" and s["tool"] == "write_file"]
    assert by_id[f"result:{drop['toolCallId']}"]["text"] == "rejected by the user: not this one"
    assert by_id[f"result:{keep['toolCallId']}"]["status"] == "success"
    assert by_id[f"decision:{keep['toolCallId']}"]["status"] == "Approve"
    [asked] = [s for s in steps if s["kind"] == "Question"]
    assert asked["args"]["questions"][0]["question"] == "Which colour should the report use?"
    [child] = [s for s in steps if s["kind"] == "Child"]
    assert child["args"]["name"] == "summarizer" and "keep.txt says: kept." in child["text"]
    # The killed segment's call keeps its first publication; its result comes from the retry.
    assert by_id[shell["id"]]["segment"] == killed["name"] and by_id[shell["id"]]["at"] == shell["at"]
    assert by_id[f"result:{shell['toolCallId']}"]["segment"] == segments[3]["name"]
    assert "slow-done" in by_id[f"result:{shell['toolCallId']}"]["text"]
    # Every model call's usage is there, and the steps are in time order.
    assert all(s.get("usage", {}).get("inputTokens", 0) > 0 for s in steps
               if s["kind"] in ("AssistantMessage", "FinalAnswer"))
    assert [s["at"] for s in steps] == sorted(s["at"] for s in steps)
    # The session's transcript holds the same turn.
    assert (await transcript(stack, name))["steps"] == steps

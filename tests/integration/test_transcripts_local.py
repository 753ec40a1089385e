"""Transcripts where the test needs the local stack's hands: the operator's RBAC changed while a
cancellation records the calls it closed."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import yaml

from tests.e2e import manifests as m
from tests.e2e.manifests import listed, phase
from tests.stack import RELEASE

pytestmark = pytest.mark.asyncio(loop_scope="module")


def failed_condition(run: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in (run.get("status") or {}).get("conditions") or []
                 if c["type"] == "CleanupFailed" and c["status"] == "True"), None)


async def test_a_cancelled_runs_closed_call_reaches_its_transcript_once_after_a_refused_write(local: tuple) -> None:
    stack, _ = local
    name = f"c{uuid.uuid4().hex[:6]}"
    run_name = f"{name}-t1"
    await stack.apply(m.agent(name))  # run_shell needs approval
    await stack.apply(m.session(name, name, model="replay/parallel-approval"))
    await stack.apply(m.message(f"{name}-1", name, "go", delivery="FollowUp"))
    await stack.wait_for("arun", run_name, phase("Waiting"), timeout=90)
    # The operator loses its transcript rule: cleanup completes, recording the closed call fails.
    original = await stack.get("clusterrole", f"{RELEASE}-operator", admin=True)
    without = {key: original[key] for key in ("apiVersion", "kind", "metadata", "rules")}
    without["rules"] = [r for r in original["rules"] if r.get("resources") != ["agenttranscripts"]]
    assert len(without["rules"]) == len(original["rules"]) - 1
    await stack.kubectl("replace", "-f", "-", input=yaml.safe_dump(without), admin=True)
    try:
        await stack.kubectl("patch", "arun", run_name, "--type=merge", "-p", '{"spec":{"cancel":true}}')
        run = await stack.wait_for("arun", run_name, failed_condition, timeout=90)
        assert run["status"]["phase"] == "Cancelling", run["status"]
        failed = failed_condition(run)
        assert failed is not None and failed["reason"] == "StepRecordCancelledCallsFailed", failed
        assert "forbidden" in failed["message"].lower(), failed
        # Retried by the recovery scan, still refused: nothing written, nothing doubled later.
        chunks = await listed(stack, "agenttranscripts", f"sessionops.dev/run={run_name}")
        assert not [s for c in chunks for s in c["spec"]["steps"] if s.get("status") == "cancelled"]
    finally:
        restored = {key: original[key] for key in ("apiVersion", "kind", "metadata", "rules")}
        restored["metadata"] = {"name": original["metadata"]["name"], "labels": original["metadata"].get("labels")}
        await stack.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                            input=yaml.safe_dump(restored), admin=True)
    run = await stack.wait_for("arun", run_name, phase("Cancelled"), timeout=90)
    assert not failed_condition(run), run["status"]["conditions"]
    assert run["status"]["cancellation"]["completedSteps"] == ["MergeCompletedTasks", "AddCancellationResults",
                                                               "ClearTasks"]
    chunks = sorted(await listed(stack, "agenttranscripts", f"sessionops.dev/run={run_name}"),
                    key=lambda c: c["spec"]["index"])
    steps = [s for c in chunks for s in c["spec"]["steps"]]
    assert len({s["id"] for s in steps}) == len(steps), json.dumps(steps)[:3000]
    [shell] = [s for s in steps if s["kind"] == "ToolCall" and s["tool"] == "run_shell"]
    [cancelled] = [s for s in steps if s.get("status") == "cancelled"]
    assert (cancelled["id"], cancelled["kind"], cancelled["tool"], cancelled["text"], cancelled["segment"]) == (
        f"result:{shell['toolCallId']}", "ToolResult", "run_shell", "cancelled by the user", f"{run_name}-1")
    assert steps[-1] == cancelled  # appended after what the worker published

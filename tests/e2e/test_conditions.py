"""Conditions by the API conventions, read by the real ``kubectl wait --for=condition=...``:
Agents, sessions and runs each say what they are in a way tools can wait on."""

from __future__ import annotations

import json
import time

import pytest

from tests.e2e import manifests as m
from tests.e2e.manifests import start_turn
from tests.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def wait(stack: Stack, kind: str, name: str, condition: str, timeout: int = 60) -> None:
    """``kubectl wait --for=create`` then ``--for=condition=...``: the real client's own reading."""
    await stack.kubectl("wait", f"{kind}/{name}", "--for=create", f"--timeout={timeout}s")
    res = await stack.kubectl("wait", f"{kind}/{name}", f"--for=condition={condition}", f"--timeout={timeout}s",
                              check=False)
    if res.returncode != 0:
        obj = await stack.get(kind, name)
        raise AssertionError(f"kubectl wait --for=condition={condition} {kind}/{name} failed: {res.stderr}\n"
                             f"{json.dumps(obj.get('status'), indent=1)[:3000]}")


def cond(obj: dict, type_: str) -> dict:
    return next(c for c in obj["status"]["conditions"] if c["type"] == type_)


async def test_an_agent_is_ready_and_its_columns_show_the_effective_model(stack: Stack, name: str) -> None:
    await stack.apply(m.agent(name))
    await wait(stack, "agent", name, "Ready")
    agent = await stack.get("agent", name)
    assert cond(agent, "Ready")["observedGeneration"] == agent["metadata"]["generation"]
    table = (await stack.kubectl("get", "agent", name)).stdout.split("\n")
    header, row = table[0].split(), table[1].split()
    assert header[:4] == ["NAME", "MODEL", "APPROVAL", "READY"] and row[1:4] == ["replay/hello", "Default", "True"]


async def test_an_agent_naming_a_missing_secret_or_model_is_not_ready(stack: Stack, name: str) -> None:
    await stack.apply(m.agent(name, worker={"env": [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": f"{name}-absent", "key": "token"}}}]}))
    await wait(stack, "agent", name, "Ready=False")
    ready = cond(await stack.get("agent", name), "Ready")
    assert ready["reason"] == "SecretMissing" and f'secret "{name}-absent"' in ready["message"]
    assert "spec.worker.env[0]" in ready["message"]
    await stack.kubectl("create", "secret", "generic", f"{name}-absent", "--from-literal=token=x")
    await stack.apply(m.agent(name, model="replay/not-in-catalog", worker={"env": [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": f"{name}-absent", "key": "token"}}}]}))
    agent = await stack.wait_for("agent", name, lambda a: cond(a, "Ready")["reason"] == "ModelUnavailable")
    assert "'replay/not-in-catalog'" in cond(agent, "Ready")["message"]


async def test_a_session_and_a_succeeded_run_can_be_waited_for(stack: Stack, name: str) -> None:
    await stack.apply(m.agent(name))
    await stack.apply(m.session(name, name, model="replay/hello"))
    await wait(stack, "asess", name, "Ready")
    await stack.apply(m.message(f"{name}-1", name, "hi", delivery="FollowUp"))
    await wait(stack, "arun", f"{name}-t1", "Succeeded", timeout=90)
    run = await stack.get("arun", f"{name}-t1")
    assert run["status"]["phase"] == "Succeeded"
    assert {c["type"]: c["status"] for c in run["status"]["conditions"]} == {
        "Succeeded": "True", "Failed": "False", "Waiting": "False", "Cancelled": "False", "Ready": "False"}
    assert all(c["lastTransitionTime"] and c["observedGeneration"] == run["metadata"]["generation"]
               for c in run["status"]["conditions"])
    await wait(stack, "asess", name, "Active=False")
    await wait(stack, "asess", name, "Paused=False")


async def test_a_waiting_run_and_its_session_say_so(stack: Stack, name: str) -> None:
    await start_turn(stack, name, "replay/parallel-approval")
    await wait(stack, "arun", f"{name}-t1", "Waiting", timeout=90)
    assert cond(await stack.get("arun", f"{name}-t1"), "Waiting")["reason"] == "Approval"
    await wait(stack, "asess", name, "Ready=False")
    session = await stack.get("asess", name)
    assert cond(session, "Ready")["reason"] == "TurnWaiting" and cond(session, "Active")["status"] == "True"


async def test_a_running_run_is_ready_and_a_cancelled_one_pauses_its_session(stack: Stack, name: str) -> None:
    await start_turn(stack, name, "replay/slow")
    await wait(stack, "arun", f"{name}-t1", "Ready", timeout=90)
    await wait(stack, "asess", name, "Active")
    await stack.kubectl("patch", "arun", f"{name}-t1", "--type=merge", "-p", '{"spec":{"cancel":true}}')
    await wait(stack, "arun", f"{name}-t1", "Cancelled", timeout=90)
    await wait(stack, "asess", name, "Paused")
    session = await stack.get("asess", name)
    assert cond(session, "Paused")["reason"] == "TurnCancelled" and "Continue" in cond(session, "Paused")["message"]
    run = await stack.get("arun", f"{name}-t1")
    assert cond(run, "Ready")["status"] == "False" and cond(run, "Succeeded")["status"] == "False"


async def test_a_run_whose_pod_misses_a_secret_fails_fast_naming_it(stack: Stack, name: str) -> None:
    secret = f"{name}-key"
    await stack.apply(m.agent(name, worker={"env": [
        {"name": "MODEL_KEY", "valueFrom": {"secretKeyRef": {"name": secret, "key": "apiKey"}}}]}))
    await stack.apply(m.session(name, name, model="replay/hello"))
    started = time.monotonic()
    await stack.apply(m.message(f"{name}-1", name, "hi", delivery="FollowUp"))
    run = await stack.wait_for("arun", f"{name}-t1",
                               lambda r: any(c["type"] == "Ready" and c["reason"] == "CreateContainerConfigError"
                                             for c in (r.get("status") or {}).get("conditions") or []), timeout=30)
    assert f'secret "{secret}" not found' in cond(run, "Ready")["message"]
    assert time.monotonic() - started < 30
    await wait(stack, "arun", f"{name}-t1", "Failed", timeout=90)
    assert time.monotonic() - started < 90
    run = await stack.get("arun", f"{name}-t1")
    failed = cond(run, "Failed")
    assert failed["reason"] == "CreateContainerConfigError" and f'secret "{secret}" not found' in failed["message"]
    # No retry could help: one segment, no Retry.
    assert [s["kind"] for s in run["status"]["segments"]] == ["Start"]
    assert run["status"]["segments"][0]["outcome"] == "NotStarted"
    await wait(stack, "asess", name, "Paused")


async def test_an_unschedulable_pod_shows_on_the_runs_ready_condition(stack: Stack, name: str) -> None:
    await stack.apply(m.agent(name, worker={"nodeSelector": {"sessionops.dev/test-pool": "nowhere"}}))
    await stack.apply(m.session(name, name, model="replay/hello"))
    await stack.apply(m.message(f"{name}-1", name, "hi", delivery="FollowUp"))
    run = await stack.wait_for("arun", f"{name}-t1",
                               lambda r: any(c["type"] == "Ready" and c["reason"] == "Unschedulable"
                                             for c in (r.get("status") or {}).get("conditions") or []), timeout=30)
    assert "node affinity/selector" in cond(run, "Ready")["message"]
    assert run["status"]["phase"] == "Pending"
    await stack.kubectl("patch", "arun", f"{name}-t1", "--type=merge", "-p", '{"spec":{"cancel":true}}')
    await wait(stack, "arun", f"{name}-t1", "Cancelled", timeout=90)

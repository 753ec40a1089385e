"""Collaboration end to end: a run's delegate tool makes child sessions (ARCHITECTURE section 6)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.e2e import manifests as m
from tests.e2e.conftest import REAL
from tests.e2e.manifests import PARENT_RUN, children_of, listed, phase, start_turn
from tests.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

TREE = "sessionops.dev/tree"
TARGET = "delegate-target"  # named in the delegate-agent scenario


def tool_results(request: dict[str, Any]) -> list[str]:
    return [msg["content"] for msg in request["messages"] if msg.get("role") == "tool"]


async def test_a_child_inherits_the_dispatching_runs_configuration_not_the_sessions(stack: Stack, name: str) -> None:
    await start_turn(stack, name, "replay/delegate")
    await stack.wait_for("arun", f"{name}-t1", phase("Running"), timeout=90)
    # Mid-turn (the model takes 3 s before it delegates): the session moves to another model.
    await stack.kubectl("patch", "asess", name, "--type=merge", "-p", '{"spec":{"model":"replay/hello"}}')
    run = await stack.wait_for("arun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=120)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert run["status"]["result"]["text"] == "The researcher summarized the release notes for you."
    assert (await stack.get("asess", name))["spec"]["contextSnapshot"]["model"] == "replay/hello"

    [child] = await children_of(stack, f"{name}-t1")
    child_name = child["metadata"]["name"]
    assert child_name.startswith("researcher-")
    assert child["spec"]["delegation"] == {"parentRun": f"{name}-t1", "toolCallId": "call_delegate_0_0",
                                           "name": "researcher", "inherit": True}
    assert child["spec"]["contextSnapshot"] == run["spec"]["contextSnapshot"]  # model replay/delegate
    assert child["metadata"]["labels"][TREE] == name
    assert child["metadata"]["labels"]["sessionops.dev/parent-session"] == name
    assert [(o["kind"], o["name"]) for o in child["metadata"]["ownerReferences"]] == [("AgentRun", f"{name}-t1")]

    delegated = await stack.get("ainput", f"{child_name}-delegated")
    parent_input = await stack.get("ainput", f"{name}-1")
    assert delegated["spec"]["submittedBy"] == parent_input["spec"]["submittedBy"]  # the user, not the worker
    assert delegated["spec"]["messages"] == [{"content": "Summarize the release notes."}]
    child_run = await stack.get("arun", delegated["status"]["run"])
    assert child_run["status"]["result"]["text"] == "Summary: two fixes and one new feature."
    assert child_run["spec"]["contextSnapshot"]["model"] == "replay/delegate"
    assert child_run["metadata"]["labels"][TREE] == name
    [seen] = run["status"]["children"]
    assert (seen["name"], seen["session"], seen["phase"]) == ("researcher", child_name, "Succeeded")
    assert [s["kind"] for s in run["status"]["segments"]] == ["Start", "Resume"]
    if not REAL:
        parent_calls = [r for r in await stack.replay_requests("delegate") if r.get("branch") is None
                        and any(msg.get("content") == "go" for msg in r["messages"])]
        assert "Summary: two fixes and one new feature." in tool_results(parent_calls[-1])


async def test_an_explicit_agent_is_frozen_at_dispatch_and_its_question_shows_on_the_parent(
        stack: Stack, name: str) -> None:
    await stack.apply(m.agent(TARGET, systemPrompt="You review rollout plans.", model="replay/delegate-target",
                              approvalMode="Default"))
    await stack.apply(m.agent(name))
    await stack.apply(m.session(name, name, model="replay/delegate-agent", approvalMode="AlwaysTrust"))
    await stack.apply(m.message(f"{name}-1", name, "go", delivery="FollowUp"))

    def waiting_on_a_child_question(run: dict[str, Any]) -> bool:
        children = (run.get("status") or {}).get("children") or []
        return bool(children and children[0].get("waitingAt"))

    run = await stack.wait_for("arun", f"{name}-t1", waiting_on_a_child_question, timeout=120)
    assert run["status"]["phase"] == "Waiting" and run["status"]["waitpoint"]["kind"] == "Delegation"
    [child_name] = run["status"]["waitpoint"]["children"]
    child = await stack.get("asess", child_name)
    frozen = child["spec"]["contextSnapshot"]
    assert (frozen["systemPrompt"], frozen["model"], frozen["source"]["agentName"]) == (
        "You review rollout plans.", "replay/delegate-target", TARGET)
    assert frozen["approvalMode"] == "AlwaysTrust"  # the parent run's, not the target Agent's
    child_run = await stack.get("arun", f"{child_name}-t1")
    waitpoint = child_run["status"]["waitpoint"]
    assert waitpoint["kind"] == "Question"
    [seen] = run["status"]["children"]
    assert seen["waitingAt"] == f"{child_name}/{child_name}-t1/{waitpoint['id']}"
    assert (seen["name"], seen["phase"]) == ("reviewer", "Waiting")

    # The target Agent changes after dispatch: the child keeps what was frozen.
    await stack.apply(m.agent(TARGET, systemPrompt="EDITED", model="replay/hello"))
    # A question inside the child is answered in the child; that resumes the child, then the parent.
    await stack.apply(m.resume(f"{name}-answer", child_name, f"{child_name}-t1", waitpoint["id"],
                               answers=["canary"]))
    run = await stack.wait_for("arun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=120)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert run["status"]["result"]["text"] == "The reviewer approved the rollout plan."
    child_run = await stack.get("arun", f"{child_name}-t1")
    assert child_run["status"]["result"]["text"] == "Reviewed: the plan is sound."
    assert (await stack.get("asess", child_name))["spec"]["contextSnapshot"] == frozen
    if not REAL:
        prompts = {msg["content"] for r in await stack.replay_requests("delegate-target")
                   for msg in r["messages"] if msg.get("role") == "system"}
        assert prompts == {"You review rollout plans."}
    await stack.apply(m.agent(TARGET, systemPrompt="You review rollout plans.", model="replay/delegate-target"))


async def test_deleting_the_root_session_removes_the_tree(stack: Stack, name: str) -> None:
    await start_turn(stack, name, "replay/delegate")
    run = await stack.wait_for("arun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=120)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    [child] = await children_of(stack, f"{name}-t1")
    assert await listed(stack, "arun", f"{TREE}={name}")  # the root's run and the child's
    await stack.kubectl("delete", "asess", name, "--wait=false")
    deadline = time.monotonic() + 90
    while True:
        left = {kind: await listed(stack, kind, f"{TREE}={name}") for kind in ("asess", "arun")}
        left["ainput"] = await listed(stack, "ainput", f"{PARENT_RUN}={name}-t1")
        if not any(left.values()):
            break
        assert time.monotonic() < deadline, {k: [o["metadata"]["name"] for o in v] for k, v in left.items()}
        await asyncio.sleep(0.5)
    assert (await stack.kubectl("get", "asess", child["metadata"]["name"], check=False)).returncode != 0


async def test_cancelling_a_parent_cancels_its_active_children_first(stack: Stack, name: str) -> None:
    await start_turn(stack, name, "replay/delegate-cancel")
    run = await stack.wait_for("arun", f"{name}-t1", lambda r: ((r.get("status") or {}).get("children") or [{}])[0]
                               .get("phase") == "Running", timeout=120)
    [child_name] = run["status"]["waitpoint"]["children"]
    await stack.kubectl("patch", "arun", f"{name}-t1", "--type=merge", "-p", '{"spec":{"cancel":true}}')
    run = await stack.wait_for("arun", f"{name}-t1", phase("Cancelled"), timeout=90)
    child_run = await stack.get("arun", f"{child_name}-t1")
    assert child_run["spec"]["cancel"] is True and child_run["status"]["phase"] == "Cancelled"
    assert child_run["status"]["cancellation"]["completedAt"] <= run["status"]["cancellation"]["completedAt"]
    await stack.wait_for("asess", name, phase("Paused"))


async def test_the_tree_bound_holds_six_parallel_delegations_to_four_running_turns(
        stack: Stack, name: str) -> None:
    await start_turn(stack, name, "replay/delegate-six")
    most = 0
    held_back: set[str] = set()
    deadline = time.monotonic() + 180
    while True:
        runs = await listed(stack, "arun", f"{TREE}={name}")
        running = [r for r in runs if (r.get("status") or {}).get("phase", "Pending")
                   not in ("Succeeded", "Failed", "Cancelled", "Waiting")]
        most = max(most, len(running))
        for session in await listed(stack, "asess", f"{TREE}={name}"):
            if ((session.get("status") or {}).get("queue") or {}).get("heldBack"):
                held_back.add(session["metadata"]["name"])
        root = next((r for r in runs if r["metadata"]["name"] == f"{name}-t1"), None)
        if root is not None and (root.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            break
        assert time.monotonic() < deadline, [(r["metadata"]["name"], r.get("status", {}).get("phase")) for r in runs]
        await asyncio.sleep(0.2)
    assert root["status"]["phase"] == "Succeeded", root["status"]
    assert root["status"]["result"]["text"] == "All six work items are done."
    assert most <= 4, most
    assert held_back, "the bound never held a child back"
    children = root["status"]["children"]
    assert [c["name"] for c in children] == [f"worker_{i}" for i in range(1, 7)]
    assert {c["phase"] for c in children} == {"Succeeded"}
    if not REAL:
        [last] = [r for r in await stack.replay_requests("delegate-six") if r.get("branch") is None
                  and r["messages"][-1].get("role") == "tool" and any(msg.get("content") == "go" for msg in r["messages"])
                  and len(tool_results(r)) == 6][-1:]
        assert tool_results(last) == ["Work item done."] * 6


async def test_a_child_delegates_again_within_the_same_tree(stack: Stack, name: str) -> None:
    await start_turn(stack, name, "replay/delegate-deep")
    run = await stack.wait_for("arun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=150)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert run["status"]["result"]["text"] == "Top done."
    [middle] = await children_of(stack, f"{name}-t1")
    middle_name = middle["metadata"]["name"]
    [bottom] = await children_of(stack, f"{middle_name}-t1")
    assert (middle["metadata"]["labels"]["sessionops.dev/depth"], bottom["metadata"]["labels"]["sessionops.dev/depth"]) \
        == ("1", "2")
    assert bottom["metadata"]["labels"][TREE] == name  # one tree: one bound, one deletion
    assert bottom["metadata"]["labels"]["sessionops.dev/parent-session"] == middle_name
    assert bottom["spec"]["contextSnapshot"] == run["spec"]["contextSnapshot"]  # inherited twice
    middle_run = await stack.get("arun", f"{middle_name}-t1")
    assert middle_run["status"]["result"]["text"] == "Middle done."
    assert {r["metadata"]["name"] for r in await listed(stack, "arun", f"{TREE}={name}")} == {
        f"{name}-t1", f"{middle_name}-t1", f"{bottom['metadata']['name']}-t1"}

"""Delegation where the test needs the local stack's hands: people's permissions changed,
a worker killed mid-turn, and the operator's configuration changed at run time."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import uuid
from collections.abc import AsyncIterator
from typing import Any

import kubernetes
import pytest
import yaml

from sessionops.platform.kube import load_api_client
from tests import identities
from tests.e2e import manifests as m
from tests.e2e.manifests import PARENT_RUN, children_of, listed, phase, start_turn
from tests.stack import CONFIGMAP, OPERATOR_NS, USER_BINDING, Stack

pytestmark = pytest.mark.asyncio(loop_scope="module")

def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:6]}"


def tool_results(requests: list[dict[str, Any]], user_text: str) -> list[str]:
    mine = [r for r in requests if any(msg.get("role") == "user" and msg.get("content") == user_text
                                       for msg in r["messages"])]
    return [msg["content"] for msg in mine[-1]["messages"] if msg.get("role") == "tool"]


async def send_as(stack: Stack, user: str, manifest: dict[str, Any], plural: str = "agentinputs") -> None:
    """Create an object as ``user``: the administrator impersonates them (``kubectl --as``)."""
    def create() -> None:
        client = load_api_client(str(stack.admin_kubeconfig))
        client.set_default_header("Impersonate-User", user)
        try:
            kubernetes.client.CustomObjectsApi(client).create_namespaced_custom_object(
                "sessionops.dev", "v1alpha1", stack.namespace, plural, manifest)
        finally:
            client.close()
    await asyncio.to_thread(create)


async def refused_as(stack: Stack, user: str, manifest: dict[str, Any], plural: str) -> tuple[int, str]:
    with pytest.raises(kubernetes.client.ApiException) as e:
        await send_as(stack, user, manifest, plural)
    return e.value.status, json.loads(e.value.body)["message"]


async def test_only_an_identity_allowed_to_delegate_for_a_run_makes_its_children(local: tuple) -> None:
    stack, cluster = local
    name = unique("a")
    await stack.apply(m.agent(name))
    await stack.apply(m.session(name, name, model="replay/delegate-target"))  # waits on a question
    await stack.apply(m.message(f"{name}-1", name, "go", delivery="FollowUp"))
    await stack.wait_for("arun", f"{name}-t1", phase("Waiting"), timeout=90)
    child = m.session(f"{name}-kid", name)
    child["spec"]["delegation"] = {"parentRun": f"{name}-t1", "toolCallId": "call_x", "name": "kid"}
    # mallory may use agents here (edit) but holds no `delegate` verb, which only the workers' Role grants.
    await stack.kubectl("create", "rolebinding", "mallory-edit", "--clusterrole=edit", "--user=mallory", admin=True)
    try:
        code, message = await refused_as(stack, "mallory", child, "agentsessions")
        assert code == 403 and "spec.delegation.parentRun: mallory may not delegate" in message
        # An input cannot borrow a run's identity by naming it in a label.
        forged = m.message(f"{name}-forged", name, "hi", delivery="FollowUp")
        forged["metadata"]["labels"] = {PARENT_RUN: f"{name}-t1"}
        code, message = await refused_as(stack, "mallory", forged, "agentinputs")
        assert code == 422 and "was not delegated by agentrun" in message
        # Nor can a session join (or leave) a tree by its labels.
        labelled = m.session(f"{name}-join", name)
        labelled["metadata"]["labels"] = {"sessionops.dev/tree": name}
        code, message = await refused_as(stack, "mallory", labelled, "agentsessions")
        assert code == 422 and "metadata.labels[sessionops.dev/tree]: set by sessionops" in message
        res = await stack.kubectl("label", "asess", name, "sessionops.dev/depth=0", check=False)
        assert res.returncode != 0 and "set by sessionops and immutable" in res.stderr
    finally:
        await stack.kubectl("delete", "rolebinding", "mallory-edit", admin=True)
    missing = m.session(f"{name}-kid2", name)
    missing["spec"]["delegation"] = {"parentRun": f"{name}-t9", "toolCallId": "call_x", "name": "kid"}
    code, message = await refused_as(stack, "alice", missing, "agentsessions")
    assert code == 404 and f'agentrun "{name}-t9" not found' in message


async def test_a_target_agent_the_submitter_may_not_use_is_refused_and_nothing_is_created(local: tuple) -> None:
    stack, cluster = local
    name = unique("d")
    await stack.apply(m.agent("delegate-forbidden", systemPrompt="Privileged."))
    await stack.apply(m.agent(name))
    await stack.apply(m.session(name, name, model="replay/delegate-denied"))
    # alice may use this test's Agent, but not delegate-forbidden: her edit binding gives way to a Role.
    await stack.apply(identities.role("alice-narrow", stack.namespace, [
        {"apiGroups": ["sessionops.dev"], "resources": ["agents"], "verbs": ["get"], "resourceNames": [name]},
        {"apiGroups": ["sessionops.dev"], "resources": ["agentsessions", "agentinputs", "agentruns"],
         "verbs": ["get", "list", "watch", "create", "update", "patch"]},
        {"apiGroups": ["sessionops.dev"], "resources": ["tools", "skills", "mcpservers"], "verbs": ["use"]}]),
        admin=True)
    await stack.kubectl("create", "rolebinding", "alice-narrow", "--role=alice-narrow", "--user=alice", admin=True)
    await stack.kubectl("delete", "rolebinding", USER_BINDING, admin=True)
    try:
        await send_as(stack, "alice", m.message(f"{name}-1", name, f"go {name}", delivery="FollowUp"))
        run = await stack.wait_for("arun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=90)
    finally:
        await stack.kubectl("create", "rolebinding", USER_BINDING, "--clusterrole=edit", "--user=alice", admin=True)
        await stack.kubectl("delete", "rolebinding,role", "alice-narrow", admin=True)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert run["status"]["result"]["text"] == "I could not hand this over."
    assert await children_of(stack, f"{name}-t1") == []
    [result] = tool_results(await stack.replay_requests("delegate-denied"), f"go {name}")
    assert "refused" in result and "alice may not get agents" in result and "delegate-forbidden" in result
    assert any(r.get("user") == "alice" and r.get("name") == "delegate-forbidden" and not r["allowed"]
               for r in cluster.access_reviews)


async def test_a_parent_worker_lost_mid_turn_is_retried_and_reuses_its_child(local: tuple) -> None:
    stack, _ = local
    name = unique("k")
    await start_turn(stack, name, "replay/delegate-retry", f"build {name}", approvalMode="AlwaysTrust")
    for _ in range(300):  # the child exists while the parent's run_shell still sleeps
        if await children_of(stack, f"{name}-t1"):
            break
        await asyncio.sleep(0.1)
    [child] = await children_of(stack, f"{name}-t1")
    # An eviction: SIGTERM, the worker releases its Lease and exits without a verdict.
    await asyncio.to_thread(stack.pod_runner.kill, f"{name}-t1-1", signal.SIGTERM)
    run = await stack.wait_for("arun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=120)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert run["status"]["result"]["text"] == "Built, with help."
    assert [s["kind"] for s in run["status"]["segments"]] == ["Start", "Retry", "Resume"]
    assert run["status"]["segments"][0]["outcome"] == "Lost"
    assert [c["metadata"]["name"] for c in await children_of(stack, f"{name}-t1")] == [child["metadata"]["name"]]
    assert [i["metadata"]["name"] for i in await listed(stack, "ainput", f"{PARENT_RUN}={name}-t1")] == [
        f"{child['metadata']['name']}-delegated"]
    assert len(await listed(stack, "arun", f"sessionops.dev/session={child['metadata']['name']}")) == 1
    assert tool_results(await stack.replay_requests("delegate-retry"), f"build {name}")[0] == "Helped."
    # The parent's transcript, through kubectl: the delegated child once, despite the lost segment.
    listed_chunks = json.loads((await stack.kubectl("get", "agenttranscripts", "-l",
                                                    f"sessionops.dev/run={name}-t1", "-o", "json")).stdout)
    steps = [s for c in sorted(listed_chunks["items"], key=lambda c: c["spec"]["index"]) for s in c["spec"]["steps"]]
    ids = [s["id"] for s in steps]
    assert len(ids) == len(set(ids))
    kinds = [s["kind"] for s in steps]
    assert kinds.count("Child") == 1 and kinds.count("FinalAnswer") == 1 and kinds[-1] == "FinalAnswer"
    assert [s["tool"] for s in steps if s["kind"] == "ToolCall"].count("delegate") == 1
    [child_step] = [s for s in steps if s["kind"] == "Child"]
    assert "Helped." in child_step["text"] and child_step["args"]["name"]


async def write_config(stack: Stack, config: dict[str, Any]) -> None:
    patch = {"data": {"config.yaml": yaml.safe_dump(config)}}
    await stack.kubectl("patch", "configmap", CONFIGMAP, "-n", OPERATOR_NS, "--type=merge", "-p", json.dumps(patch),
                        admin=True)


@contextlib.asynccontextmanager
async def configured(stack: Stack, **changes: Any) -> AsyncIterator[None]:
    """The operator's config.yaml (watched at run time) with ``changes`` (a mapping value is
    merged into the section), restored afterwards."""
    cm = await stack.get("configmap", CONFIGMAP, OPERATOR_NS, admin=True)
    before = yaml.safe_load(cm["data"]["config.yaml"])
    merged = {k: {**before.get(k, {}), **v} if isinstance(v, dict) else v for k, v in changes.items()}
    await write_config(stack, {**before, **merged})
    await asyncio.sleep(1.5)  # the operator polls its ConfigMap every 0.5 s here
    try:
        yield
    finally:
        await write_config(stack, before)


async def test_a_parent_resumes_at_the_deadline_and_the_late_child_is_cancelled(local: tuple) -> None:
    stack, _ = local
    name = unique("t")
    async with configured(stack, delegationTimeoutSeconds=3):
        await start_turn(stack, name, "replay/delegate-cancel", f"wait {name}")
        run = await stack.wait_for("arun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=120)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    [child_name] = [c["session"] for c in run["status"]["children"]]
    [result] = tool_results(await stack.replay_requests("delegate-cancel"), f"wait {name}")
    assert "did not finish before the deadline" in result and "slowpoke" in result
    # Claimed by then (almost always): its run is cancelled; else its input never runs.
    delegated = await stack.get("ainput", f"{child_name}-delegated")
    if delegated["status"]["phase"] == "Cancelled":
        assert delegated["status"]["conditions"][0]["reason"] == "ParentEnded"
    else:
        child_run = await stack.wait_for("arun", f"{child_name}-t1", phase("Cancelled"), timeout=60)
        assert child_run["spec"]["cancel"] is True


async def test_a_delegate_call_past_the_depth_limit_is_refused(local: tuple) -> None:
    stack, _ = local
    name = unique("z")
    async with configured(stack, delegationMaxDepth=1):
        await start_turn(stack, name, "replay/delegate-deep", f"deep {name}")
        run = await stack.wait_for("arun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=120)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    [middle] = await children_of(stack, f"{name}-t1")
    assert await children_of(stack, f"{middle['metadata']['name']}-t1") == []
    refused = [msg["content"] for r in await stack.replay_requests("delegate-deep") if r.get("branch") == 0
               for msg in r["messages"] if msg.get("role") == "tool"]
    assert any("may be at most 1 level(s) deep" in text for text in refused), refused


async def test_a_resume_takes_a_slot_of_the_tree_like_a_claim(local: tuple) -> None:
    """Bound 1: while another turn of the tree holds the slot, answering a child's question
    does not start a second running turn: the resume is held back until the slot is free."""
    stack, _ = local
    runner = stack.pod_runner
    name = unique("b")
    await stack.apply(m.agent("delegate-target", systemPrompt="You review rollout plans.",
                              model="replay/delegate-target"))
    held_job = None
    async with configured(stack, delegationConcurrency=1):
        try:
            await start_turn(stack, name, "replay/delegate-pair", f"pair {name}", approvalMode="AlwaysTrust")

            def reviewer_asks_and_slowpoke_answered(run: dict[str, Any]) -> bool:
                children = {c["name"]: c for c in (run.get("status") or {}).get("children") or []}
                return bool(children.get("reviewer", {}).get("waitingAt")) and \
                    children.get("slowpoke", {}).get("phase") == "Succeeded"

            run = await stack.wait_for("arun", f"{name}-t1", reviewer_asks_and_slowpoke_answered, timeout=90)
            children = {c["name"]: c["session"] for c in run["status"]["children"]}
            reviewer, slowpoke = children["reviewer"], children["slowpoke"]
            # A user talks to the finished child: its new turn (kept Pending) is the tree's one slot.
            held_job = f"{slowpoke}-t2"
            await asyncio.to_thread(runner.hold, held_job)
            await stack.apply(m.message(f"{name}-more", slowpoke, "Anything else?", delivery="FollowUp"))
            await stack.wait_for("arun", f"{slowpoke}-t2", lambda r: (r.get("status") or {}).get("segments"))
            waitpoint = (await stack.get("arun", f"{reviewer}-t1"))["status"]["waitpoint"]
            await stack.apply(m.resume(f"{name}-answer", reviewer, f"{reviewer}-t1", waitpoint["id"],
                                       answers=["canary"]))
            held = await stack.wait_for("arun", f"{reviewer}-t1", lambda r: (r.get("status") or {}).get("heldBack"),
                                        timeout=30)
            assert held["status"]["phase"] == "Waiting" and len(held["status"]["segments"]) == 1
            assert held["status"]["heldBack"] == (f'delegation tree "{name}" runs 1 turns (bound 1): '
                                                  "waiting for one to finish")
            await asyncio.to_thread(runner.unhold, held_job)
            held_job = None
            run = await stack.wait_for("arun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=120)
        finally:
            if held_job:
                await asyncio.to_thread(runner.unhold, held_job)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert run["status"]["result"]["text"] == "Both children answered."
    done = await stack.get("arun", f"{reviewer}-t1")
    assert done["status"]["result"]["text"] == "Reviewed: the plan is sound." and not done["status"].get("heldBack")
    assert (await stack.get("arun", f"{slowpoke}-t2"))["status"]["result"]["text"] == "Still here."


async def test_a_delegation_resume_that_never_started_is_retried_with_the_outcomes(local: tuple) -> None:
    stack, _ = local
    runner = stack.pod_runner
    name = unique("r")
    async with configured(stack, worker={"startTimeoutSeconds": 10}):
        await asyncio.to_thread(runner.hold, f"{name}-t1-2")  # the Resume segment's Job never gets a pod
        try:
            await start_turn(stack, name, "replay/delegate", f"again {name}")
            run = await stack.wait_for("arun", f"{name}-t1", lambda r: len((r.get("status") or {}).get("segments")
                                                                           or []) >= 3, timeout=120)
        finally:
            await asyncio.to_thread(runner.unhold, f"{name}-t1-2")
    # The worker writes the phase; the operator records the segment's outcome once its Job completes.
    run = await stack.wait_for("arun", f"{name}-t1", lambda r: phase("Succeeded", "Failed")(r) and (
        r["status"]["segments"][-1].get("outcome")), timeout=90)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert [(s["kind"], s["outcome"]) for s in run["status"]["segments"]] == [
        ("Start", "Waiting"), ("Resume", "NotStarted"), ("Retry", "Succeeded")]
    assert run["status"]["result"]["text"] == "The researcher summarized the release notes for you."
    assert len(await children_of(stack, f"{name}-t1")) == 1

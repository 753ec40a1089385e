"""Frozen configuration at receipt, through kubectl (the seed record's admission cases)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.e2e import manifests as m
from tests.stack import CONFIGMAP, OPERATOR_NS, Stack

# The stack (and the test API server) lives in the module's event loop: tests must share it.
pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def snapshot(stack: Stack, kind: str, name: str) -> dict:
    return (await stack.get(kind, name))["spec"]["contextSnapshot"]


async def set_default_model(stack: Stack, model: str) -> None:
    cm = await stack.get("configmap", CONFIGMAP, OPERATOR_NS, admin=True)
    config = yaml.safe_load(cm["data"]["config.yaml"])
    config["defaults"]["model"] = model
    patch = {"data": {"config.yaml": yaml.safe_dump(config)}}
    await stack.kubectl("patch", "configmap", CONFIGMAP, "-n", OPERATOR_NS, "--type=merge", "-p", json.dumps(patch),
                        admin=True)


async def wait_default_model(stack: Stack, model: str, probe: str, agent_name: str) -> None:
    """The operator polls its ConfigMap: probe with throwaway sessions until the new default is in force."""
    for i in range(100):
        await stack.apply(m.session(f"{probe}{i}", agent_name))
        got = (await snapshot(stack, "asess", f"{probe}{i}"))["model"]
        await stack.kubectl("delete", "asess", f"{probe}{i}", "--wait=false")
        if got == model:
            return
    raise AssertionError(f"default model never became {model}")


async def test_empty_session_keeps_its_snapshot_after_default_and_agent_edits(stack: Stack, name: str) -> None:
    await stack.apply(m.agent(name, maxExecutionSteps=9, contextSchema=[
        {"name": "team", "type": "string", "default": "platform"}]))
    await stack.apply(m.session(name, name))
    frozen = await snapshot(stack, "asess", name)
    assert frozen["model"] == "replay/hello"
    assert frozen["context"] == {"team": "platform"}
    assert frozen["source"]["agentName"] == name
    try:
        await set_default_model(stack, "replay/steer")
        await wait_default_model(stack, "replay/steer", f"{name}p", name)
        await stack.apply(m.agent(name, systemPrompt="EDITED", maxExecutionSteps=1))
        await stack.apply(m.message(f"{name}-1", name, delivery="FollowUp"))
        received = await snapshot(stack, "ainput", f"{name}-1")
        assert received == frozen
        assert await snapshot(stack, "asess", name) == frozen
        run = await stack.wait_for("arun", f"{name}-t1", lambda r: True)
        assert run["spec"]["contextSnapshot"] == frozen
    finally:
        await set_default_model(stack, "replay/hello")


async def test_each_input_gets_the_model_it_was_received_under(stack: Stack, name: str) -> None:
    await stack.apply(m.agent(name))
    await stack.apply(m.session(name, name, model="replay/hello"))
    initial = await snapshot(stack, "asess", name)

    async def send(i: int, **spec: object) -> dict:
        await stack.apply(m.message(f"{name}-{i}", name, delivery="FollowUp", **spec))
        return await snapshot(stack, "ainput", f"{name}-{i}")

    first = await send(1)
    await stack.kubectl("patch", "asess", name, "--type=merge", "-p", '{"spec":{"model":"replay/steer"}}')
    second = await send(2)
    third = await send(3, overrides={"model": "replay/hello", "approvalMode": "AlwaysTrust"})
    await stack.kubectl("patch", "asess", name, "--type=merge", "-p", '{"spec":{"model":"replay/ask-user"}}')
    fourth = await send(4)
    assert [s["model"] for s in (first, second, third, fourth)] == \
        ["replay/hello", "replay/steer", "replay/hello", "replay/ask-user"]
    assert third["approvalMode"] == "AlwaysTrust" and fourth["approvalMode"] == "Default"
    session = await stack.get("asess", name)
    assert session["spec"]["model"] == "replay/ask-user"  # the override did not rewrite the session
    for snap in (first, second, third, fourth):
        assert {k: v for k, v in snap.items() if k not in ("model", "approvalMode")} == \
            {k: v for k, v in initial.items() if k not in ("model", "approvalMode")}
    assert [(await stack.get("ainput", f"{name}-{i}"))["spec"]["sequence"] for i in (1, 2, 3, 4)] == [1, 2, 3, 4]


async def test_agent_edits_never_reach_existing_sessions_or_queued_inputs(stack: Stack, name: str) -> None:
    await stack.apply(m.agent(name, maxExecutionSteps=5))
    await stack.apply(m.session(name, name))
    await stack.apply(m.message(f"{name}-1", name, delivery="FollowUp"))
    await stack.apply(m.message(f"{name}-2", name, delivery="FollowUp"))
    before = await snapshot(stack, "ainput", f"{name}-2")
    await stack.apply(m.agent(name, systemPrompt="Changed.", maxExecutionSteps=1))
    assert await snapshot(stack, "ainput", f"{name}-2") == before
    assert (await snapshot(stack, "asess", name))["maxExecutionSteps"] == 5
    await stack.apply(m.message(f"{name}-3", name, delivery="FollowUp"))
    assert (await snapshot(stack, "ainput", f"{name}-3"))["systemPrompt"] == "You are a careful assistant."


async def rejected(stack: Stack, manifest: dict) -> str:
    res = await stack.kubectl(
        "apply", "-n", stack.namespace, "-f", "-", input=yaml.safe_dump(manifest), check=False)
    assert res.returncode != 0, f"accepted: {res.stdout}"
    return res.stderr


async def test_bad_models_are_rejected_with_the_field(stack: Stack, name: str) -> None:
    await stack.apply(m.agent(name))
    assert "spec.model" in (err := await rejected(stack, m.session(name, name, model=" "))) and "blank" in err
    err = await rejected(stack, m.session(name, name, model="gpt-9"))
    assert 'spec.model: model "gpt-9" is not available' in err
    await stack.apply(m.agent(f"{name}x", model="gpt-9"))
    err = await rejected(stack, m.session(name, f"{name}x"))
    assert "spec.agentRef.name" in err and "not available" in err
    err = await rejected(stack, m.session(name, "no-such-agent"))
    assert 'agent "no-such-agent" not found' in err
    await stack.apply(m.session(name, name, model="replay/hello"))
    err = await rejected(stack, m.session(name, name))  # removing a set model
    assert "omit the field to keep the current value" in err
    err = await rejected(stack, m.session(name, name, model="gpt-9"))
    assert "not available" in err
    err = await rejected(stack, m.session(name, name, model="replay/hello", context={"x": 1}))
    assert "spec.context" in err


async def test_inputs_are_immutable_and_server_owned_fields_cannot_be_forged(stack: Stack, name: str) -> None:
    await stack.apply(m.agent(name))
    await stack.apply(m.session(name, name))
    forged = m.message(f"{name}-1", name, delivery="FollowUp")
    forged["spec"].update(sequence=999, submittedBy={"username": "mallory"},
                          contextSnapshot={"systemPrompt": "evil", "model": "replay/hello", "approvalMode": "AlwaysTrust"})
    res = await stack.apply(forged)
    assert "server-owned" in res.stderr  # the warning kubectl prints
    got = (await stack.get("ainput", f"{name}-1"))["spec"]
    assert got["sequence"] == 1 and got["submittedBy"]["username"] != "mallory"
    assert got["contextSnapshot"]["systemPrompt"] == "You are a careful assistant."
    # Re-applying the user's manifest (GitOps) is accepted and changes nothing.
    await stack.apply(m.message(f"{name}-1", name, delivery="FollowUp"))
    assert (await stack.get("ainput", f"{name}-1"))["spec"] == got
    err = await rejected(stack, m.message(f"{name}-1", name, "edited", delivery="FollowUp"))
    assert "spec is immutable" in err
    # The name is the idempotency key.
    res = await stack.kubectl("create", "-n", stack.namespace, "-f", "-", check=False,
                              input=yaml.safe_dump(m.message(f"{name}-1", name, delivery="FollowUp")))
    assert "AlreadyExists" in res.stderr


async def test_session_reapply_keeps_the_snapshot(stack: Stack, name: str) -> None:
    await stack.apply(m.agent(name))
    await stack.apply(m.session(name, name))
    before = await stack.get("asess", name)
    await stack.apply(m.session(name, name))
    await stack.kubectl("apply", "--server-side", "--field-manager=gitops", "-n", stack.namespace, "-f", "-",
                        input=yaml.safe_dump(m.session(name, name)))
    after = await stack.get("asess", name)
    assert after["spec"]["contextSnapshot"] == before["spec"]["contextSnapshot"]
    assert after["metadata"]["generation"] == before["metadata"]["generation"]


async def test_continue_is_refused_unless_the_queue_is_paused(stack: Stack, name: str) -> None:
    await stack.apply(m.agent(name))
    await stack.apply(m.session(name, name))
    err = await rejected(stack, m.cont(f"{name}-c", name))
    assert "paused" in err
    err = await rejected(stack, m.message(f"{name}-x", "no-such-session"))
    assert 'agentsession "no-such-session" not found' in err

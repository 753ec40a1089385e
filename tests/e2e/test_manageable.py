"""Every accepted object stays manageable, through the real kubectl (issue 14, items 2-4):
re-applying a manifest changes nothing; objects at the size limits can be labelled, annotated,
updated through their allowed fields and deleted; the frozen snapshot is stored once."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from sessionops.api import limits
from tests.e2e import manifests as m
from tests.stack import ROOT, Stack

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


def user_manifests() -> dict[str, str]:
    """Name -> text of ``examples/*.yaml`` (not the replay scenarios) and of every complete
    Kubernetes manifest (each document has apiVersion and kind) in a YAML block of ``docs/``."""
    found = {p.name: p.read_text() for p in sorted((ROOT / "examples").glob("*.yaml"))}
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for i, block in enumerate(re.findall(r"```ya?ml\n(.*?)```", doc.read_text(), re.S)):
            objects = [o for o in yaml.safe_load_all(block) if isinstance(o, dict)]
            if objects and all("apiVersion" in o and "kind" in o for o in objects):
                found[f"{doc.name} block {i}"] = block
    return found


def stored_size(obj: dict) -> int:
    """Bytes of the object as the API server stores it (but managedFields, which kubectl hides)."""
    return limits.json_size(obj)


async def live(stack: Stack, text: str) -> list[dict]:
    """The objects of a manifest as stored, with their managedFields."""
    out = await stack.kubectl("get", "-f", "-", "-o", "json", "--show-managed-fields", input=text)
    found = json.loads(out.stdout)
    return found["items"] if found.get("kind") == "List" else [found]


async def test_reapplying_every_example_and_doc_manifest_reports_no_change(stack: Stack) -> None:
    manifests = user_manifests()
    assert set(manifests) >= {"01-agent.yaml", "02-session.yaml", "03-input.yaml"}
    for source, text in manifests.items():
        await stack.kubectl("apply", "-f", "-", input=text)
        again = await stack.kubectl("apply", "-f", "-", input=text)
        lines = again.stdout.strip().splitlines()
        assert lines and all(line.endswith(" unchanged") for line in lines), (source, again.stdout)
    for source, text in manifests.items():
        await stack.kubectl("apply", "--server-side", "-f", "-", input=text)
        before = await live(stack, text)
        diff = await stack.kubectl("diff", "--server-side", "-f", "-", input=text, check=False)
        assert diff.returncode == 0, (source, diff.stdout, diff.stderr)
        await stack.kubectl("apply", "--server-side", "-f", "-", input=text)
        after = await live(stack, text)
        for old, new in zip(before, after, strict=True):
            assert (new["metadata"]["generation"], new["spec"]) == (old["metadata"]["generation"], old["spec"])
            # The user's own entries; the operator's status entries move with the turn the input started.
            assert _spec_fields(new) == _spec_fields(old), source


def _spec_fields(obj: dict) -> list[dict]:
    return [f for f in obj["metadata"]["managedFields"] if f.get("subresource") != "status"]


async def test_the_frozen_snapshot_is_stored_once(stack: Stack, name: str) -> None:
    prompt = "PROMPT-MARK " + "p" * 20_000
    await stack.apply(m.agent(name, systemPrompt=prompt, contextSchema=[{"name": "notes", "type": "string"}]))
    # Created, not applied: kubectl apply would keep a third copy of spec.context in its annotation.
    await stack.kubectl("create", "-f", "-", input=json.dumps(
        m.session(name, name, model="replay/hello", context={"notes": "CONTEXT-MARK " + "c" * 10_000})))
    session = await stack.wait_for("asess", name, lambda s: (s.get("status") or {}).get("phase") == "Idle")
    text, size = json.dumps(session), stored_size(session)
    print(f"\nstored AgentSession: {size} bytes (system prompt {len(prompt)}, context value 10,013)")
    # Once in spec.contextSnapshot; the context also in spec.context, where the user wrote it.
    assert (text.count("PROMPT-MARK"), text.count("CONTEXT-MARK")) == (1, 2)
    # kopf keeps no diff base (nor anything else) on sessions: no third copy of the snapshot.
    assert "kopf" not in session["status"]
    assert size < len(prompt) + 2 * 10_000 + 8 * 1024, size


async def big_session(stack: Stack, name: str) -> dict:
    """A session at the limits: a system prompt and context values of the largest accepted size."""
    prompt = "é" * limits.SYSTEM_PROMPT_CHARS  # 2 bytes a character: exactly SYSTEM_PROMPT_BYTES
    first = "a" * limits.CONTEXT_VALUE_CHARS
    second = "b" * (limits.CONTEXT_BYTES - limits.json_size({"first": first, "second": ""}))
    await stack.kubectl("create", "-f", "-", input=json.dumps(m.agent(name, systemPrompt=prompt, contextSchema=[
        {"name": "first", "type": "string"}, {"name": "second", "type": "string"}])))
    await stack.kubectl("create", "-f", "-", input=json.dumps(
        m.session(name, name, model="replay/hello", context={"first": first, "second": second})))
    return await stack.get("asess", name)


async def manage(stack: Stack, kind: str, name: str) -> None:
    """What every object must allow: a label, an annotation."""
    await stack.kubectl("label", kind, name, "team=a")
    await stack.kubectl("annotate", kind, name, "note=kept")
    obj = await stack.get(kind, name)
    assert (obj["metadata"]["labels"]["team"], obj["metadata"]["annotations"]["note"]) == ("a", "kept")


async def gone(stack: Stack, kind: str, name: str, timeout: float = 60) -> None:
    await stack.kubectl("wait", "--for=delete", f"{kind}/{name}", f"--timeout={int(timeout)}s")


async def test_an_input_at_the_limits_can_be_labelled_annotated_and_deleted(stack: Stack, name: str) -> None:
    session = await big_session(stack, name)
    text = ["x" * limits.MESSAGE_CHARS] * limits.MESSAGES  # 640 KiB: the documented maximum
    created = await stack.kubectl("create", "-f", "-", input=json.dumps(
        m.message(f"{name}-1", name, delivery="FollowUp") | {"spec": {
            "sessionRef": {"name": name}, "delivery": "FollowUp", "messages": [{"content": t} for t in text]}}))
    assert "created" in created.stdout
    received = await stack.get("ainput", f"{name}-1")
    size = stored_size(received)
    session = await stack.wait_for("asess", name, lambda s: (s.get("status") or {}).get("phase") == "Idle")
    print(f"\nstored AgentInput at the limits: {size} bytes; its session: {stored_size(session)} bytes")
    assert size < 1536 * 1024 - 256 * 1024 - 64 * 1024  # room left for 256 KiB of annotations
    await manage(stack, "ainput", f"{name}-1")
    await stack.kubectl("delete", "ainput", f"{name}-1", "--wait=false")
    await gone(stack, "ainput", f"{name}-1")
    await stack.wait_for("asess", name, lambda s: ((s.get("status") or {}).get("queue") or {}).get("pending") == 0)


async def test_a_session_at_the_limits_can_be_updated_and_deleted(stack: Stack, name: str) -> None:
    session = await big_session(stack, name)
    assert session["spec"]["contextSnapshot"]["model"] == "replay/hello"
    await manage(stack, "asess", name)
    await stack.kubectl("patch", "asess", name, "--type=merge", "-p", '{"spec":{"model":"replay/steer"}}')
    assert (await stack.get("asess", name))["spec"]["contextSnapshot"]["model"] == "replay/steer"
    await stack.kubectl("delete", "asess", name, "--wait=false")
    await gone(stack, "asess", name)


async def test_an_agent_at_the_limits_can_be_updated_and_deleted(stack: Stack, name: str) -> None:
    """An update's review carries the Agent twice (over 1 MiB here): the webhook reads it."""
    spec: dict = {"systemPrompt": "é" * limits.SYSTEM_PROMPT_CHARS, "contextSchema": []}
    while True:
        field = {"name": f"f{len(spec['contextSchema'])}", "type": "string",
                 "enum": ["x" * limits.CONTEXT_VALUE_CHARS]}
        grown = {**spec, "contextSchema": [*spec["contextSchema"], field]}
        if limits.json_size(grown) > limits.AGENT_SPEC_BYTES:
            break
        spec = grown
    assert limits.json_size(spec) > limits.AGENT_SPEC_BYTES - limits.CONTEXT_VALUE_CHARS - 64
    await stack.kubectl("create", "-f", "-", input=json.dumps(m.agent(name, **spec)))
    await manage(stack, "agent", name)
    patch = stack.root / f"{name}-patch.json"
    patch.write_text(json.dumps({"spec": {"systemPrompt": "ü" * limits.SYSTEM_PROMPT_CHARS}}))
    await stack.kubectl("patch", "agent", name, "--type=merge", "--patch-file", str(patch))
    assert (await stack.get("agent", name))["spec"]["systemPrompt"][0] == "ü"
    await stack.kubectl("delete", "agent", name, "--wait=false")
    await gone(stack, "agent", name)


async def refusal(stack: Stack, manifest: dict) -> str:
    res = await stack.kubectl("create", "-f", "-", input=json.dumps(manifest), check=False)
    assert res.returncode != 0, f"accepted: {res.stdout}"
    return res.stderr


async def test_oversize_and_blank_content_is_refused_naming_the_field(stack: Stack, name: str) -> None:
    await stack.apply(m.agent(name, contextSchema=[{"name": "notes", "type": "string"}]))
    err = await refusal(stack, m.session(f"{name}x", name, context={"notes": "n" * 300_000}))
    assert "spec.context.notes: Too long: may have at most 32768 characters" in err
    await stack.apply(m.session(name, name, model="replay/hello"))
    err = await refusal(stack, m.message(f"{name}-1", name, " \n\t "))
    assert "spec.messages[0].content: must not be blank (whitespace only)" in err
    err = await refusal(stack, m.resume(f"{name}-2", name, f"{name}-t1", "w1", answers=["a" * 500_000]))
    assert "spec.answers: Too long: an answer may have at most 32768 characters" in err
    err = await refusal(stack, m.message(f"{name}-3", name, "é" * limits.MESSAGE_CHARS) | {"spec": {
        "sessionRef": {"name": name}, "messages": [{"content": "é" * limits.MESSAGE_CHARS}] * 11}})
    assert "spec.messages: Too long: 720896 bytes as stored (the messages), more than the 655360 allowed" in err

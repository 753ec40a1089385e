"""Operator logs name the object of every handler failure and retry (kind, namespace/name,
uid), read from the operator's own JSON log output."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import kmock
import pytest

from sessionops import GROUP, VERSION
from tests.e2e import manifests as m

pytestmark = pytest.mark.asyncio(loop_scope="module")


def log_entries(stack: Any) -> list[dict[str, Any]]:
    lines = (stack.root / "operator.log").read_text(errors="replace").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


async def test_a_failing_handler_names_its_object_in_the_json_log(local: tuple) -> None:
    stack, cluster = local
    name = f"l{uuid.uuid4().hex[:6]}"
    await stack.apply(m.agent(name))
    await stack.apply(m.session(name, name, model="replay/hello"))
    await stack.apply(m.message(f"{name}-1", name, "hi", delivery="FollowUp"))
    inp = await stack.wait_for("ainput", f"{name}-1", lambda i: (i.get("status") or {}).get("phase") == "Consumed")
    # The session controller's read of this one session fails from now on: its handlers fail.
    cluster["get", kmock.resource(GROUP, VERSION, "agentsessions"), kmock.name(name)] << 500
    await stack.kubectl("label", "ainput", f"{name}-1", "poke=1")
    deadline = time.monotonic() + 30
    while True:
        failures = [e for e in log_entries(stack) if e["logger"] == "kopf.objects" and e["level"] == "ERROR"
                    and "input_changed" in e["message"] and "failed" in e["message"]
                    and (e.get("object") or {}).get("name") == f"{name}-1"]
        if failures:
            break
        assert time.monotonic() < deadline, "\n".join(stack.operator_log(20).splitlines())
        await asyncio.sleep(0.2)
    entry = failures[0]
    assert entry["object"] == {"apiVersion": f"{GROUP}/{VERSION}", "kind": "AgentInput",
                               "namespace": stack.namespace, "name": f"{name}-1", "uid": inp["metadata"]["uid"]}
    assert (entry["namespace"], entry["name"]) == (stack.namespace, f"{name}-1") and "exception" in entry

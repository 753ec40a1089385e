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
    # Only complete lines: the operator may be halfway through writing a long one (a traceback
    # goes out in more than one write).
    *lines, _partial = (stack.root / "operator.log").read_text(errors="replace").split("\n")
    return [json.loads(line) for line in lines if line.startswith("{")]


async def test_a_failing_handler_names_its_object_in_the_json_log(local: tuple) -> None:
    stack, cluster = local
    name = f"l{uuid.uuid4().hex[:6]}"
    await stack.apply(m.agent(name))
    await stack.apply(m.session(name, name, model="replay/hello"))
    await stack.apply(m.message(f"{name}-1", name, "hi", delivery="FollowUp"))
    await stack.wait_for("arun", f"{name}-t1", lambda r: (r.get("status") or {}).get("phase") == "Succeeded",
                         timeout=60)
    # The session controller's claim of the next turn fails from now on: its handlers fail (the
    # passes read from the operator's store, so the failure is injected at the write).
    cluster["post", kmock.resource(GROUP, VERSION, "agentruns")] << 500
    await stack.apply(m.message(f"{name}-2", name, "again", delivery="FollowUp"))
    inp = await stack.wait_for("ainput", f"{name}-2", lambda i: True)
    deadline = time.monotonic() + 30
    while True:
        # Each change of the input is an event whose pass tries the claim again.
        await stack.kubectl("label", "--overwrite", "ainput", f"{name}-2", f"poke={time.monotonic_ns()}")
        failures = [e for e in log_entries(stack) if e["logger"] == "kopf.objects" and e["level"] == "ERROR"
                    and "input_changed" in e["message"] and "failed" in e["message"]
                    and (e.get("object") or {}).get("name") == f"{name}-2"]
        if failures:
            break
        assert time.monotonic() < deadline, "\n".join(stack.operator_log(20).splitlines())
        await asyncio.sleep(0.5)
    entry = failures[0]
    assert entry["object"] == {"apiVersion": f"{GROUP}/{VERSION}", "kind": "AgentInput",
                               "namespace": stack.namespace, "name": f"{name}-2", "uid": inp["metadata"]["uid"]}
    assert (entry["namespace"], entry["name"]) == (stack.namespace, f"{name}-2") and "exception" in entry

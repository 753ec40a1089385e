"""The decision store: watch events and the operator's own writes, newest wins, slim and shared."""

from __future__ import annotations

import copy
import json
import tracemalloc
from typing import Any

import pytest

from sessionops.api.names import SESSION_LABEL
from sessionops.manager.main import decision_store
from sessionops.platform.store import LAST_APPLIED, Store

SNAPSHOT = {"systemPrompt": "be brief", "model": "replay/hello", "approvalMode": "Default",
            "source": {"agentName": "a"}}


def obj(name: str, rv: int, *, session: str = "s", phase: str | None = None, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "sessionops.dev/v1alpha1", "kind": "AgentInput",
            "metadata": {"name": name, "namespace": "team-a", "resourceVersion": str(rv), "uid": f"u-{name}",
                         "labels": {SESSION_LABEL: session}, **meta},
            "spec": {"sessionRef": {"name": session}, "contextSnapshot": copy.deepcopy(SNAPSHOT)},
            "status": {"phase": phase} if phase else {}}


def store() -> Store:
    return decision_store()


def test_an_older_event_never_replaces_our_newer_write() -> None:
    s = store()
    s.see("agentinputs", obj("i1", 5, phase="Consumed"))  # our status write's response
    s.see("agentinputs", obj("i1", 4, phase="Pending"))  # the watch delivering the creation late
    assert s.get("agentinputs", "team-a", "i1")["status"]["phase"] == "Consumed"
    s.see("agentinputs", obj("i1", 6, phase="Rejected"))
    assert s.get("agentinputs", "team-a", "i1")["status"]["phase"] == "Rejected"


def test_a_version_that_is_not_a_number_is_never_compared() -> None:
    s = store()
    s.see("agentinputs", obj("i1", 5, phase="Consumed"))
    opaque = obj("i1", 0, phase="Pending")
    opaque["metadata"]["resourceVersion"] = "opaque-token"
    s.see("agentinputs", opaque)
    assert s.get("agentinputs", "team-a", "i1")["status"]["phase"] == "Pending"


def test_lists_by_label_follow_relabels_and_deletions() -> None:
    s = store()
    s.see("agentinputs", obj("i1", 1, session="a"))
    s.see("agentinputs", obj("i2", 2, session="a"))
    s.see("agentinputs", obj("i3", 3, session="b"))
    assert [i["metadata"]["name"] for i in s.list("agentinputs", "team-a", f"{SESSION_LABEL}=a")] == ["i1", "i2"]
    s.see("agentinputs", obj("i2", 4, session="b"))
    assert [i["metadata"]["name"] for i in s.list("agentinputs", "team-a", f"{SESSION_LABEL}=b")] == ["i2", "i3"]
    s.forget("agentinputs", obj("i3", 5, session="b"))
    assert [i["metadata"]["name"] for i in s.list("agentinputs", "team-a", f"{SESSION_LABEL}=b")] == ["i2"]
    assert s.list("agentinputs", "other", f"{SESSION_LABEL}=a") == []
    assert s.count("agentinputs") == 2


def test_only_simple_selectors_on_indexed_labels_are_answered_from_memory() -> None:
    s = store()
    assert s.answers("agentinputs", f"{SESSION_LABEL}=a")
    assert not s.answers("agentinputs", "app=x")  # not indexed: read from the API server
    assert not s.answers("agentinputs", f"{SESSION_LABEL}=a,app=x")
    assert not s.answers("agentinputs", f"{SESSION_LABEL}!=a")
    assert not s.answers("agenttranscripts", "")  # not kept at all


def test_stored_objects_are_slim_and_snapshots_are_shared() -> None:
    s = store()
    first = obj("i1", 1, managedFields=[{"manager": "kubectl"}], annotations={LAST_APPLIED: "{...}", "keep": "me"})
    s.see("agentinputs", first)
    s.see("agentinputs", obj("i2", 2))
    i1, i2 = s.get("agentinputs", "team-a", "i1"), s.get("agentinputs", "team-a", "i2")
    assert "managedFields" not in i1["metadata"] and i1["metadata"]["annotations"] == {"keep": "me"}
    assert "managedFields" in first["metadata"]  # the watched body is left as it was
    assert i1["spec"]["contextSnapshot"] is i2["spec"]["contextSnapshot"] == SNAPSHOT
    assert s.snapshots == 1
    s.forget("agentinputs", i1)
    s.forget("agentinputs", i2)
    assert s.snapshots == 0  # the last holder took the shared copy with it


def test_a_shared_snapshot_costs_each_holder_a_small_key_not_a_copy_of_its_text() -> None:
    big = {**SNAPSHOT, "systemPrompt": "x" * 20_000}
    s = store()
    inputs = []
    for n in range(200):
        i = obj(f"i{n}", n + 1)
        i["spec"]["contextSnapshot"] = json.loads(json.dumps(big))  # each watch event parses its own copy
        inputs.append(i)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in inputs:
            s.see("agentinputs", i)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert s.snapshots == 1
    assert held < 200 * 2_000, held  # a copy of the text per input would be 200 x 20 KB


@pytest.mark.parametrize("plural", ["pods", "jobs"])
def test_pods_and_jobs_keep_their_status_not_their_spec(plural: str) -> None:
    s = store()
    thing = {"metadata": {"name": "p", "namespace": "team-a", "resourceVersion": "3", "labels": {"job-name": "j"}},
             "spec": {"template": {"spec": {"containers": [{"name": "worker"}]}}}, "status": {"ready": 1}}
    s.see(plural, thing)
    stored = s.get(plural, "team-a", "p")
    assert stored.keys() == {"metadata", "status"} and stored["status"] == {"ready": 1}
    assert "spec" in thing  # the watched body is left as it was


def test_kinds_not_tracked_are_ignored() -> None:
    s = store()
    s.see("agenttranscripts", obj("t", 1))
    assert not s.tracks("agenttranscripts") and s.count("agenttranscripts") == 0


def test_a_stored_object_costs_less_than_the_event_it_came_from() -> None:
    """Keys and short strings are shared between stored objects (each parsed event has its own
    copies of them): with 10,000 sessions and 50,000 inputs that is hundreds of megabytes."""
    texts = []
    for n in range(1000):
        i = obj(f"input-{n}", n + 1, phase="Pending")
        i["status"]["conditions"] = [{"type": t, "status": "False", "reason": "Pending", "message": "",
                                      "lastTransitionTime": "2026-12-04T08:31:57Z", "observedGeneration": 1}
                                     for t in ("Succeeded", "Failed", "Ready")]
        texts.append(json.dumps(i))

    def traced(build: Any) -> int:
        tracemalloc.start()
        try:
            kept = build()
            return tracemalloc.get_traced_memory()[0] if kept is not None else 0
        finally:
            tracemalloc.stop()

    parsed = traced(lambda: [json.loads(t) for t in texts])

    def stored() -> Store:
        s = store()
        for t in texts:
            s.see("agentinputs", json.loads(t))
        return s
    held = traced(stored)
    assert held < 0.75 * parsed, (held, parsed)


def test_updates_of_an_input_keep_one_shared_snapshot_and_its_count_balanced(monkeypatch: pytest.MonkeyPatch) -> None:
    s = store()
    s.see("agentinputs", obj("i1", 1))
    digests: list[Any] = []
    original = json.dumps
    monkeypatch.setattr(json, "dumps", lambda *a, **k: digests.append(1) or original(*a, **k))
    for rv, phase in ((2, "Pending"), (3, "Consumed")):
        s.see("agentinputs", obj("i1", rv, phase=phase))
    assert digests == []  # the snapshot of the same input is not serialized again
    assert s.snapshots == 1 and s.get("agentinputs", "team-a", "i1")["status"]["phase"] == "Consumed"
    s.forget("agentinputs", obj("i1", 4))
    assert s.snapshots == 0

"""Who may write status (sessionops.admission.status) and the worker-pod cache behind it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sessionops.admission.errors import Rejection
from sessionops.admission.status import Pod, Policy, bound_pod, changed_fields, check, operator_username
from sessionops.admission.worker_pods import WorkerPods

OPERATOR = operator_username("sessionops-system", "sessionops")
POLICY = Policy(operator=OPERATOR)
WORKER = "system:serviceaccount:team-a:sessionops-worker"
POD = Pod(namespace="team-a", name="s-t1-1-abcde", uid="u1", run="s-t1", session="s")


def worker(pod: str = POD.name, uid: str = "u1") -> dict[str, Any]:
    return {"username": WORKER, "groups": ["system:serviceaccounts"],
            "extra": {"authentication.kubernetes.io/pod-name": [pod], "authentication.kubernetes.io/pod-uid": [uid]}}


def obj(name: str, status: dict[str, Any] | None, session: str = "s", namespace: str = "team-a") -> dict[str, Any]:
    result: dict[str, Any] = {"metadata": {"name": name, "namespace": namespace},
                              "spec": {"sessionRef": {"name": session}}}
    if status is not None:
        result["status"] = status
    return result


def refused(plural: str, user: dict[str, Any], new: dict, old: dict, pod: Pod | None = None) -> str:
    with pytest.raises(Rejection) as e:
        check(plural, user, new, old, POLICY, pod)
    assert e.value.code == 403
    return str(e.value)


def test_changed_fields_name_each_top_level_status_key() -> None:
    old = obj("s", {"lastSequence": 3, "queue": {"paused": False}, "phase": "Idle"})
    new = obj("s", {"lastSequence": 0, "queue": {"paused": True}, "phase": "Idle", "activeRun": "x"})
    assert changed_fields(old, new) == ["status.activeRun", "status.lastSequence", "status.queue"]
    assert changed_fields(old, old) == []


def test_the_operator_writes_anything_and_others_are_refused_naming_the_fields() -> None:
    old, new = obj("s", {"lastSequence": 3}), obj("s", {"lastSequence": 0, "phase": "Idle"})
    assert check("agentsessions", {"username": OPERATOR}, new, old, POLICY, None) is None
    message = refused("agentsessions", {"username": "alice", "groups": ["system:authenticated"]}, new, old)
    assert message.startswith("status.lastSequence, status.phase: alice may not change them:")
    assert "only by the sessionops operator" in message
    # system:masters alone is not the break-glass group.
    assert "kubernetes-admin may not change" in refused(
        "agentsessions", {"username": "kubernetes-admin", "groups": ["system:masters"]}, new, old)
    # A no-op write changes nothing and is allowed.
    assert check("agentsessions", {"username": "alice"}, old, old, POLICY, None) is None
    # The same ServiceAccount name in another namespace is not the operator.
    assert "may not change" in refused("agentsessions", {"username": "system:serviceaccount:x:sessionops"}, new, old)


def test_break_glass_is_allowed_with_a_warning_and_can_be_disabled() -> None:
    old, new = obj("s", {"lastSequence": 3}), obj("s", {"lastSequence": 9})
    admin = {"username": "root", "groups": ["system:masters", "sessionops.dev:status-break-glass"]}
    warning = check("agentsessions", admin, new, old, POLICY, None)
    assert warning and "break-glass status write by root" in warning and "status.lastSequence" in warning
    with pytest.raises(Rejection):
        check("agentsessions", admin, new, old, Policy(operator=OPERATOR, break_glass_group=""), None)


def test_a_worker_writes_its_own_runs_status_only() -> None:
    old, new = obj("s-t1", {"phase": "Running"}), obj("s-t1", {"phase": "Waiting", "waitpoint": {"id": "w"}})
    assert check("agentruns", worker(), new, old, POLICY, POD) is None
    other_old, other_new = obj("s-t2", {"phase": "Running"}), obj("s-t2", {"phase": "Succeeded"})
    assert 'is the worker of agentrun "s-t1", not of "s-t2"' in refused("agentruns", worker(), other_new,
                                                                        other_old, POD)
    elsewhere = obj("s-t1", {"phase": "Waiting"}, namespace="team-b")
    assert 'works in namespace "team-a"' in refused("agentruns", worker(), elsewhere, old, POD)
    assert "never writes session status" in refused("agentsessions", worker(), obj("s", {"lastSequence": 9}),
                                                    obj("s", {"lastSequence": 1}), POD)
    unlabelled = Pod(namespace="team-a", name="p", uid="u", run=None, session=None)
    assert "not a worker of any run" in refused("agentruns", worker(), new, old, unlabelled)
    # A pod-bound token whose pod is gone (or has another uid) proves nothing.
    assert "no longer exists" in refused("agentruns", worker(), new, old, None)


def test_a_worker_claims_pending_inputs_of_its_session_for_its_run() -> None:
    pending = obj("i", {"phase": "Pending"})
    assert check("agentinputs", worker(), obj("i", {"phase": "Consumed", "run": "s-t1"}), pending, POLICY, POD) is None
    assert check("agentinputs", worker(), obj("i", {"phase": "Consumed", "run": "s-t1"}), obj("i", None),
                 POLICY, POD) is None
    for forged, words in [({"phase": "Consumed", "run": "s-t9"}, 'Consumed by its own run "s-t1"'),
                          ({"phase": "Cancelled"}, "Consumed by its own run"),
                          ({"phase": "Consumed", "run": "s-t1", "conditions": []}, "only marks an input Consumed")]:
        assert words in refused("agentinputs", worker(), obj("i", forged), pending, POD)
    settled = obj("i", {"phase": "Cancelled"})
    assert "only a Pending input" in refused("agentinputs", worker(), obj("i", {"phase": "Consumed", "run": "s-t1"}),
                                             settled, POD)
    other_session = obj("i", {"phase": "Consumed", "run": "s-t1"}, session="other")
    assert 'works for session "s", not "other"' in refused("agentinputs", worker(), other_session,
                                                           obj("i", {"phase": "Pending"}, session="other"), POD)


def test_bound_pod_reads_the_tokens_extras() -> None:
    assert bound_pod(worker()) == ("team-a", POD.name, "u1")
    assert bound_pod({"username": "alice", "extra": worker()["extra"]}) is None  # not a ServiceAccount
    assert bound_pod({"username": WORKER}) is None


def test_worker_pods_are_read_once_per_uid() -> None:
    pods = {("team-a", "p1"): {"metadata": {"uid": "u1", "labels": {"sessionops.dev/run": "s-t1",
                                                                     "sessionops.dev/session": "s"}}}}

    async def get_pod(namespace: str, name: str) -> dict[str, Any] | None:
        return pods.get((namespace, name))

    async def scenario() -> None:
        cache = WorkerPods(size=2)
        for _ in range(5):
            found = await cache.lookup(get_pod, "team-a", "p1", "u1")
            assert found == Pod("team-a", "p1", "u1", "s-t1", "s")
        assert cache.reads == 1
        # Another uid under the same name (a recreated pod) is not the cached one; a missing pod is None.
        assert await cache.lookup(get_pod, "team-a", "p1", "u2") is None
        assert await cache.lookup(get_pod, "team-a", "gone", "u3") is None
        assert cache.reads == 3
        pods[("team-a", "p2")] = {"metadata": {"uid": "u4", "labels": {}}}
        pods[("team-a", "p3")] = {"metadata": {"uid": "u5", "labels": {}}}
        await cache.lookup(get_pod, "team-a", "p2", "u4")
        await cache.lookup(get_pod, "team-a", "p3", "u5")
        assert list(cache.pods) == ["u4", "u5"]  # bounded: the oldest went first

    asyncio.run(scenario())

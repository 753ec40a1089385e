"""A worker pod that cannot start: Ready shows the pod's reason at once, a configuration
error fails the run with that reason after the configured wait, without retries."""

from __future__ import annotations

import datetime
from typing import Any

from sessionops.api.conditions import find
from sessionops.execution.segments import NOT_STARTED, PodTrouble, decide

NOW = datetime.datetime(2026, 12, 3, 10, 0, 30, tzinfo=datetime.UTC)
CREATED = "2026-12-03T10:00:00Z"


def run(conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "s1-t1", "namespace": "team-a", "generation": 1, "resourceVersion": "5"},
            "spec": {"sessionRef": {"name": "s1"}, "inputs": ["a"]},
            "status": {"phase": "Pending", "conditions": conditions or [],
                       "segments": [{"name": "s1-t1-1", "kind": "Start", "job": "s1-t1-1", "startedAt": CREATED}]}}


JOB = {"metadata": {"name": "s1-t1-1", "creationTimestamp": CREATED}, "status": {"active": 1, "ready": 0}}


def pod(status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "s1-t1-1-abcde", "creationTimestamp": CREATED}, "status": status}


MISSING_SECRET = pod({"phase": "Pending", "containerStatuses": [{"name": "worker", "state": {"waiting": {
    "reason": "CreateContainerConfigError", "message": 'secret "model-key" not found'}}}]})
UNSCHEDULABLE = pod({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                         "reason": "Unschedulable",
                                                         "message": "0/1 nodes are available"}]})
CREATING = pod({"phase": "Pending", "containerStatuses": [{"name": "worker", "state": {"waiting": {
    "reason": "ContainerCreating"}}}]})


def plan_for(pods: list[dict[str, Any]], at: datetime.datetime = NOW, stored: dict[str, Any] | None = None) -> Any:
    return decide(stored or run(), JOB, [], now=at, max_retries=2, start_timeout_seconds=300,
                  pod_trouble=PodTrouble.of(pods), config_error_seconds=60)


def test_ready_shows_the_kubelets_reason_and_message_before_the_wait_ends() -> None:
    plan = plan_for([MISSING_SECRET])
    ready = find(plan.status["conditions"], "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "CreateContainerConfigError")
    assert 'secret "model-key" not found' in ready["message"] and "s1-t1-1-abcde" in ready["message"]
    assert plan.delete_job is None and plan.start_segment is None and "phase" not in plan.status


def test_the_same_trouble_seen_again_writes_nothing() -> None:
    first = plan_for([MISSING_SECRET])
    stored = run(first.status["conditions"])
    assert plan_for([MISSING_SECRET], NOW + datetime.timedelta(seconds=5), stored).status == {}


def test_a_configuration_error_fails_the_run_with_the_pods_reason_without_a_retry() -> None:
    plan = plan_for([MISSING_SECRET], NOW + datetime.timedelta(seconds=31))
    assert plan.status["phase"] == "Failed" and plan.start_segment is None and plan.delete_job == "s1-t1-1"
    failed = find(plan.status["conditions"], "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "CreateContainerConfigError")
    assert 'secret "model-key" not found' in failed["message"]
    assert plan.status["segments"][-1]["outcome"] == NOT_STARTED
    assert find(plan.status["conditions"], "Ready")["reason"] == "CreateContainerConfigError"


def test_an_unschedulable_pod_is_a_configuration_error_too() -> None:
    assert find(plan_for([UNSCHEDULABLE]).status["conditions"], "Ready")["reason"] == "Unschedulable"
    failed = plan_for([UNSCHEDULABLE], NOW + datetime.timedelta(seconds=31)).status
    assert find(failed["conditions"], "Failed")["reason"] == "Unschedulable"


def test_a_pod_on_its_way_up_is_no_trouble_and_costs_no_write() -> None:
    assert PodTrouble.of([CREATING]) is None
    assert plan_for([CREATING], NOW + datetime.timedelta(seconds=100)).status == {}


def test_an_unknown_waiting_reason_shows_but_waits_for_the_start_timeout() -> None:
    odd = pod({"containerStatuses": [{"name": "worker", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]})
    plan = plan_for([odd], NOW + datetime.timedelta(seconds=100))
    assert "phase" not in plan.status and find(plan.status["conditions"], "Ready")["reason"] == "CrashLoopBackOff"


FAILED_MOUNT = {"type": "Warning", "reason": "FailedMount", "involvedObject": {"kind": "Pod", "name": "s1-t1-1-abcde"},
                "message": 'MountVolume.SetUp failed for volume "model-credential" : secret "model-key" not found'}


def test_a_credential_volume_that_cannot_mount_is_a_configuration_error_named_by_the_kubelets_event() -> None:
    """The container waits in ContainerCreating (normal on its own); the FailedMount Event says why."""
    trouble = PodTrouble.of([CREATING], [FAILED_MOUNT])
    assert trouble is not None and trouble.config_error
    assert (trouble.reason, trouble.message) == ("FailedMount", FAILED_MOUNT["message"])
    ready = find(decide(run(), JOB, [], now=NOW, max_retries=2, start_timeout_seconds=300, pod_trouble=trouble,
                        config_error_seconds=60).status["conditions"], "Ready")
    assert ready["reason"] == "FailedMount" and 'secret "model-key" not found' in ready["message"]
    failed = decide(run(), JOB, [], now=NOW + datetime.timedelta(seconds=31), max_retries=2,
                    start_timeout_seconds=300, pod_trouble=trouble, config_error_seconds=60).status
    assert failed["phase"] == "Failed" and find(failed["conditions"], "Failed")["reason"] == "FailedMount"
    # Without the Event (or for another pod) ContainerCreating is just a pod on its way up.
    assert PodTrouble.of([CREATING]) is None
    assert PodTrouble.of([CREATING], [{**FAILED_MOUNT, "involvedObject": {"name": "other"}}]) is None

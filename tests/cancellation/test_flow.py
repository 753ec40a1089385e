"""The cancellation flow as sentences: Cancelling first, stop, wait for writers, clean, Cancelled."""

from __future__ import annotations

import datetime

from sessionops.cancellation.flow import Execution, completed, decide, failed_step

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
IDLE = Execution(job_exists=False, job_finished=False, pods_running=0, lease_holder=None, lease_expires_at=None)


def run(phase: str | None, cancel: bool = True, segments: list | None = None) -> dict:
    return {"metadata": {"name": "s1-t1"}, "spec": {"cancel": cancel},
            "status": {"phase": phase, "segments": segments if segments is not None else
                       [{"name": "s1-t1-1", "job": "s1-t1-1", "kind": "Start"}]}}


def test_nothing_happens_without_a_request_or_after_the_end() -> None:
    assert decide(run("Running", cancel=False), IDLE, now=NOW) == decide(run("Cancelled"), IDLE, now=NOW)
    for phase in ("Succeeded", "Failed", "Cancelled"):
        plan = decide(run(phase), IDLE, now=NOW)
        assert not plan.status and not plan.run_cleanup and plan.delete_job is None


def test_the_first_step_is_cancelling_and_drops_the_waitpoint() -> None:
    for phase in ("Pending", "Running", "Waiting", None):
        plan = decide(run(phase), IDLE, now=NOW)
        assert plan.status["phase"] == "Cancelling" and plan.status["waitpoint"] is None
        assert plan.status["cancellation"]["requestedAt"] == "2026-12-01T12:00:00Z"
        assert not plan.run_cleanup


def test_a_running_job_is_deleted_and_cleanup_waits() -> None:
    live = Execution(job_exists=True, job_finished=False, pods_running=1, lease_holder="w", lease_expires_at=NOW)
    plan = decide(run("Cancelling"), live, now=NOW)
    assert plan.delete_job == "s1-t1-1" and not plan.run_cleanup and "job" in plan.wait_reason


def test_cleanup_never_races_a_live_pod_or_lease() -> None:
    pods = Execution(job_exists=False, job_finished=False, pods_running=1, lease_holder=None, lease_expires_at=None)
    assert not decide(run("Cancelling"), pods, now=NOW).run_cleanup
    lease = Execution(job_exists=True, job_finished=True, pods_running=0, lease_holder="w",
                      lease_expires_at=NOW + datetime.timedelta(seconds=5))
    plan = decide(run("Cancelling"), lease, now=NOW)
    assert not plan.run_cleanup and "lease" in plan.wait_reason
    expired = Execution(job_exists=True, job_finished=True, pods_running=0, lease_holder="w",
                        lease_expires_at=NOW - datetime.timedelta(seconds=1))
    assert decide(run("Cancelling"), expired, now=NOW).run_cleanup


def test_a_pending_run_without_a_job_goes_straight_to_cleanup() -> None:
    assert decide(run("Cancelling", segments=[]), IDLE, now=NOW).run_cleanup


def test_cancelled_is_written_with_the_steps_and_the_segment_outcome() -> None:
    status = completed(run("Cancelling"), ["1", "2", "3"], now=NOW)
    assert status["phase"] == "Cancelled" and status["cancellation"]["completedSteps"] == ["1", "2", "3"]
    assert status["segments"][-1]["outcome"] == "Cancelled" and status["result"] is None


def test_a_failed_step_names_itself() -> None:
    cond = failed_step({"metadata": {"generation": 1}}, "2", "connection lost", now=NOW)["conditions"][0]
    assert (cond["type"], cond["reason"]) == ("CleanupFailed", "Step2Failed") and "connection lost" in cond["message"]


def test_active_children_are_cancelled_before_the_parent_stops() -> None:
    live = Execution(job_exists=True, job_finished=False, pods_running=1, lease_holder="w", lease_expires_at=NOW)
    plan = decide(run("Cancelling"), live, now=NOW, active_children=2)
    assert plan.wait_reason == "waiting for 2 child turn(s) to be cancelled"
    assert plan.delete_job is None and not plan.run_cleanup and not plan.status
    assert decide(run("Cancelling"), live, now=NOW, active_children=0).delete_job == "s1-t1-1"
    # The request itself is recorded first, children or not.
    assert decide(run("Running"), live, now=NOW, active_children=2).status["phase"] == "Cancelling"

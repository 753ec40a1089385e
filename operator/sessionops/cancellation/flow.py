"""The cancellation flow (pure): request -> Cancelling -> stop execution -> cleanup ->
Cancelled. Each decision is re-derived from the objects, so a retry, a timer pass or
an operator restart continues exactly where the last one stopped."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from sessionops.api import conditions
from sessionops.api.run import TERMINAL_PHASES, RunPhase
from sessionops.api.run_conditions import CLEANUP_FAILED, with_phase
from sessionops.api.timestamps import iso
from sessionops.views import RunView

CANCELLED_OUTCOME = "Cancelled"


@dataclasses.dataclass(frozen=True)
class Execution:
    """Whether anything may still write the thread: the segment Job, its pods, the Lease."""

    job_exists: bool
    job_finished: bool
    pods_running: int
    lease_holder: str | None
    lease_expires_at: datetime.datetime | None


@dataclasses.dataclass
class CancelPlan:
    status: dict[str, Any] = dataclasses.field(default_factory=dict)
    delete_job: str | None = None
    wait_reason: str | None = None  # stop here and come back later
    run_cleanup: bool = False


def lease_live(execution: Execution, now: datetime.datetime) -> bool:
    return bool(execution.lease_holder) and execution.lease_expires_at is not None \
        and execution.lease_expires_at > now


def decide(run: dict[str, Any], execution: Execution, *, now: datetime.datetime,
           active_children: int = 0) -> CancelPlan:
    """``active_children``: child turns of this run's delegations not yet finished."""
    plan = CancelPlan()
    view = RunView(run)
    phase = view.phase
    if not view.cancel_requested or phase == RunPhase.CANCELLED.value:
        return plan
    if phase in TERMINAL_PHASES:
        return plan  # finished before the request was seen: nothing to cancel, and repeating is a no-op
    if phase != RunPhase.CANCELLING.value:
        # Step 1: a cancelling run is never waiting, so no message can be taken for a resume value.
        plan.status = with_phase(run, {"phase": RunPhase.CANCELLING.value, "waitpoint": None,
                                       "cancellation": {"requestedAt": iso(now), "completedSteps": []}}, now)
        return plan
    # Children first: a child must not outlive the turn that awaits it.
    if active_children:
        plan.wait_reason = f"waiting for {active_children} child turn(s) to be cancelled"
        return plan
    last = view.last_segment
    # Step 2: stop execution, and never clean up while a writer may be alive.
    if last is not None and execution.job_exists and not execution.job_finished:
        plan.delete_job = last["job"]
        plan.wait_reason = f'waiting for job "{last["job"]}" to stop'
        return plan
    if execution.pods_running:
        plan.wait_reason = f"waiting for {execution.pods_running} worker pod(s) to stop"
        return plan
    if lease_live(execution, now):
        plan.wait_reason = f'waiting for the session lease held by "{execution.lease_holder}" to be released'
        return plan
    plan.run_cleanup = True
    return plan


def completed(run: dict[str, Any], steps: list[str], *, now: datetime.datetime) -> dict[str, Any]:
    """Step 4: the status after a successful cleanup (written only after it)."""
    view = RunView(run)
    segments = [dict(s) for s in view.segments]
    if segments and segments[-1].get("outcome") is None:
        segments[-1].update(outcome=CANCELLED_OUTCOME, finishedAt=iso(now))
    cancellation = dict(view.cancellation)
    cancellation.update(completedSteps=steps, completedAt=iso(now))
    # A CleanupFailed left by an earlier, failed attempt is resolved now.
    resolved = [conditions.condition(CLEANUP_FAILED, False, "CleanupComplete")] \
        if conditions.find(view.conditions, CLEANUP_FAILED) else []
    return with_phase(run, {"phase": RunPhase.CANCELLED.value, "segments": segments, "cancellation": cancellation,
                            "waitpoint": None, "result": None}, now, reason="CleanupComplete",
                      message=f"checkpoint cleaned ({', '.join(steps) or 'nothing to clean'})", extra=resolved)


def failed_step(run: dict[str, Any], step: str, error: str, *, now: datetime.datetime) -> dict[str, Any]:
    """A failing step leaves the run Cancelling with a condition naming it."""
    failed = conditions.condition(CLEANUP_FAILED, True, f"Step{step}Failed", f"cleanup step {step} failed: {error}")
    return {"conditions": conditions.updated(run, [failed], now)}

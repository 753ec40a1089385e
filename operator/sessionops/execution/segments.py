"""The run controller's decision (pure): which segment Job to start, and what a
finished Job means for the run. The worker writes Running / Waiting / Succeeded /
Failed itself; the operator only reads Job outcomes and decides retries."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from sessionops.api import conditions
from sessionops.api.input import InputKind
from sessionops.api.run import TERMINAL_PHASES, RunPhase, SegmentKind, WaitpointKind
from sessionops.api.run_conditions import READY, with_phase
from sessionops.platform.timestamps import iso
from sessionops.views import InputView, JobView, RunView

# Outcomes of a segment (status.segments[].outcome).
LOST = "Lost"  # the pod died, was evicted or OOM-killed, or exited without a verdict
NOT_STARTED = "NotStarted"  # no pod ran within the start timeout


# Waiting reasons of a container that no retry can cure: the pod's spec or what it
# references is wrong, so a new pod would hit the same wall.
CONFIG_ERRORS = frozenset({"CreateContainerConfigError", "CreateContainerError", "InvalidImageName",
                           "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "Unschedulable",
                           "FailedMount"})
# Waiting reasons of a pod on its way up: normal, not worth a status write.
STARTING = frozenset({"ContainerCreating", "PodInitializing"})


@dataclasses.dataclass(frozen=True)
class PodTrouble:
    """Why the current segment's pod does not run, in the kubelet's or scheduler's words."""

    pod: str
    reason: str
    message: str

    @property
    def config_error(self) -> bool:
        return self.reason in CONFIG_ERRORS

    @classmethod
    def of(cls, pods: list[dict[str, Any]], events: list[dict[str, Any]] = ()) -> PodTrouble | None:  # type: ignore[assignment]
        """The first trouble of the newest pod; None while pods start normally (or run).
        ``events``: the pods' ``FailedMount`` Events: a volume that cannot be mounted (a missing
        Secret of a credential volume) leaves the container in ``ContainerCreating``, and the
        kubelet says why only in an Event."""
        for pod in sorted(pods, key=lambda p: p.get("metadata", {}).get("creationTimestamp") or "", reverse=True):
            name = pod.get("metadata", {}).get("name", "")
            status = pod.get("status") or {}
            for cs in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
                waiting = (cs.get("state") or {}).get("waiting") or {}
                if waiting.get("reason") == "ContainerCreating":
                    mount = [e for e in events if e.get("reason") == "FailedMount"
                             and (e.get("involvedObject") or {}).get("name") == name]
                    if mount:
                        return cls(name, "FailedMount", str(mount[-1].get("message") or ""))
                if waiting.get("reason") and waiting["reason"] not in STARTING:
                    return cls(name, waiting["reason"], f'container {cs.get("name")}: {waiting.get("message") or ""}')
            for cond in status.get("conditions") or []:
                if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("reason"):
                    return cls(name, cond["reason"], cond.get("message") or "")
        return None


@dataclasses.dataclass
class RunPlan:
    start_segment: tuple[int, str, str | None] | None = None  # (n, kind, resume input)
    delete_job: str | None = None
    consume_input: str | None = None
    reject_input: tuple[str, str] | None = None  # (input, reason)
    status: dict[str, Any] = dataclasses.field(default_factory=dict)  # merge patch of run status


def _next(segments: list[dict[str, Any]], kind: str, now: datetime.datetime, run_name: str,
          resume_input: str | None = None) -> tuple[list[dict[str, Any]], tuple[int, str, str | None]]:
    n = len(segments) + 1
    seg = {"name": f"{run_name}-{n}", "kind": kind, "job": f"{run_name}-{n}", "startedAt": iso(now)}
    if resume_input:
        seg["input"] = resume_input
    return [*segments, seg], (n, kind, resume_input)


def _pod_ready(run: dict[str, Any], trouble: PodTrouble, now: datetime.datetime) -> dict[str, Any] | None:
    """The run's conditions with Ready showing the pod's trouble; None when already shown
    (a no-op write is skipped: it would also be one more run event)."""
    wanted = conditions.condition(READY, False, trouble.reason, f"pod {trouble.pod}: {trouble.message}")
    current = RunView(run).conditions
    result = conditions.updated(run, [wanted], now)
    return None if result == current else result


def decide(run: dict[str, Any], job: dict[str, Any] | None, resume_inputs: list[dict[str, Any]], *,
           now: datetime.datetime, max_retries: int, start_timeout_seconds: int,
           delegation_due: bool = False, pod_trouble: PodTrouble | None = None,
           config_error_seconds: int = 60) -> RunPlan:
    """``job`` is the Job of the last segment; ``resume_inputs`` the pending Resume inputs naming this run;
    ``delegation_due``: a Delegation waitpoint may resume (its children ended or its deadline passed);
    ``pod_trouble``: why the last segment's pod does not run (``config_error_seconds`` after the Job's
    creation, a configuration error fails the run without retries: a new pod would fail the same way)."""
    plan = RunPlan()
    name = run["metadata"]["name"]
    stored = RunView(run)
    phase = stored.phase
    segments = [dict(s) for s in stored.segments]
    if stored.cancel_requested or phase == RunPhase.CANCELLING.value:
        return plan  # the cancellation controller owns the run from here
    if not segments:
        if phase in TERMINAL_PHASES:
            return plan
        segments, plan.start_segment = _next(segments, SegmentKind.START.value, now, name)
        plan.status = with_phase(run, {"phase": RunPhase.PENDING.value, "segments": segments}, now)
        return plan

    last = segments[-1]
    view = JobView.of(job)
    if last.get("outcome") is None:
        verdict = None
        if not view.exists:
            # Created in an earlier pass whose Job create was lost: create it again (same name).
            plan.start_segment = (len(segments), last["kind"], last.get("input"))
            return plan
        if view.finished:
            if phase in (RunPhase.WAITING.value, RunPhase.SUCCEEDED.value, RunPhase.FAILED.value):
                verdict = phase
            else:
                verdict = LOST
                last["reason"] = view.reason or "the worker exited without writing a result"
        elif not view.started and view.created_at is not None:
            age = (now - view.created_at).total_seconds()
            if pod_trouble is not None and pod_trouble.config_error and age > config_error_seconds:
                return _config_error(run, segments, pod_trouble, now, plan)
            if age > start_timeout_seconds:
                verdict = NOT_STARTED
                last["reason"] = f"no pod started within {start_timeout_seconds}s"
                plan.delete_job = last["job"]
            elif pod_trouble is not None and (ready := _pod_ready(run, pod_trouble, now)) is not None:
                plan.status = {"conditions": ready}
        if verdict is None:
            return plan
        last["outcome"] = verdict
        last["finishedAt"] = iso(now)
        segments[-1] = last
        plan.status = {"segments": segments}
        if verdict in (LOST, NOT_STARTED):
            retries = sum(1 for s in segments if s["kind"] == SegmentKind.RETRY.value)
            if retries < max_retries:
                segments, plan.start_segment = _next(segments, SegmentKind.RETRY.value, now, name)
                plan.status = with_phase(run, {"segments": segments, "phase": RunPhase.PENDING.value}, now)
            else:
                plan.status = with_phase(run, {"segments": segments, "phase": RunPhase.FAILED.value, "waitpoint": None},
                                         now, reason="InfrastructureFailure",
                                         message=f"segment {last['name']}: {last['reason']} (after {retries} retries)")
        return plan

    if phase == RunPhase.WAITING.value:
        if stored.waitpoint_kind == WaitpointKind.DELEGATION.value:
            # No input answers a delegation: the worker reads the children's outcomes.
            if delegation_due:
                segments, plan.start_segment = _next(segments, SegmentKind.RESUME.value, now, name)
                plan.status = _resuming(run, segments, now)
            return plan
        for inp in sorted(resume_inputs, key=lambda i: InputView(i).sequence):
            answer = InputView(inp)
            if answer.waitpoint_id != stored.waitpoint_id:
                plan.reject_input = (inp["metadata"]["name"], f'stale waitpoint "{answer.waitpoint_id}"')
                return plan
            segments, plan.start_segment = _next(segments, SegmentKind.RESUME.value, now, name,
                                                 inp["metadata"]["name"])
            plan.consume_input = inp["metadata"]["name"]
            plan.status = _resuming(run, segments, now)
            return plan
    return plan


def _resuming(run: dict[str, Any], segments: list[dict[str, Any]], now: datetime.datetime) -> dict[str, Any]:
    """A resumed run is Running (never Waiting again for this waitpoint) before its pod starts:
    Ready says so until the worker reports from inside the pod."""
    return with_phase(run, {"segments": segments, "phase": RunPhase.RUNNING.value}, now,
                      extra=[conditions.condition(READY, False, "PodPending", "the worker pod of the resumed "
                                                                               "segment has not started yet")])


def _config_error(run: dict[str, Any], segments: list[dict[str, Any]], trouble: PodTrouble,
                  now: datetime.datetime, plan: RunPlan) -> RunPlan:
    """The pod cannot start for a configuration reason: fail the run with the pod's own reason
    and stop its Job. No Retry segment: a new pod would meet the same missing Secret or image."""
    last = segments[-1]
    last.update(outcome=NOT_STARTED, finishedAt=iso(now), reason=f"{trouble.reason}: {trouble.message}")
    message = f"segment {last['name']}: pod {trouble.pod}: {trouble.reason}: {trouble.message}"
    plan.delete_job = last["job"]
    plan.status = with_phase(run, {"segments": segments, "phase": RunPhase.FAILED.value, "waitpoint": None}, now,
                             reason=trouble.reason, message=message,
                             extra=[conditions.condition(READY, False, trouble.reason,
                                                         f"pod {trouble.pod}: {trouble.message}")])
    return plan


def pending_resumes(inputs: list[dict[str, Any]], run_name: str) -> list[dict[str, Any]]:
    return [i for i in inputs
            if (view := InputView(i)).kind == InputKind.RESUME.value and view.resume_run == run_name and view.pending]

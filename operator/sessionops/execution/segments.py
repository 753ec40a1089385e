"""The run controller's decision (pure): which segment Job to start, and what a
finished Job means for the run. The worker writes Running / Waiting / Succeeded /
Failed itself; the operator only reads Job outcomes and decides retries."""

from __future__ import annotations

import dataclasses
import datetime
import math
from typing import Any

from sessionops.api import conditions
from sessionops.api.input import InputKind
from sessionops.api.run import TERMINAL_PHASES, RunPhase, SegmentKind, WaitpointKind
from sessionops.api.run_conditions import READY, with_phase
from sessionops.api.timestamps import iso
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


@dataclasses.dataclass(frozen=True)
class _Pass:
    """What one decision reads: the run (segments copied, so a step may close the last one),
    its last segment's Job, the pending answers, and the operator's bounds."""

    run: dict[str, Any]
    segments: list[dict[str, Any]]
    job: JobView
    resume_inputs: list[dict[str, Any]]
    now: datetime.datetime
    max_retries: int
    start_timeout_seconds: int
    delegation_due: bool
    pod_trouble: PodTrouble | None
    config_error_seconds: int

    @property
    def name(self) -> str:
        return self.run["metadata"]["name"]

    @property
    def stored(self) -> RunView:
        return RunView(self.run)

    @property
    def phase(self) -> str:
        return self.stored.phase

    @property
    def last(self) -> dict[str, Any]:
        return self.segments[-1]

    @property
    def in_flight(self) -> bool:
        """The last segment has no outcome yet: its Job decides what happens next."""
        return bool(self.segments) and self.last.get("outcome") is None

    @property
    def unstarted_for(self) -> float | None:
        """Seconds since the in-flight segment's Job was created while no pod of it has started;
        None when it started, finished, or its age is unknown."""
        view = self.job
        if not self.in_flight or not view.exists or view.finished or view.started or view.created_at is None:
            return None
        return (self.now - view.created_at).total_seconds()


def decide(run: dict[str, Any], job: dict[str, Any] | None, resume_inputs: list[dict[str, Any]], *,
           now: datetime.datetime, max_retries: int, start_timeout_seconds: int,
           delegation_due: bool = False, pod_trouble: PodTrouble | None = None,
           config_error_seconds: int = 60) -> RunPlan:
    """``job`` is the Job of the last segment; ``resume_inputs`` the pending Resume inputs naming this run;
    ``delegation_due``: a Delegation waitpoint may resume (its children ended or its deadline passed);
    ``pod_trouble``: why the last segment's pod does not run (``config_error_seconds`` after the Job's
    creation, a configuration error fails the run without retries: a new pod would fail the same way).
    The cases are tried in order (``_CASES``); the first that applies decides the pass."""
    given = _Pass(run=run, segments=[dict(s) for s in RunView(run).segments],
                  job=JobView.of(job), resume_inputs=resume_inputs, now=now, max_retries=max_retries,
                  start_timeout_seconds=start_timeout_seconds, delegation_due=delegation_due,
                  pod_trouble=pod_trouble, config_error_seconds=config_error_seconds)
    for case in _CASES:
        if (plan := case(given)) is not None:
            return plan
    return RunPlan()


def _cancellation_owns_the_run(p: _Pass) -> RunPlan | None:
    """A run asked to cancel, or Cancelling, belongs to the cancellation controller: nothing to do."""
    if p.stored.cancel_requested or p.phase == RunPhase.CANCELLING.value:
        return RunPlan()
    return None


def _ended_before_any_segment(p: _Pass) -> RunPlan | None:
    """A run that ended before its first segment starts none."""
    return RunPlan() if not p.segments and p.phase in TERMINAL_PHASES else None


def _first_segment(p: _Pass) -> RunPlan | None:
    """A new run records its Start segment and is Pending."""
    if p.segments:
        return None
    plan = RunPlan()
    segments, plan.start_segment = _next(p.segments, SegmentKind.START.value, p.now, p.name)
    plan.status = with_phase(p.run, {"phase": RunPhase.PENDING.value, "segments": segments}, p.now)
    return plan


def _job_create_was_lost(p: _Pass) -> RunPlan | None:
    """A segment recorded in an earlier pass whose Job create was lost: create it again (same name)."""
    if not p.in_flight or p.job.exists:
        return None
    return RunPlan(start_segment=(len(p.segments), p.last["kind"], p.last.get("input")))


# A run in one of these phases once its Job finished: the worker wrote it, the segment's verdict.
_VERDICTS = (RunPhase.WAITING.value, RunPhase.SUCCEEDED.value, RunPhase.FAILED.value)


def _worker_wrote_a_verdict(p: _Pass) -> RunPlan | None:
    """A finished Job whose worker wrote Waiting, Succeeded or Failed closes its segment with that verdict."""
    if not p.in_flight or not p.job.finished or p.phase not in _VERDICTS:
        return None
    return RunPlan(status={"segments": _closed(p, p.phase)})


def _pod_lost(p: _Pass) -> RunPlan | None:
    """A finished Job without the worker's verdict (the pod died or exited silently) is Lost: retry, bounded."""
    if not p.in_flight or not p.job.finished:
        return None
    p.last["reason"] = p.job.reason or "the worker exited without writing a result"
    return _retry_or_fail(p, RunPlan(), _closed(p, LOST))


def _configuration_error(p: _Pass) -> RunPlan | None:
    """A pod that cannot start for a configuration reason (after ``config_error_seconds``) fails the run."""
    # No Retry segment: a new pod would meet the same missing Secret or image.
    age, trouble = p.unstarted_for, p.pod_trouble
    if age is None or trouble is None or not trouble.config_error or age <= p.config_error_seconds:
        return None
    last = p.last
    last.update(outcome=NOT_STARTED, finishedAt=iso(p.now), reason=f"{trouble.reason}: {trouble.message}")
    message = f"segment {last['name']}: pod {trouble.pod}: {trouble.reason}: {trouble.message}"
    return RunPlan(delete_job=last["job"], status=with_phase(
        p.run, {"segments": p.segments, "phase": RunPhase.FAILED.value, "waitpoint": None}, p.now,
        reason=trouble.reason, message=message,
        extra=[conditions.condition(READY, False, trouble.reason, f"pod {trouble.pod}: {trouble.message}")]))


def _never_started(p: _Pass) -> RunPlan | None:
    """A Job with no started pod after the start timeout is NotStarted: delete it and retry, bounded."""
    age = p.unstarted_for
    if age is None or age <= p.start_timeout_seconds:
        return None
    p.last["reason"] = f"no pod started within {p.start_timeout_seconds}s"
    return _retry_or_fail(p, RunPlan(delete_job=p.last["job"]), _closed(p, NOT_STARTED))


def _pod_trouble_shown(p: _Pass) -> RunPlan | None:
    """A pod not started yet that reports trouble: Ready shows it (no write when it already does)."""
    if p.unstarted_for is None or p.pod_trouble is None:
        return None
    ready = _pod_ready(p.run, p.pod_trouble, p.now)
    return RunPlan(status={"conditions": ready}) if ready is not None else None


def _segment_under_way(p: _Pass) -> RunPlan | None:
    """A segment whose pod runs, or starts without trouble: nothing to do until its Job says more."""
    return RunPlan() if p.in_flight else None


def _delegation_answered(p: _Pass) -> RunPlan | None:
    """A run waiting on its children resumes once they ended or its deadline passed, else it waits."""
    # No input answers a delegation: the worker reads the children's outcomes.
    if p.phase != RunPhase.WAITING.value or p.stored.waitpoint_kind != WaitpointKind.DELEGATION.value:
        return None
    if not p.delegation_due:
        return RunPlan()
    plan = RunPlan()
    segments, plan.start_segment = _next(p.segments, SegmentKind.RESUME.value, p.now, p.name)
    plan.status = _resuming(p.run, segments, p.now)
    return plan


def _stale_answer(p: _Pass) -> RunPlan | None:
    """The oldest pending answer names an older waitpoint: reject it, the run does not resume."""
    if p.phase != RunPhase.WAITING.value or (inp := _oldest(p.resume_inputs)) is None:
        return None
    waitpoint_id = InputView(inp).waitpoint_id
    if waitpoint_id == p.stored.waitpoint_id:
        return None
    return RunPlan(reject_input=(inp["metadata"]["name"], f'stale waitpoint "{waitpoint_id}"'))


def _answered(p: _Pass) -> RunPlan | None:
    """The oldest pending answer names the current waitpoint: a Resume segment consumes it."""
    if p.phase != RunPhase.WAITING.value or (inp := _oldest(p.resume_inputs)) is None:
        return None
    name = inp["metadata"]["name"]
    plan = RunPlan(consume_input=name)
    segments, plan.start_segment = _next(p.segments, SegmentKind.RESUME.value, p.now, p.name, name)
    plan.status = _resuming(p.run, segments, p.now)
    return plan


# In order: each case may rely on the earlier ones not applying (e.g. a finished Job is Lost
# only when the worker wrote no verdict).
_CASES = (
    _cancellation_owns_the_run,
    _ended_before_any_segment,
    _first_segment,
    _job_create_was_lost,
    _worker_wrote_a_verdict,
    _pod_lost,
    _configuration_error,
    _never_started,
    _pod_trouble_shown,
    _segment_under_way,
    _delegation_answered,
    _stale_answer,
    _answered,
)


def _closed(p: _Pass, outcome: str) -> list[dict[str, Any]]:
    """The run's segments with the last one closed with ``outcome``."""
    p.last.update(outcome=outcome, finishedAt=iso(p.now))
    return p.segments


def _retry_or_fail(p: _Pass, plan: RunPlan, segments: list[dict[str, Any]]) -> RunPlan:
    """After an infrastructure failure: a Retry segment while fewer than ``max_retries`` ran,
    else the run fails with InfrastructureFailure."""
    retries = sum(1 for s in segments if s["kind"] == SegmentKind.RETRY.value)
    if retries < p.max_retries:
        segments, plan.start_segment = _next(segments, SegmentKind.RETRY.value, p.now, p.name)
        plan.status = with_phase(p.run, {"segments": segments, "phase": RunPhase.PENDING.value}, p.now)
    else:
        last = segments[-1]
        plan.status = with_phase(p.run, {"segments": segments, "phase": RunPhase.FAILED.value, "waitpoint": None},
                                 p.now, reason="InfrastructureFailure",
                                 message=f"segment {last['name']}: {last['reason']} (after {retries} retries)")
    return plan


def _oldest(inputs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pending answer with the lowest sequence (the first of equals)."""
    return min(inputs, key=lambda i: InputView(i).sequence, default=None)


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


def _resuming(run: dict[str, Any], segments: list[dict[str, Any]], now: datetime.datetime) -> dict[str, Any]:
    """A resumed run is Running (never Waiting again for this waitpoint) before its pod starts:
    Ready says so until the worker reports from inside the pod."""
    return with_phase(run, {"segments": segments, "phase": RunPhase.RUNNING.value}, now,
                      extra=[conditions.condition(READY, False, "PodPending", "the worker pod of the resumed "
                                                                               "segment has not started yet")])


def pending_resumes(inputs: list[dict[str, Any]], run_name: str) -> list[dict[str, Any]]:
    return [i for i in inputs
            if (view := InputView(i)).kind == InputKind.RESUME.value and view.resume_run == run_name and view.pending]


def quiet_for(run: dict[str, Any], job: dict[str, Any] | None, *, now: datetime.datetime,
              start_timeout_seconds: int, config_error_seconds: int) -> float:
    """Seconds during which only an event (of the run, its Job, its pods or its inputs, each of
    which reconciles the run) can change what ``decide`` does: the recovery scan may leave the
    run alone that long. 0: a pass may find something to do at any time (a first segment to
    record, a lost Job create, a finished Job, a delegation deadline, a held-back resume, a
    cancellation's steps). ``inf``: nothing here depends on the clock (a started segment, a
    waitpoint a user answers)."""
    view = RunView(run)
    if view.owned_by_cancellation or view.held_back or not view.segments:
        return 0.0
    if view.segments[-1].get("outcome") is None:
        job_view = JobView.of(job)
        if not job_view.exists or job_view.finished or job_view.created_at is None:
            return 0.0
        if job_view.started:
            return math.inf
        # A Job whose pod has not started: the configuration-error and start-timeout cases are
        # decided by its age. Only deadlines still ahead count (the cases test "older than").
        age = (now - job_view.created_at).total_seconds()
        ahead = [d - age for d in (config_error_seconds, start_timeout_seconds) if d >= age]
        return min(ahead) if ahead else 0.0
    if view.phase == RunPhase.WAITING.value and view.waitpoint_kind == WaitpointKind.DELEGATION.value:
        return 0.0
    return math.inf

"""The run controller's decision as sentences: each row states a rule of ``segments.decide``
(retries and their bound, the start timeout, configuration errors, resumes and delegation),
the objects it is decided on, and the decision a user would observe.

The table must fail when any bound is dropped: ``test_the_table_catches_each_mutation`` runs it
against copies of the module with one rule broken each and expects at least one row to fail.
"""

from __future__ import annotations

import dataclasses
import datetime
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest

from sessionops.api import conditions
from sessionops.execution import segments
from sessionops.execution.segments import PodTrouble, RunPlan

NOW = datetime.datetime(2026, 12, 3, 10, 0, tzinfo=datetime.UTC)
MAX_RETRIES, START_TIMEOUT, CONFIG_ERROR = 2, 300, 60


def ago(seconds: int) -> str:
    return conditions.now_iso(NOW - datetime.timedelta(seconds=seconds))


# Factories: the smallest objects decide reads.

def segment(n: int, kind: str = "Start", outcome: str | None = None, input: str | None = None) -> dict[str, Any]:
    seg = {"name": f"s1-t1-{n}", "kind": kind, "job": f"s1-t1-{n}", "startedAt": ago(600)}
    if input:
        seg["input"] = input
    if outcome:
        seg.update(outcome=outcome, finishedAt=ago(500))
        if outcome in (segments.LOST, segments.NOT_STARTED):
            seg["reason"] = "an earlier failure"
    return seg


def run(phase: str | None, *segs: dict[str, Any], waitpoint: dict[str, Any] | None = None, cancel: bool = False,
        conds: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"segments": list(segs), "conditions": conds or []}
    if phase:
        status["phase"] = phase
    if waitpoint:
        status["waitpoint"] = waitpoint
    return {"metadata": {"name": "s1-t1", "namespace": "team-a", "generation": 1},
            "spec": {"sessionRef": {"name": "s1"}, "inputs": ["i1"], **({"cancel": True} if cancel else {})},
            "status": status}


def job(created_ago: int = 60, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "s1-t1-1", "creationTimestamp": ago(created_ago)}, "status": status}


def pending_job(created_ago: int) -> dict[str, Any]:
    """A Job whose pod has not started (the Job controller sets active before any pod runs)."""
    return job(created_ago, active=1, ready=0)


RUNNING_JOB = job(1000, active=1, ready=1)
COMPLETE_JOB = job(succeeded=1, conditions=[{"type": "Complete", "status": "True"}])
FAILED_JOB = job(failed=1, conditions=[{"type": "Failed", "status": "True", "reason": "PodFailurePolicy",
                                        "message": "container worker exited with 137"}])
OOM = "PodFailurePolicy: container worker exited with 137"


def answer(name: str, sequence: int, waitpoint_id: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"kind": "Resume", "run": "s1-t1", "sequence": sequence,
                                                 "waitpointId": waitpoint_id}}


APPROVAL = {"kind": "Approval", "id": "wp-2"}
DELEGATION = {"kind": "Delegation", "id": "wp-d"}
MISSING_SECRET = PodTrouble("s1-t1-1-abcde", "CreateContainerConfigError", 'secret "model-key" not found')
CRASHING = PodTrouble("s1-t1-1-abcde", "CrashLoopBackOff", "back-off restarting")


def shown(trouble: PodTrouble) -> list[dict[str, Any]]:
    """The conditions of a run whose Ready already shows ``trouble``."""
    ready = conditions.condition("Ready", False, trouble.reason, f"pod {trouble.pod}: {trouble.message}")
    return conditions.updated({"metadata": {"generation": 1}}, [ready], NOW)


@dataclasses.dataclass(frozen=True)
class Given:
    run: dict[str, Any]
    job: dict[str, Any] | None = None
    answers: tuple[dict[str, Any], ...] = ()
    delegation_due: bool = False
    trouble: PodTrouble | None = None
    max_retries: int = MAX_RETRIES


@dataclasses.dataclass(frozen=True)
class Decision:
    """What a pass decides, as a user would observe it; all None is "nothing to do"."""

    start: tuple[int, str, str | None] | None = None  # the segment whose Job is created
    delete_job: str | None = None
    consume: str | None = None
    reject: str | None = None  # the input rejected as stale
    phase: str | None = None  # the phase written
    closed: tuple[str, str | None] | None = None  # (outcome, reason) written on the segment that was last
    reason: str | None = None  # Failed's reason when the run fails, else Ready's when only it is written
    message: str | None = None  # Failed's message when the run fails


def observed(given: Given, plan: RunPlan) -> Decision:
    status = plan.status
    conds = {c["type"]: c for c in status.get("conditions") or []}
    before = given.run["status"]["segments"]
    after = status.get("segments") or []
    closed = None
    if before and len(after) >= len(before) and (seg := after[len(before) - 1]) != before[-1]:
        closed = (seg["outcome"], seg.get("reason"))
    failing = status.get("phase") == "Failed"
    reason = conds["Failed"]["reason"] if failing else (
        conds["Ready"]["reason"] if "phase" not in status and "Ready" in conds else None)
    return Decision(start=plan.start_segment, delete_job=plan.delete_job, consume=plan.consume_input,
                    reject=plan.reject_input[0] if plan.reject_input else None, phase=status.get("phase"),
                    closed=closed, reason=reason, message=conds["Failed"]["message"] if failing else None)


NOTHING = Decision()
RETRY_2 = Decision(start=(2, "Retry", None), phase="Pending", closed=("Lost", OOM))

ROWS: list[tuple[str, Given, Decision]] = [
    # Cancellation
    ("a run asked to cancel is left to the cancellation controller, even with a lost pod",
     Given(run("Running", segment(1), cancel=True), FAILED_JOB), NOTHING),
    ("a Cancelling run is left to the cancellation controller",
     Given(run("Cancelling", segment(1)), FAILED_JOB), NOTHING),
    # The first segment
    ("a new run starts its Start segment and is Pending",
     Given(run(None)), Decision(start=(1, "Start", None), phase="Pending")),
    ("a run that ended before any segment starts none",
     Given(run("Failed")), NOTHING),
    ("a segment recorded in an earlier pass whose Job create was lost creates that Job again",
     Given(run("Running", segment(1, outcome="Waiting"), segment(2, "Resume", input="a2"))),
     Decision(start=(2, "Resume", "a2"))),
    # The worker's verdict and lost pods
    ("a finished Job after the worker wrote Succeeded closes the segment Succeeded, no retry",
     Given(run("Succeeded", segment(1)), COMPLETE_JOB), Decision(closed=("Succeeded", None))),
    ("a lost pod after the worker reported Failed is not retried: the segment closes Failed",
     Given(run("Failed", segment(1)), FAILED_JOB), Decision(closed=("Failed", None))),
    ("a worker that wrote Waiting and exited closes the segment Waiting and does not resume in the same pass",
     Given(run("Waiting", segment(1), waitpoint=APPROVAL), COMPLETE_JOB, (answer("a2", 2, "wp-2"),)),
     Decision(closed=("Waiting", None))),
    ("a lost pod is retried while fewer than maxRetries retries ran, the Job's reason on the segment",
     Given(run("Running", segment(1)), FAILED_JOB), RETRY_2),
    ("a pod lost before the worker wrote anything (still Pending) is retried too",
     Given(run("Pending", segment(1)), FAILED_JOB), RETRY_2),
    ("a worker that exited 0 without a verdict is Lost and retried",
     Given(run("Running", segment(1)), COMPLETE_JOB),
     Decision(start=(2, "Retry", None), phase="Pending",
              closed=("Lost", "the worker exited without writing a result"))),
    ("a lost retry is retried again while below the bound",
     Given(run("Running", segment(1, outcome="Lost"), segment(2, "Retry")), FAILED_JOB),
     Decision(start=(3, "Retry", None), phase="Pending", closed=("Lost", OOM))),
    ("the retry bound stops retries: after maxRetries retries a lost pod fails the run with InfrastructureFailure",
     Given(run("Running", segment(1, outcome="Lost"), segment(2, "Retry", "Lost"), segment(3, "Retry")),
           FAILED_JOB),
     Decision(phase="Failed", closed=("Lost", OOM), reason="InfrastructureFailure",
              message=f"segment s1-t1-3: {OOM} (after 2 retries)")),
    ("with maxRetries 0 a lost pod fails the run at once",
     Given(run("Running", segment(1)), FAILED_JOB, max_retries=0),
     Decision(phase="Failed", closed=("Lost", OOM), reason="InfrastructureFailure",
              message=f"segment s1-t1-1: {OOM} (after 0 retries)")),
    ("Resume segments do not count against the retry bound",
     Given(run("Running", segment(1, outcome="Waiting"), segment(2, "Resume", "Waiting", "a2"),
               segment(3, "Resume", input="a3")), FAILED_JOB, max_retries=1),
     Decision(start=(4, "Retry", None), phase="Pending", closed=("Lost", OOM))),
    ("a segment whose pod runs is left alone however old its Job",
     Given(run("Running", segment(1)), RUNNING_JOB), NOTHING),
    # The start timeout and pod trouble
    ("a Job that never started within the start timeout is NotStarted, its Job deleted, and retried",
     Given(run("Pending", segment(1)), pending_job(START_TIMEOUT + 1)),
     Decision(start=(2, "Retry", None), delete_job="s1-t1-1", phase="Pending",
              closed=("NotStarted", f"no pod started within {START_TIMEOUT}s"))),
    ("a Job still within the start timeout waits",
     Given(run("Pending", segment(1)), pending_job(START_TIMEOUT - 1)), NOTHING),
    ("the retry bound applies to NotStarted too: the run fails and the Job is deleted",
     Given(run("Pending", segment(1, outcome="Lost"), segment(2, "Retry", "Lost"), segment(3, "Retry")),
           pending_job(START_TIMEOUT + 1)),
     Decision(delete_job="s1-t1-3", phase="Failed", closed=("NotStarted", f"no pod started within {START_TIMEOUT}s"),
              reason="InfrastructureFailure",
              message=f"segment s1-t1-3: no pod started within {START_TIMEOUT}s (after 2 retries)")),
    ("a configuration error fails the run after configErrorSeconds with the pod's reason, without a retry",
     Given(run("Pending", segment(1)), pending_job(CONFIG_ERROR + 1), trouble=MISSING_SECRET),
     Decision(delete_job="s1-t1-1", phase="Failed",
              closed=("NotStarted", 'CreateContainerConfigError: secret "model-key" not found'),
              reason="CreateContainerConfigError",
              message='segment s1-t1-1: pod s1-t1-1-abcde: CreateContainerConfigError: secret "model-key" not found')),
    ("a configuration error within configErrorSeconds only shows on Ready",
     Given(run("Pending", segment(1)), pending_job(CONFIG_ERROR - 1), trouble=MISSING_SECRET),
     Decision(reason="CreateContainerConfigError")),
    ("a trouble that is no configuration error shows on Ready and waits for the start timeout",
     Given(run("Pending", segment(1)), pending_job(START_TIMEOUT - 1), trouble=CRASHING),
     Decision(reason="CrashLoopBackOff")),
    ("a trouble that is no configuration error is NotStarted and retried after the start timeout",
     Given(run("Pending", segment(1)), pending_job(START_TIMEOUT + 1), trouble=CRASHING),
     Decision(start=(2, "Retry", None), delete_job="s1-t1-1", phase="Pending",
              closed=("NotStarted", f"no pod started within {START_TIMEOUT}s"))),
    ("a trouble Ready already shows writes nothing",
     Given(run("Pending", segment(1), conds=shown(MISSING_SECRET)), pending_job(CONFIG_ERROR - 1),
           trouble=MISSING_SECRET), NOTHING),
    # Resumes
    ("an answer to the current waitpoint resumes the run: a Resume segment consumes it and the run is Running",
     Given(run("Waiting", segment(1, outcome="Waiting"), waitpoint=APPROVAL), None, (answer("a2", 2, "wp-2"),)),
     Decision(start=(2, "Resume", "a2"), consume="a2", phase="Running")),
    ("a stale answer (for an older waitpoint) does not resume: it is rejected",
     Given(run("Waiting", segment(1, outcome="Waiting"), waitpoint=APPROVAL), None, (answer("a2", 2, "wp-1"),)),
     Decision(reject="a2")),
    ("answers are taken oldest first: an older stale answer is rejected before a current one is used",
     Given(run("Waiting", segment(1, outcome="Waiting"), waitpoint=APPROVAL), None,
           (answer("a3", 3, "wp-2"), answer("a2", 2, "wp-1"))),
     Decision(reject="a2")),
    ("answers are taken oldest first: the oldest current answer resumes",
     Given(run("Waiting", segment(1, outcome="Waiting"), waitpoint=APPROVAL), None,
           (answer("a3", 3, "wp-2"), answer("a2", 2, "wp-2"))),
     Decision(start=(2, "Resume", "a2"), consume="a2", phase="Running")),
    ("a waiting run without an answer waits",
     Given(run("Waiting", segment(1, outcome="Waiting"), waitpoint=APPROVAL)), NOTHING),
    ("a run still in its segment (Waiting written, Job not finished) does not resume",
     Given(run("Waiting", segment(1), waitpoint=APPROVAL), RUNNING_JOB, (answer("a2", 2, "wp-2"),)), NOTHING),
    ("an answer to a finished run does nothing",
     Given(run("Succeeded", segment(1, outcome="Succeeded")), None, (answer("a2", 2, "wp-2"),)), NOTHING),
    # Delegation
    ("a delegation parent resumes only when its children finished or its deadline passed",
     Given(run("Waiting", segment(1, outcome="Waiting"), waitpoint=DELEGATION), delegation_due=True),
     Decision(start=(2, "Resume", None), phase="Running")),
    ("a delegation parent whose children still run keeps waiting",
     Given(run("Waiting", segment(1, outcome="Waiting"), waitpoint=DELEGATION)), NOTHING),
    ("no input answers a delegation: an answer naming its waitpoint is neither used nor rejected",
     Given(run("Waiting", segment(1, outcome="Waiting"), waitpoint=DELEGATION), None, (answer("a2", 2, "wp-d"),)),
     NOTHING),
    ("only a delegation resumes without an answer",
     Given(run("Waiting", segment(1, outcome="Waiting"), waitpoint=APPROVAL), delegation_due=True), NOTHING),
]

Decide = Callable[..., RunPlan]


def decided(decide: Decide, given: Given) -> Decision:
    plan = decide(given.run, given.job, list(given.answers), now=NOW, max_retries=given.max_retries,
                  start_timeout_seconds=START_TIMEOUT, delegation_due=given.delegation_due,
                  pod_trouble=given.trouble, config_error_seconds=CONFIG_ERROR)
    if plan.start_segment is not None and plan.start_segment[0] > len(given.run["status"]["segments"]):
        # A new segment is recorded (status first) under the name of the Job it starts.
        n, kind, resume_input = plan.start_segment
        assert plan.status["segments"][-1] == {"name": f"s1-t1-{n}", "kind": kind, "job": f"s1-t1-{n}",
                                               "startedAt": conditions.now_iso(NOW),
                                               **({"input": resume_input} if resume_input else {})}
    return observed(given, plan)


@pytest.mark.parametrize(("sentence", "given", "expected"), ROWS, ids=[row[0] for row in ROWS])
def test_decide(sentence: str, given: Given, expected: Decision) -> None:
    assert decided(segments.decide, given) == expected, sentence


# Each mutation breaks one rule of segments.py as a text edit: (what it does, code, broken code).
MUTATIONS = [
    ("the retry bound is gone (unbounded retries)", "if retries < p.max_retries:", "if True:"),
    ("the start timeout is gone", "if age is None or age <= p.start_timeout_seconds:", "if True:"),
    ("the stale-waitpoint check is gone", "if waitpoint_id == p.stored.waitpoint_id:", "if True:"),
    ("a delegation resumes before it is due", "if not p.delegation_due:", "if False:"),
    ("a lost pod after the worker's verdict is retried",
     "or p.phase not in _VERDICTS:", "or True:"),
    ("a lost pod is not retried", "return _retry_or_fail(p, RunPlan(), _closed(p, LOST))",
     "return RunPlan(status={\"segments\": _closed(p, LOST)})"),
    ("Resume segments count as retries", "if s[\"kind\"] == SegmentKind.RETRY.value", "if True"),
    ("configuration errors are retried like any trouble", "or not trouble.config_error", "or True"),
    ("answers are taken newest first", "return min(inputs,", "return max(inputs,"),
]


def mutant(monkeypatch: pytest.MonkeyPatch, code: str | None = None, broken: str = "") -> types.ModuleType:
    """A copy of segments.py, with ``code`` replaced by ``broken`` when given, as a module of its own."""
    source = inspect.getsource(segments)
    if code is not None:
        assert source.count(code) == 1, f"the mutation site {code!r} is not in segments.py once: update MUTATIONS"
        source = source.replace(code, broken)
    module = types.ModuleType("sessionops.execution.segments_mutant")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dataclasses look their module up
    exec(compile(source, module.__name__, "exec"), module.__dict__)
    return module


def failing_rows(decide: Decide) -> list[str]:
    failing = []
    for sentence, given, expected in ROWS:
        try:
            if decided(decide, given) != expected:
                failing.append(sentence)
        except Exception:  # a broken rule may also crash a row: that row fails as well
            failing.append(sentence)
    return failing


def test_an_unchanged_copy_passes_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """The control for the mutation test: copying the module alone breaks no row."""
    assert failing_rows(mutant(monkeypatch).decide) == []


@pytest.mark.parametrize(("mutation", "code", "broken"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_the_table_catches_each_mutation(monkeypatch: pytest.MonkeyPatch, mutation: str, code: str,
                                         broken: str) -> None:
    assert failing_rows(mutant(monkeypatch, code, broken).decide), f"no row fails when {mutation}"

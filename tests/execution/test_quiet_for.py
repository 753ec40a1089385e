"""How long the recovery scan may leave a run alone (``segments.quiet_for``): only as long as the
clock alone cannot change what ``segments.decide`` does."""

from __future__ import annotations

import datetime
import math

import pytest

from sessionops.execution import segments
from tests.execution.test_segments_decide import (
    APPROVAL,
    COMPLETE_JOB,
    CONFIG_ERROR,
    DELEGATION,
    NOW,
    ROWS,
    RUNNING_JOB,
    START_TIMEOUT,
    Given,
    decided,
    pending_job,
    run,
    segment,
)


def quiet(r: dict, job: dict | None) -> float:
    return segments.quiet_for(r, job, now=NOW, start_timeout_seconds=START_TIMEOUT, config_error_seconds=CONFIG_ERROR)


@pytest.mark.parametrize(("sentence", "r", "job", "expected"), [
    ("a started segment changes only by its Job's or pods' events", run("Running", segment(1)), RUNNING_JOB,
     math.inf),
    ("a run waiting for a user's answer changes only when an answer arrives",
     run("Waiting", segment(1, outcome="Waiting"), waitpoint=APPROVAL), None, math.inf),
    ("a Job not started: its configuration-error deadline first", run("Pending", segment(1)), pending_job(10),
     CONFIG_ERROR - 10),
    ("then its start timeout", run("Pending", segment(1)), pending_job(100), START_TIMEOUT - 100),
    ("past both, every scan", run("Pending", segment(1)), pending_job(START_TIMEOUT + 1), 0),
    ("a Job whose create was lost", run("Pending", segment(1)), None, 0),
    ("a finished Job not yet decided", run("Running", segment(1)), COMPLETE_JOB, 0),
    ("a run with no segment yet", run(None), None, 0),
    ("a delegation's deadline", run("Waiting", segment(1, outcome="Waiting"), waitpoint=DELEGATION), None, 0),
    ("a cancellation's steps", run("Running", segment(1), cancel=True), RUNNING_JOB, 0),
])
def test_quiet_for(sentence: str, r: dict, job: dict | None, expected: float) -> None:
    assert quiet(r, job) == expected


def test_a_held_back_resume_is_due_at_every_scan() -> None:
    r = run("Waiting", segment(1, outcome="Waiting"), waitpoint=APPROVAL)
    r["status"]["heldBack"] = "the tree's bound of 2 active runs is reached"
    assert quiet(r, None) == 0


@pytest.mark.parametrize(("sentence", "given"), [(row[0], row[1]) for row in ROWS], ids=[row[0] for row in ROWS])
def test_no_decision_of_the_table_changes_with_the_clock_alone_while_quiet(sentence: str, given: Given,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    q = quiet(given.run, given.job)
    if q == 0:
        return
    before = decided(segments.decide, given)
    for later in (q / 2, q - 0.5) if math.isfinite(q) else (3600.0, 86400.0 * 30):
        at = NOW + datetime.timedelta(seconds=later)
        monkeypatch.setattr("tests.execution.test_segments_decide.NOW", at)
        assert decided(segments.decide, given) == before, f"{later} s later"


def test_a_deadline_reached_changes_the_decision() -> None:
    # The other side of the bound: the row for a Job that never started, decided at NOW, is one
    # whose quiet period ran out exactly then.
    given = Given(run("Pending", segment(1)), pending_job(START_TIMEOUT - 10))
    q = quiet(given.run, given.job)
    assert q == 10
    before = decided(segments.decide, given)
    later = Given(run("Pending", segment(1)), pending_job(START_TIMEOUT + 1))
    assert decided(segments.decide, later) != before

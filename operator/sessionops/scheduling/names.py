"""Deterministic names and labels: a repeated pass finds what an earlier pass created."""

from __future__ import annotations

SESSION_LABEL = "sessionops.dev/session"
SEQUENCE_LABEL = "sessionops.dev/sequence"
CLAIMED_AT_LABEL = "sessionops.dev/claimed-at"  # the last receipt sequence seen when the run was claimed
RUN_LABEL = "sessionops.dev/run"
INPUT_FINALIZER = "sessionops.dev/input"
SESSION_FINALIZER = "sessionops.dev/thread"
"""Set at admission; dropped once the session's thread (its checkpoints) is deleted. Not kopf's
finalizer: kopf would add its own with a patch that races our first status write."""


def run_name(session: str, head_sequence: int) -> str:
    """The run of the turn whose head input has this sequence."""
    return f"{session}-t{head_sequence}"


def job_name(run: str, segment: int) -> str:
    return f"{run}-{segment}"

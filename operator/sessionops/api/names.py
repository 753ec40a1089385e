"""Deterministic names and labels: a repeated pass finds what an earlier pass created."""

from __future__ import annotations

from typing import Any

from sessionops import API_VERSION

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


def lease_name(session: str) -> str:
    """The session's Lease: held by the worker that writes the thread, checked by the cancellation
    cleanup before it touches the thread. Both must derive the same name, so it is defined once."""
    return f"sessionops-{session}"


def owner_reference(obj: dict[str, Any], *, kind: str | None = None, controller: bool | None = None,
                    block_owner_deletion: bool | None = None) -> dict[str, Any]:
    """An ownerReference to ``obj`` (which carries ``metadata.uid``). ``controller`` and
    ``blockOwnerDeletion`` are written only when given: absent means false to the API server."""
    ref: dict[str, Any] = {"apiVersion": obj.get("apiVersion") or API_VERSION, "kind": kind or obj["kind"],
                           "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"]}
    if controller is not None:
        ref["controller"] = controller
    if block_owner_deletion is not None:
        ref["blockOwnerDeletion"] = block_owner_deletion
    return ref

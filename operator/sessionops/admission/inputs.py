"""AgentInput admission rules (pure): delivery, session state rules and the snapshot."""

from __future__ import annotations

import dataclasses
from typing import Any

from sessionops.admission import resume
from sessionops.admission.errors import CONFLICT, INVALID, NOT_FOUND, Rejection
from sessionops.admission.snapshot import with_model_and_approval
from sessionops.api.config import OperatorConfig
from sessionops.api.input import Delivery, InputKind
from sessionops.api.run import RunPhase, WaitpointKind
from sessionops.api.snapshot import ContextSnapshot
from sessionops.views import RunView, SessionView

SERVER_OWNED = ("sequence", "contextSnapshot", "submittedBy")


@dataclasses.dataclass(frozen=True)
class Receipt:
    """What admission writes into a new input (besides the sequence)."""

    delivery: str | None
    snapshot: ContextSnapshot


def active_turn(session: dict[str, Any], run: dict[str, Any] | None) -> dict[str, Any] | None:
    """The session's active run, if it is still active (not in a terminal phase)."""
    name = SessionView(session).active_run
    if not name or run is None or RunView(run).name != name:
        return None
    return None if RunView(run).terminal else run


def decide_receipt(spec: dict[str, Any], session: dict[str, Any] | None, *, session_name: str,
                   active_run: dict[str, Any] | None, resume_run: dict[str, Any] | None,
                   config: OperatorConfig) -> Receipt:
    """Accept or reject a new input against the session's state at receipt.

    ``active_run`` is the session's active run (see ``active_turn``); ``resume_run``
    is the run named by a Resume input's ``spec.run``.
    """
    if session is None:
        raise Rejection("spec.sessionRef.name", f'agentsession "{session_name}" not found in this namespace',
                        NOT_FOUND)
    if SessionView(session).deleting:
        raise Rejection("spec.sessionRef.name", f'agentsession "{session_name}" is being deleted', CONFLICT)
    stored = SessionView(session).context_snapshot
    if stored is None:
        raise Rejection("spec.sessionRef.name", f'agentsession "{session_name}" has no snapshot yet', CONFLICT)
    session_snapshot = ContextSnapshot.model_validate(stored)
    kind = spec.get("kind") or InputKind.MESSAGE.value
    if kind != InputKind.RESUME.value and spec.get("answers") is not None:
        raise Rejection("spec.answers", "answers belong to Resume inputs")

    if kind == InputKind.CONTINUE.value:
        if active_run is not None:
            raise Rejection("spec.kind", f'Continue is refused while turn "{active_run["metadata"]["name"]}" '
                                         "is active", CONFLICT)
        if not SessionView(session).paused:
            raise Rejection("spec.kind", "Continue is accepted only while the session's queue is paused", CONFLICT)
        return Receipt(delivery=None, snapshot=session_snapshot)

    if kind == InputKind.RESUME.value:
        run_name = spec.get("run") or ""
        if resume_run is None:
            raise Rejection("spec.run", f'agentrun "{run_name}" not found in this namespace', NOT_FOUND)
        resumed = RunView(resume_run)
        if resumed.session_name != session_name:
            raise Rejection("spec.run", f'agentrun "{run_name}" does not belong to session "{session_name}"',
                            INVALID)
        if resumed.phase != RunPhase.WAITING.value:
            raise Rejection("spec.run", f'agentrun "{run_name}" is not waiting (phase {resumed.phase}): '
                                        "nothing to resume", CONFLICT)
        if spec.get("waitpointId") != resumed.waitpoint_id:
            raise Rejection("spec.waitpointId", f'stale waitpoint "{spec.get("waitpointId")}": the run now waits '
                                                f'at "{resumed.waitpoint_id}"', CONFLICT)
        resume.check_resume(resumed.waitpoint, answers=spec.get("answers"), decisions=spec.get("decisions"))
        return Receipt(delivery=None, snapshot=ContextSnapshot.model_validate(resumed.context_snapshot))

    # Message
    active = RunView(active_run) if active_run is not None else None
    if active is not None and active.phase in (RunPhase.WAITING.value, RunPhase.CANCELLING.value):
        what = ("is being cancelled" if active.phase == RunPhase.CANCELLING.value else
                "waits for its delegated child sessions" if active.waitpoint_kind == WaitpointKind.DELEGATION.value
                else "waits for a Resume input")
        raise Rejection("spec.kind", f'messages are refused while turn "{active.name}" {what}',
                        CONFLICT)
    delivery = spec.get("delivery") or (Delivery.STEER.value if active_run is not None else Delivery.FOLLOW_UP.value)
    overrides = spec.get("overrides") or {}
    if delivery == Delivery.STEER.value:
        if overrides:
            raise Rejection("spec.overrides", "a Steer runs with the active turn's configuration and may not carry "
                                              "overrides; use delivery: FollowUp")
        if active is not None:
            return Receipt(delivery, ContextSnapshot.model_validate(active.context_snapshot))
        return Receipt(delivery, session_snapshot)
    snapshot = with_model_and_approval(session_snapshot, model=overrides.get("model"),
                                       approval_mode=overrides.get("approvalMode"), config=config,
                                       field="spec.overrides")
    return Receipt(delivery, snapshot)


def carry_forward(old_spec: dict[str, Any], new_spec: dict[str, Any]) -> dict[str, Any]:
    """On UPDATE: the stored server-owned fields, so apply tools that omit them neither
    fail nor change them (the CRD's immutability rule then sees an unchanged spec)."""
    return {k: old_spec[k] for k in SERVER_OWNED if k in old_spec and new_spec.get(k) != old_spec[k]}

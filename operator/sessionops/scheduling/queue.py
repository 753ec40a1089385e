"""The queue rules of ARCHITECTURE section 3, as a pure decision.

Every field of the Plan is derived from the objects alone (level-triggered), so a
replayed event, a restart or a crash between two writes leads to the same Plan.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
from typing import Any

from sessionops.api import conditions
from sessionops.api.input import Delivery, InputKind, InputPhase
from sessionops.api.names import INPUT_FINALIZER, run_name
from sessionops.api.run import RunPhase
from sessionops.api.session import SessionPhase
from sessionops.views import InputView, RunView, SessionView


@dataclasses.dataclass(frozen=True)
class NewRun:
    name: str
    head_sequence: int
    inputs: list[str]
    snapshot: dict[str, Any]
    claimed_at: int = 0


@dataclasses.dataclass
class Plan:
    create_run: NewRun | None = None
    consume: dict[str, str | None] = dataclasses.field(default_factory=dict)  # input -> run (None: Continue)
    release: list[str] = dataclasses.field(default_factory=list)  # deleting inputs whose finalizer can go
    status: dict[str, Any] = dataclasses.field(default_factory=dict)  # projected session status


def _name(obj: dict[str, Any]) -> str:
    return obj["metadata"]["name"]


def queue_order(inp: dict[str, Any]) -> tuple[int, int]:
    """Steers first (one batch), then follow-ups FIFO by receipt sequence."""
    view = InputView(inp)
    return (0 if view.delivery == Delivery.STEER.value else 1, view.sequence)


@dataclasses.dataclass(frozen=True)
class Pause:
    """Why the queue is paused: a CamelCase ``reason`` (the Paused condition's) and a sentence."""

    reason: str
    message: str


def pause(runs: list[dict[str, Any]], inputs: list[dict[str, Any]]) -> Pause | None:
    """Paused after the latest finished turn failed or was cancelled, until a later Continue."""
    views = [RunView(r) for r in runs]
    if any(v.phase == RunPhase.CANCELLING.value for v in views if not v.terminal):
        return Pause("TurnCancelling", "a turn is being cancelled")
    finished = sorted((v for v in views if v.terminal), key=lambda v: (v.sequence, v.claimed_at))
    if not finished or finished[-1].phase == RunPhase.SUCCEEDED.value:
        return None
    last = finished[-1]
    # Only a Continue received after the run was claimed answers its failure: an earlier one
    # unpaused the queue that then claimed this very run.
    continues = [i for i in map(InputView, inputs) if i.kind == InputKind.CONTINUE.value
                 and i.sequence > last.claimed_at and not i.deleting]
    if continues:
        return None
    cancelled = last.phase == RunPhase.CANCELLED.value
    verb = "was cancelled" if cancelled else "failed"
    return Pause("TurnCancelled" if cancelled else "TurnFailed",
                 f'turn "{last.name}" {verb}: send a Continue input to resume the queue')


def decide(session: dict[str, Any], inputs: list[dict[str, Any]], runs: list[dict[str, Any]],
           held_back: str | None = None, now: datetime.datetime | None = None) -> Plan:
    """``held_back``: why the session may not start a turn now (its delegation tree is at its
    bound); pending inputs then stay pending and the reason shows in the queue status.
    ``now`` stamps a condition that changes (the current time when omitted)."""
    plan = Plan()
    name = _name(session)
    by_name = {_name(r): r for r in runs}
    active = sorted((r for r in runs if not RunView(r).terminal), key=lambda r: RunView(r).sequence)

    # Deleting inputs: a pending one leaves the queue; a consumed one keeps its record
    # until its run no longer needs it.
    for inp in inputs:
        view = InputView(inp)
        if view.deleting and INPUT_FINALIZER in view.finalizers:
            owners = [r for r in runs if view.name in RunView(r).inputs]
            if not any(not RunView(r).terminal for r in owners):
                plan.release.append(_name(inp))

    # Repair: inputs of an existing run that a crashed pass did not mark consumed.
    for run in runs:
        for input_name in RunView(run).inputs:
            inp = next((i for i in inputs if _name(i) == input_name), None)
            if inp is not None and InputView(inp).phase == InputPhase.PENDING.value:
                plan.consume[input_name] = _name(run)

    paused = pause(runs, inputs)
    reason = paused.message if paused else None
    if reason is None:
        # A Continue is consumed once the queue it unpaused moves on.
        for inp in inputs:
            if InputView(inp).kind == InputKind.CONTINUE.value and InputView(inp).pending:
                plan.consume[_name(inp)] = None

    pending = sorted((i for i in inputs if InputView(i).pending and _name(i) not in plan.consume
                      and InputView(i).kind == InputKind.MESSAGE.value),
                     key=queue_order)
    waiting_for_room = not active and reason is None and bool(pending) and held_back is not None
    if not active and reason is None and pending and not waiting_for_room:
        head = pending[0]
        if InputView(head).delivery == Delivery.STEER.value:
            batch = [i for i in pending if InputView(i).delivery == Delivery.STEER.value]
        else:
            batch = [head]
        new_name = head_run_name(name, head, by_name)
        existing = by_name.get(new_name)
        if existing is not None:  # created by an earlier pass: only its own inputs are its own
            for input_name in RunView(existing).inputs:
                plan.consume.setdefault(input_name, new_name)
        else:
            plan.create_run = NewRun(new_name, InputView(head).sequence, [_name(i) for i in batch],
                                     InputView(head).context_snapshot or {},
                                     claimed_at=max(InputView(i).sequence for i in inputs))
            for inp in batch:
                plan.consume[_name(inp)] = new_name
    plan.status = project_status(session, active, plan, reason, pending)
    # Defence in depth (issue 12): receipt allocates lastSequence + 1, so a lastSequence below a
    # sequence some run was claimed at was forged (the CRD's rule forbids decreasing it). Put it back
    # ahead of every claimed turn; never lower it. A run exists only after receipt wrote its
    # sequence, so this is never a race with receipt. Safe to repeat: the value is absolute.
    claimed = max((RunView(r).sequence for r in runs), default=0)
    if claimed > SessionView(session).last_sequence:
        plan.status["lastSequence"] = claimed
    plan.status["queue"]["heldBack"] = held_back if waiting_for_room else None
    plan.status["conditions"] = conditions.updated(
        session, session_conditions(plan.status, paused), now or datetime.datetime.now(datetime.UTC))
    return plan


def head_run_name(session: str, head: dict[str, Any], runs: dict[str, dict[str, Any]]) -> str:
    """The run for ``head``: named after its sequence, unless a run of other inputs already has that
    name (a sequence allocated twice after a forged ``lastSequence``); then a name made unique by the
    head's uid, still deterministic, so a repeated pass finds the run it created (issue 12)."""
    name = run_name(session, InputView(head).sequence)
    taken = runs.get(name)
    if taken is None or _name(head) in RunView(taken).inputs:
        return name
    digest = hashlib.sha256((head["metadata"].get("uid") or _name(head)).encode()).hexdigest()[:6]
    return f"{name}-{digest}"


def session_conditions(status: dict[str, Any], paused: Pause | None) -> list[dict[str, Any]]:
    """Active (a turn is under way), Paused (with the reason) and Ready (a message sent now is
    accepted and will be answered: not while the queue is paused or the turn waits for a
    Resume or is being cancelled, when admission refuses messages)."""
    phase, run = status["phase"], status.get("activeRun")
    active = conditions.condition("Active", True, phase, f'turn "{run}" is under way') if run else \
        conditions.condition("Active", False, phase, "no turn is under way")
    paused_cond = conditions.condition("Paused", True, paused.reason, paused.message) if paused else \
        conditions.condition("Paused", False, "QueueRunning", "")
    if phase == SessionPhase.WAITING.value:
        ready = conditions.condition("Ready", False, "TurnWaiting",
                                     f'turn "{run}" waits for a Resume input; messages are refused until then')
    elif paused is not None:
        ready = conditions.condition("Ready", False, paused.reason, paused.message)
    else:
        ready = conditions.condition("Ready", True, "AcceptingInputs", "")
    return [ready, active, paused_cond]


def project_status(session: dict[str, Any], active: list[dict[str, Any]], plan: Plan, reason: str | None,
                   pending: list[dict[str, Any]]) -> dict[str, Any]:
    """What users see: effective model/approval, phase, active run, queue. Never the snapshot."""
    snapshot = SessionView(session).context_snapshot or {}
    still_pending = [i for i in pending if _name(i) not in plan.consume]
    if active:
        run = active[0]
        phase = {RunPhase.WAITING.value: SessionPhase.WAITING.value,
                 RunPhase.CANCELLING.value: SessionPhase.CANCELLING.value}.get(
            RunView(run).phase, SessionPhase.RUNNING.value)
        active_name: str | None = _name(run)
    elif plan.create_run is not None:
        phase, active_name = SessionPhase.RUNNING.value, plan.create_run.name
    else:
        phase = SessionPhase.PAUSED.value if reason else SessionPhase.IDLE.value
        active_name = None
    return {
        "phase": phase,
        "model": snapshot.get("model"),
        "approvalMode": snapshot.get("approvalMode"),
        "activeRun": active_name,
        "queue": {"pending": len(still_pending), "paused": reason is not None, "pausedReason": reason},
        "observedGeneration": session.get("metadata", {}).get("generation"),
    }

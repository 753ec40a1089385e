"""What the safety scans need to know, kept from the watches (the kopf event handlers feed it).

A periodic pass that reads the API server costs requests and CPU per object whether or not
anything is wrong: at 10,000 idle sessions a GET and two LISTs each every 30 s saturated a
core. This cache holds a few facts per object, so a scan finds in memory the objects whose
state is out of step (a missed event, a failed step to retry) and reconciles only those.
Nothing here decides a write: the reconciles it triggers read what they need themselves.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sessionops.api.input import InputKind
from sessionops.api.names import INPUT_FINALIZER, SESSION_FINALIZER
from sessionops.api.session import SessionPhase
from sessionops.views import InputView, RunView, SessionView
from sessionops.views.fields import View

Key = tuple[str, str]
"""(namespace, name)."""

TOUCHED = float("-inf")
"""A run's visit time after an event: due at the next scan."""


def _key(obj: dict[str, Any]) -> Key:
    view = View(obj)  # the metadata every object has
    return view.namespace, view.name


@dataclasses.dataclass(slots=True)
class SessionFacts:
    reconciled: bool  # the operator has written its status (status.phase)
    deleting_with_finalizer: bool  # its thread is still to be dropped
    idle_with_queue: bool  # Idle, pending inputs, not paused: a claim is due (or room in its tree)
    pending: int  # status.queue.pending as last written


@dataclasses.dataclass(slots=True)
class InputFacts:
    session: str
    pending_message: bool  # counted in the session's queue
    open_continue: bool  # a pending Continue: the session consumes it
    releasable: bool  # deleting and still held by our finalizer


@dataclasses.dataclass
class Cache:
    sessions: dict[Key, SessionFacts] = dataclasses.field(default_factory=dict)
    inputs: dict[Key, InputFacts] = dataclasses.field(default_factory=dict)
    unfinished_runs: dict[Key, bool] = dataclasses.field(default_factory=dict)
    """Runs not in a terminal phase -> whether cancellation was requested."""
    run_visits: dict[Key, float] = dataclasses.field(default_factory=dict)
    """Unfinished run -> the monotonic time before which the recovery scan leaves it alone.
    Absent or ``TOUCHED``: due at the next scan."""

    def see_session(self, obj: dict[str, Any], *, deleted: bool = False) -> None:
        key = _key(obj)
        if deleted:
            self.sessions.pop(key, None)
            return
        session = SessionView(obj)
        pending = int(session.queue_pending or 0)
        self.sessions[key] = SessionFacts(
            reconciled=bool(session.phase),
            deleting_with_finalizer=session.deleting and SESSION_FINALIZER in session.finalizers,
            # Held back by its tree's bound: the wake-up is another object's event, so a missed
            # one is repaired here too (held-back sessions are few: at most the tree's waiting ones).
            idle_with_queue=session.phase == SessionPhase.IDLE.value and pending > 0 and not session.paused,
            pending=pending)

    def see_input(self, obj: dict[str, Any], *, deleted: bool = False) -> None:
        key = _key(obj)
        if deleted:
            self.inputs.pop(key, None)
            return
        received = InputView(obj)
        pending, kind = received.pending, received.kind
        self.inputs[key] = InputFacts(
            session=received.session_name,
            pending_message=pending and kind == InputKind.MESSAGE.value,
            open_continue=pending and kind == InputKind.CONTINUE.value,
            releasable=received.deleting and INPUT_FINALIZER in received.finalizers)

    def see_run(self, obj: dict[str, Any], *, deleted: bool = False) -> None:
        key = _key(obj)
        run = RunView(obj)
        if deleted or run.terminal:
            self.unfinished_runs.pop(key, None)
            self.run_visits.pop(key, None)
        else:
            self.unfinished_runs[key] = bool(run.cancel_requested)
            self.touch_run(key)

    # The recovery scan's visits: a run waits for the scan only as long as nothing but an event
    # can change it (``execution.segments.quiet_for``); any event of the run, its Job or its
    # pods makes it due again, so a step that failed on that event is retried at the next scan.
    def touch_run(self, key: Key) -> None:
        if key in self.unfinished_runs:
            self.run_visits[key] = TOUCHED

    def run_due(self, key: Key, now: float) -> bool:
        return self.run_visits.get(key, TOUCHED) <= now

    def visiting(self, key: Key, now: float) -> None:
        """A scan's pass starts: an event during it is told apart by ``TOUCHED``."""
        self.run_visits[key] = now

    def visited(self, key: Key, started: float, until: float) -> None:
        """The pass that started at ``started`` found the run quiet until ``until``, unless an
        event touched the run meanwhile (then it stays due)."""
        if self.run_visits.get(key) == started:
            self.run_visits[key] = until

    def sessions_out_of_step(self) -> list[Key]:
        """Sessions whose last written status disagrees with their inputs as watched, that
        were never reconciled, that owe a claim, or whose deletion or inputs' deletion waits."""
        pending: dict[Key, int] = {}
        attention: set[Key] = set()
        for (namespace, _), facts in self.inputs.items():
            key = (namespace, facts.session)
            if facts.pending_message:
                pending[key] = pending.get(key, 0) + 1
            if facts.open_continue or facts.releasable:
                attention.add(key)
        out = []
        for key, s in self.sessions.items():
            if not s.reconciled or s.deleting_with_finalizer or s.idle_with_queue or key in attention \
                    or pending.get(key, 0) != s.pending:
                out.append(key)
        return out

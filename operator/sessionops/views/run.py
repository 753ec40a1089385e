"""What the controllers read of an AgentRun (``sessionops.api.run``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sessionops.api.names import CLAIMED_AT_LABEL, SEQUENCE_LABEL
from sessionops.api.run import TERMINAL_PHASES, RunPhase
from sessionops.views.fields import EMPTY, Field, View


class RunView(View):
    """An AgentRun's fields by their API names (``RunView(run).segments``)."""

    __slots__ = ()

    session_name: Field[str] = Field("spec", "sessionRef", "name", default="")
    inputs: Field[Sequence[str]] = Field("spec", "inputs", default=())
    context_snapshot: Field[Mapping[str, Any]] = Field("spec", "contextSnapshot", default=EMPTY)
    model: Field[str] = Field("spec", "contextSnapshot", "model", default="")
    source_agent: Field[str | None] = Field("spec", "contextSnapshot", "source", "agentName", default=None)
    cancel_requested: Field[bool] = Field("spec", "cancel", default=False)

    stored_phase: Field[str | None] = Field("status", "phase", default=None)
    segments: Field[Sequence[Mapping[str, Any]]] = Field("status", "segments", default=())
    waitpoint: Field[Mapping[str, Any]] = Field("status", "waitpoint", default=EMPTY)
    waitpoint_id: Field[str | None] = Field("status", "waitpoint", "id", default=None)
    waitpoint_kind: Field[str | None] = Field("status", "waitpoint", "kind", default=None)
    awaited_children: Field[Sequence[str]] = Field("status", "waitpoint", "children", default=())
    children: Field[Sequence[Mapping[str, Any]]] = Field("status", "children", default=())
    held_back: Field[str | None] = Field("status", "heldBack", default=None)
    steered: Field[Sequence[str]] = Field("status", "steered", default=())
    result_text: Field[str] = Field("status", "result", "text", default="")
    usage: Field[Mapping[str, Any]] = Field("status", "usage", default=EMPTY)
    cancellation: Field[Mapping[str, Any]] = Field("status", "cancellation", default=EMPTY)
    cancel_requested_at: Field[str | None] = Field("status", "cancellation", "requestedAt", default=None)
    completed_steps: Field[Sequence[str]] = Field("status", "cancellation", "completedSteps", default=())
    conditions: Field[Sequence[Mapping[str, Any]]] = Field("status", "conditions", default=())

    @property
    def phase(self) -> str:
        """The phase; a run whose status was not written yet is Pending."""
        return self.stored_phase or RunPhase.PENDING.value

    @property
    def owned_by_cancellation(self) -> bool:
        """Asked to cancel, Cancelling or Cancelled: the cancellation controller owns the run, so
        the worker must not write it."""
        return bool(self.cancel_requested) or self.phase in (RunPhase.CANCELLING.value, RunPhase.CANCELLED.value)

    @property
    def writable_by_worker(self) -> bool:
        """Not owned by the cancellation controller and without a final verdict."""
        return not self.owned_by_cancellation and self.phase not in (RunPhase.SUCCEEDED.value,
                                                                     RunPhase.FAILED.value)

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def last_segment(self) -> Mapping[str, Any] | None:
        segments = self.segments
        return segments[-1] if segments else None

    @property
    def sequence(self) -> int:
        """The receipt sequence of the turn's head input (the run's sequence label)."""
        return int(self.labels.get(SEQUENCE_LABEL) or 0)

    @property
    def claimed_at(self) -> int:
        """The last receipt sequence that existed when the run was claimed (its sequence for a
        run labelled before that label existed)."""
        labels = self.labels
        return int(labels.get(CLAIMED_AT_LABEL) or labels.get(SEQUENCE_LABEL) or 0)

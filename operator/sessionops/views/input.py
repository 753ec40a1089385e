"""What the controllers read of an AgentInput (``sessionops.api.input``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sessionops.api.input import InputKind, InputPhase
from sessionops.views.fields import Field, View


class InputView(View):
    """An AgentInput's fields by their API names (``InputView(inp).sequence``)."""

    __slots__ = ()

    session_name: Field[str] = Field("spec", "sessionRef", "name", default="")
    kind: Field[str] = Field("spec", "kind", default=InputKind.MESSAGE.value)
    delivery: Field[str | None] = Field("spec", "delivery", default=None)
    messages: Field[Sequence[Mapping[str, Any]]] = Field("spec", "messages", default=())
    resume_run: Field[str | None] = Field("spec", "run", default=None)
    waitpoint_id: Field[str | None] = Field("spec", "waitpointId", default=None)
    answers: Field[Sequence[Any] | None] = Field("spec", "answers", default=None)
    decisions: Field[Sequence[Mapping[str, Any]] | None] = Field("spec", "decisions", default=None)
    stored_sequence: Field[int | None] = Field("spec", "sequence", default=None)
    context_snapshot: Field[Mapping[str, Any] | None] = Field("spec", "contextSnapshot", default=None)
    submitted_by: Field[Mapping[str, Any] | None] = Field("spec", "submittedBy", default=None)

    stored_phase: Field[str | None] = Field("status", "phase", default=None)
    consumed_by: Field[str | None] = Field("status", "run", default=None)
    conditions: Field[Sequence[Mapping[str, Any]]] = Field("status", "conditions", default=())

    @property
    def phase(self) -> str:
        """The phase; an input whose status was not written yet is Pending."""
        return self.stored_phase or InputPhase.PENDING.value

    @property
    def sequence(self) -> int:
        """The receipt order in the session (0 before admission wrote it)."""
        return int(self.stored_sequence or 0)

    @property
    def pending(self) -> bool:
        """Still in the queue: Pending and not being deleted."""
        return self.phase == InputPhase.PENDING.value and not self.deleting

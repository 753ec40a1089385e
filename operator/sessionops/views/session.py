"""What the controllers read of an AgentSession (``sessionops.api.session``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sessionops.views.fields import EMPTY, Field, View


class SessionView(View):
    """An AgentSession's fields by their API names (``SessionView(session).active_run``)."""

    __slots__ = ()

    agent_name: Field[str] = Field("spec", "agentRef", "name", default="")
    context_snapshot: Field[Mapping[str, Any] | None] = Field("spec", "contextSnapshot", default=None)
    delegated_name: Field[str | None] = Field("spec", "delegation", "name", default=None)
    parent_run: Field[str | None] = Field("spec", "delegation", "parentRun", default=None)
    tool_call_id: Field[str | None] = Field("spec", "delegation", "toolCallId", default=None)

    status: Field[Mapping[str, Any]] = Field("status", default=EMPTY)
    phase: Field[str | None] = Field("status", "phase", default=None)
    model: Field[str | None] = Field("status", "model", default=None)
    approval_mode: Field[str | None] = Field("status", "approvalMode", default=None)
    active_run: Field[str | None] = Field("status", "activeRun", default=None)
    paused: Field[bool] = Field("status", "queue", "paused", default=False)
    queue_pending: Field[int] = Field("status", "queue", "pending", default=0)
    paused_reason: Field[str | None] = Field("status", "queue", "pausedReason", default=None)
    held_back: Field[str | None] = Field("status", "queue", "heldBack", default=None)
    stored_last_sequence: Field[int] = Field("status", "lastSequence", default=0)
    conditions: Field[Sequence[Mapping[str, Any]]] = Field("status", "conditions", default=())

    @property
    def last_sequence(self) -> int:
        """The last receipt sequence allocated (0 before the first input)."""
        return int(self.stored_last_sequence)

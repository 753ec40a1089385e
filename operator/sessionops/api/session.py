"""AgentSession: a conversation thread with its frozen configuration."""

from __future__ import annotations

import enum
from typing import Any, ClassVar, Literal

from pydantic import Field

from sessionops.api.common import STATUS_KEPT, ApiModel, ApprovalMode, Condition, ObjectRef
from sessionops.api.snapshot import PRESERVE, ContextSnapshot

# Session names feed run names (<session>-t<sequence>) and Job names (<run>-<n>),
# which must stay within the 63-character label limit.
SESSION_NAME_MAX = 40


class SessionPhase(enum.StrEnum):
    IDLE = "Idle"
    RUNNING = "Running"
    WAITING = "Waiting"
    CANCELLING = "Cancelling"
    PAUSED = "Paused"


CHILD_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"


class Delegation(ApiModel):
    """Where a child session comes from: a run's ``delegate`` tool call. Written by the
    delegating worker, checked and completed by admission, immutable."""

    parent_run: str = Field(description="The AgentRun that delegated (same namespace).", min_length=1,
                            max_length=63)
    tool_call_id: str = Field(description="The delegate tool call this child answers.", min_length=1,
                              max_length=256)
    name: str = Field(description="The name the model gave the child (1..64 of [A-Za-z0-9_-]).",
                      pattern=CHILD_NAME_PATTERN)
    inherit: bool = Field(default=True, description="True: the child runs with the parent run's frozen "
                                                    "configuration; false: agentRef's, frozen at dispatch.")


class AgentSessionSpec(ApiModel):
    """What the user asks for; admission adds the resolved contextSnapshot."""

    x_validations: ClassVar[list[dict[str, str]]] = [
        {"rule": "!has(self.model) || self.model.trim() != ''",
         "message": "must not be blank: omit the field to use the agent's or the system default",
         "fieldPath": ".model", "reason": "FieldValueInvalid"},
        {"rule": "self.agentRef == oldSelf.agentRef", "message": "agentRef is immutable",
         "fieldPath": ".agentRef"},
    ]

    agent_ref: ObjectRef = Field(description="The Agent this session runs, in the same namespace.")
    model: str | None = Field(
        default=None, max_length=253,
        description="Catalog model name. Omit to use the Agent's model or the system default. Updatable.")
    approval_mode: ApprovalMode | None = Field(
        default=None, description="Default or AlwaysTrust. Omit to use the Agent's or the system default. Updatable.")
    context: dict[str, Any] = Field(
        default_factory=dict, description="Values of the Agent's custom context fields (immutable).",
        json_schema_extra=PRESERVE)
    context_snapshot: ContextSnapshot | None = Field(
        default=None, description="The resolved configuration, written by admission (server-owned).")
    delegation: Delegation | None = Field(
        default=None, description="Set on a child session created by a run's delegate tool (immutable).")


class QueueStatus(ApiModel):
    pending: int = Field(default=0, description="Inputs waiting to be turned into runs.")
    paused: bool = Field(default=False, description="True after a failed or cancelled turn, until a Continue input.")
    paused_reason: str | None = Field(default=None, description="Why the queue is paused.")
    held_back: str | None = Field(default=None, description="Why pending work is held back (e.g. a concurrency bound).")


class AgentSessionStatus(ApiModel):
    """Observed state, written by the operator."""

    # Receipt allocates sequences as lastSequence + 1: going back would hand out a used
    # sequence, whose run name is taken, and stick the queue (issue 12).
    x_validations: ClassVar[list[dict[str, str]]] = [
        {"rule": "!has(oldSelf.lastSequence) || (has(self.lastSequence) && self.lastSequence >= oldSelf.lastSequence)",
         "message": "status.lastSequence never decreases (receipt sequences are never reused)",
         "fieldPath": ".lastSequence"},
    ]

    phase: SessionPhase | None = Field(default=None, description="Idle, Running, Waiting, Cancelling or Paused.")
    model: str | None = Field(default=None, description="Effective model for inputs received now.")
    approval_mode: ApprovalMode | None = Field(default=None, description="Effective approval mode.")
    active_run: str | None = Field(default=None, description="The AgentRun of the active turn.")
    queue: QueueStatus | None = Field(default=None, description="The pending input queue.")
    last_sequence: int = Field(default=0, description="Last receipt sequence allocated (compare-and-swap).")
    observed_generation: int | None = Field(default=None, description="Last generation the operator saw.")
    conditions: list[Condition] = Field(default_factory=list, description="Conditions of the session.")
    kopf: dict[str, Any] | None = Field(default=None, description="Operator bookkeeping.", json_schema_extra=PRESERVE)


class AgentSession(ApiModel):
    """A conversation thread with its frozen configuration."""

    x_validations: ClassVar[list[dict[str, str]]] = [
        {"rule": f"size(self.metadata.name) <= {SESSION_NAME_MAX}",
         "message": f"metadata.name: session names are at most {SESSION_NAME_MAX} characters "
                    "(they prefix run and Job names)"},
        STATUS_KEPT,
    ]

    api_version: str = "sessionops.dev/v1alpha1"
    kind: Literal["AgentSession"] = "AgentSession"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: AgentSessionSpec
    status: AgentSessionStatus | None = None

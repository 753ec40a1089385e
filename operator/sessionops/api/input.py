"""AgentInput: one received intent (message, resume, continue); spec immutable."""

from __future__ import annotations

import enum
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from sessionops.api import limits
from sessionops.api.common import STATUS_KEPT, ApiModel, ApprovalMode, Condition, ObjectRef
from sessionops.api.snapshot import PRESERVE, ContextSnapshot

MAX_MESSAGES = limits.MESSAGES
MAX_MESSAGE_CHARS = limits.MESSAGE_CHARS


def _too_big(what: str, texts: list[str], limit: int) -> None:
    if (size := limits.text_size(texts)) > limit:
        raise PydanticCustomError("size_budget", limits.over_budget(what, size, limit))


def _answer_texts(answers: list[Any] | None) -> list[str]:
    return [t for a in answers or [] for t in (a if isinstance(a, list) else [a]) if isinstance(t, str)]


class InputKind(enum.StrEnum):
    MESSAGE = "Message"
    RESUME = "Resume"
    CONTINUE = "Continue"


class Delivery(enum.StrEnum):
    STEER = "Steer"
    FOLLOW_UP = "FollowUp"


class InputPhase(enum.StrEnum):
    PENDING = "Pending"
    CONSUMED = "Consumed"
    REJECTED = "Rejected"
    CANCELLED = "Cancelled"


class Decision(enum.StrEnum):
    APPROVE = "Approve"
    REJECT = "Reject"


class InputMessage(ApiModel):
    x_validations: ClassVar[list[dict[str, str]]] = [
        {"rule": "self.content.trim() != ''", "message": "must not be blank (whitespace only)",
         "fieldPath": ".content", "reason": "FieldValueInvalid"},
    ]
    content: str = Field(description="Text of the message.", min_length=1, max_length=MAX_MESSAGE_CHARS)

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise PydanticCustomError("blank", "must not be blank (whitespace only)")
        return value


class Overrides(ApiModel):
    """One-shot configuration for this input only (FollowUp only); never rewrites the session."""

    x_validations: ClassVar[list[dict[str, str]]] = [
        {"rule": "!has(self.model) || self.model.trim() != ''", "message": "must not be blank",
         "fieldPath": ".model"},
    ]
    model: str | None = Field(default=None, max_length=253, description="Catalog model name for this input only.")
    approval_mode: ApprovalMode | None = Field(default=None, description="Approval mode for this input only.")


class CallDecision(ApiModel):
    call_id: str = Field(description="callId of a pending call of the waitpoint.", min_length=1, max_length=253)
    decision: Decision = Field(description="Approve or Reject.")
    message: str | None = Field(default=None, max_length=4096, description="Told to the model with a rejection.")


class SubmittedBy(ApiModel):
    """The identity that sent the input, from the admission request (never from the client)."""

    username: str = Field(description="User name.")
    uid: str | None = Field(default=None, description="User UID.")
    groups: list[str] = Field(default_factory=list, description="Groups of the user.")
    extra: dict[str, list[str]] = Field(default_factory=dict, description="Extra authentication attributes.")


class AgentInputSpec(ApiModel):
    """One received intent. Immutable after creation."""

    x_validations: ClassVar[list[dict[str, str]]] = [
        {"rule": "self == oldSelf", "message": "spec is immutable: send a new input instead"},
        {"rule": "(has(self.kind) ? self.kind : 'Message') != 'Message' || "
                 "(has(self.messages) && size(self.messages) > 0)",
         "message": "a Message input needs at least one message", "fieldPath": ".messages",
         "reason": "FieldValueRequired"},
        {"rule": "(has(self.kind) ? self.kind : 'Message') == 'Message' || !has(self.messages)",
         "message": "only Message inputs carry messages", "fieldPath": ".messages", "reason": "FieldValueForbidden"},
        {"rule": "!has(self.overrides) || (has(self.delivery) && self.delivery == 'FollowUp')",
         "message": "overrides apply to FollowUp delivery only", "fieldPath": ".overrides",
         "reason": "FieldValueForbidden"},
        # Rules never read spec.answers: its items are untyped (string or list), which a real
        # API server's CEL type checker cannot compile; the webhook checks answers instead.
        {"rule": "(has(self.kind) ? self.kind : 'Message') != 'Resume' || (has(self.run) && has(self.waitpointId))",
         "message": "a Resume input names run and waitpointId", "reason": "FieldValueRequired"},
        {"rule": "(has(self.kind) ? self.kind : 'Message') == 'Resume' || "
                 "!(has(self.run) || has(self.waitpointId) || has(self.decisions))",
         "message": "run, waitpointId and decisions belong to Resume inputs", "reason": "FieldValueForbidden"},
        {"rule": "!has(self.delivery) || (has(self.kind) ? self.kind : 'Message') == 'Message'",
         "message": "delivery applies to Message inputs only", "fieldPath": ".delivery",
         "reason": "FieldValueForbidden"},
    ]

    session_ref: ObjectRef = Field(description="The AgentSession this input is for.")
    kind: InputKind = Field(default=InputKind.MESSAGE, description="Message (default), Resume or Continue.")
    delivery: Delivery | None = Field(
        default=None,
        description="Steer (into the active turn) or FollowUp (queued FIFO). Defaults to Steer when a turn is active.")
    messages: list[InputMessage] | None = Field(
        default=None, max_length=MAX_MESSAGES, description="Messages of a Message input (1 to 20).")
    overrides: Overrides | None = Field(default=None, description="One-shot model/approval for a FollowUp.")
    run: str | None = Field(default=None, max_length=253, description="Resume: the waiting AgentRun.")
    waitpoint_id: str | None = Field(default=None, max_length=253, description="Resume: the waitpoint answered.")
    answers: list[Any] | None = Field(
        default=None, max_length=64,
        description="Resume of a question: one answer per question in order (string, or list of strings).",
        json_schema_extra={"items": PRESERVE})
    decisions: list[CallDecision] | None = Field(
        default=None, max_length=256, description="Resume of an approval: one decision per pending call.")
    sequence: int | None = Field(default=None, description="Receipt order in the session (written by admission).")
    context_snapshot: ContextSnapshot | None = Field(
        default=None, description="Configuration this input runs with (written by admission).")
    submitted_by: SubmittedBy | None = Field(default=None, description="Who sent it (written by admission).")

    @field_validator("messages")
    @classmethod
    def _messages_fit(cls, value: list[InputMessage] | None) -> list[InputMessage] | None:
        if value is not None:
            _too_big("the messages", [m.content for m in value], limits.INPUT_CONTENT_BYTES)
        return value

    @field_validator("answers")
    @classmethod
    def _answers_fit(cls, value: list[Any] | None) -> list[Any] | None:
        # Their shape (string or list of strings per question) is checked against the waitpoint.
        for answer in value or []:
            picked = answer if isinstance(answer, list) else [answer]
            if isinstance(answer, list) and len(answer) > limits.ANSWER_OPTIONS:
                raise PydanticCustomError("too_many", f"Too many: {len(answer)} options in one answer, "
                                                      f"more than the {limits.ANSWER_OPTIONS} allowed")
            if any(isinstance(p, str) and len(p) > limits.ANSWER_CHARS for p in picked):
                raise PydanticCustomError("too_long", f"Too long: an answer may have at most "
                                                      f"{limits.ANSWER_CHARS} characters")
        _too_big("the answers", _answer_texts(value), limits.INPUT_CONTENT_BYTES)
        return value

    @field_validator("decisions")
    @classmethod
    def _decisions_fit(cls, value: list[CallDecision] | None, info: ValidationInfo) -> list[CallDecision] | None:
        texts = _answer_texts(info.data.get("answers")) + [d.message or "" for d in value or []]
        _too_big("the answers and decision messages", texts, limits.INPUT_CONTENT_BYTES)
        return value


class AgentInputStatus(ApiModel):
    """Observed state, written by the operator."""

    # Settled means no longer Pending: Consumed (a run took it), Rejected or Cancelled. A settled
    # input never returns to the queue or changes its verdict, and a consumed one keeps its run
    # (issue 12: a consumed input set to Cancelled or Pending was never repaired).
    x_validations: ClassVar[list[dict[str, str]]] = [
        {"rule": "!has(oldSelf.phase) || oldSelf.phase == 'Pending' || "
                 "(has(self.phase) && self.phase == oldSelf.phase)",
         "message": "status.phase of a settled input (Consumed, Rejected, Cancelled) never changes",
         "fieldPath": ".phase"},
        {"rule": "!has(oldSelf.phase) || oldSelf.phase != 'Consumed' || "
                 "(has(self.run) == has(oldSelf.run) && (!has(self.run) || self.run == oldSelf.run))",
         "message": "status.run of a consumed input never changes", "fieldPath": ".run"},
    ]

    phase: InputPhase | None = Field(default=None, description="Pending, Consumed, Rejected or Cancelled.")
    run: str | None = Field(default=None, description="The AgentRun that consumed this input.")
    observed_generation: int | None = Field(default=None, description="Last generation the operator saw.")
    conditions: list[Condition] = Field(default_factory=list, description="Conditions of the input.")
    kopf: dict[str, Any] | None = Field(default=None, description="Operator bookkeeping.", json_schema_extra=PRESERVE)


class AgentInput(ApiModel):
    """One received intent; its metadata.name is the client's idempotency key."""

    x_validations: ClassVar[list[dict[str, str]]] = [STATUS_KEPT]

    api_version: str = "sessionops.dev/v1alpha1"
    kind: Literal["AgentInput"] = "AgentInput"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: AgentInputSpec
    status: AgentInputStatus | None = None

"""AgentRun: one turn, written by the operator (users only set spec.cancel)."""

from __future__ import annotations

import enum
from typing import Any, ClassVar, Literal

from pydantic import Field

from sessionops.api.common import STATUS_KEPT, ApiModel, Condition, ObjectRef
from sessionops.api.snapshot import PRESERVE, ContextSnapshot

RESULT_TEXT_MAX = 32_768


class RunPhase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    WAITING = "Waiting"
    CANCELLING = "Cancelling"
    CANCELLED = "Cancelled"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


TERMINAL_PHASES = frozenset({RunPhase.CANCELLED.value, RunPhase.SUCCEEDED.value, RunPhase.FAILED.value})


class SegmentKind(enum.StrEnum):
    START = "Start"
    RESUME = "Resume"
    RETRY = "Retry"


class WaitpointKind(enum.StrEnum):
    APPROVAL = "Approval"
    QUESTION = "Question"
    DELEGATION = "Delegation"


class Segment(ApiModel):
    """One execution segment: one worker Job."""

    name: str = Field(description="Segment name, equal to its Job's name (<run>-<n>).")
    kind: SegmentKind = Field(description="Start, Resume or Retry.")
    job: str = Field(description="Name of the batch/v1 Job.")
    input: str | None = Field(default=None, description="The Resume input this segment answers.")
    started_at: str | None = Field(default=None, description="When the Job was created.")
    finished_at: str | None = Field(default=None, description="When the segment ended.")
    outcome: str | None = Field(default=None, description="Succeeded, Waiting, Failed, Lost, NotStarted or Cancelled.")
    reason: str | None = Field(default=None, description="Why the segment was lost or never started.")


class PendingCall(ApiModel):
    call_id: str = Field(description="Id used in a Resume decision.")
    tool_call_id: str = Field(description="The model's tool_call_id this call is bound to.")
    tool: str = Field(description="Tool name.")
    args: dict[str, Any] = Field(default_factory=dict, description="Tool arguments.", json_schema_extra=PRESERVE)
    allowed_decisions: list[str] = Field(default_factory=lambda: ["Approve", "Reject"],
                                         description="Decisions a Resume may give.")


class Question(ApiModel):
    question_id: str = Field(description="Deterministic id of the question.")
    question: str = Field(description="The question text.")
    options: list[str] = Field(default_factory=list, description="Offered answers.")
    multi_select: bool = Field(default=False, description="The answer is a list of options.")
    allow_other: bool = Field(default=False, description="Answers outside the options are accepted.")


class Waitpoint(ApiModel):
    """What a waiting turn needs to continue."""

    id: str = Field(description="Deterministic waitpoint id; a Resume input names it.")
    kind: WaitpointKind = Field(description="Approval, Question or Delegation.")
    calls: list[PendingCall] = Field(default_factory=list, description="Approval: the calls to decide.")
    questions: list[Question] = Field(default_factory=list, description="Question: the questions to answer.")
    children: list[str] = Field(default_factory=list, description="Delegation: child sessions awaited.")


class ChildStatus(ApiModel):
    """A child session a Delegation waitpoint waits on, as seen from the parent run."""

    name: str = Field(description="The name the model gave the child.")
    session: str = Field(description="The child AgentSession.")
    run: str | None = Field(default=None, description="The child's turn, once claimed.")
    phase: str | None = Field(default=None, description="The child turn's phase (Queued before it is claimed).")
    waiting_at: str | None = Field(
        default=None, description="Path (session/run/waitpoint, nested for grandchildren) of an approval or "
                                  "question inside the child that waits for an answer.")
    held_back: str | None = Field(default=None, description="Why the child's turn has not started yet.")
    cut_off: bool | None = Field(default=None, description="True when the parent stopped waiting at its deadline "
                                                           "before this child's turn ended (the child is cancelled).")


class RunResult(ApiModel):
    text: str = Field(default="", max_length=RESULT_TEXT_MAX, description="Final answer (bounded).")
    segment: str | None = Field(default=None, description="The segment whose output is the turn's result.")


class Usage(ApiModel):
    input_tokens: int = Field(default=0, description="Prompt tokens over all model calls of the turn.")
    output_tokens: int = Field(default=0, description="Completion tokens over all model calls of the turn.")


class Cancellation(ApiModel):
    requested_at: str | None = Field(default=None, description="When cancel was observed.")
    completed_steps: list[str] = Field(default_factory=list, description="Cleanup steps done, in order.")
    completed_at: str | None = Field(default=None, description="When cleanup finished.")


class AgentRunSpec(ApiModel):
    """Written by the operator; users set only cancel."""

    x_validations: ClassVar[list[dict[str, str]]] = [
        {"rule": "self.sessionRef == oldSelf.sessionRef && self.inputs == oldSelf.inputs && "
                 "self.contextSnapshot == oldSelf.contextSnapshot",
         "message": "only spec.cancel may change on a run"},
        {"rule": "!(has(oldSelf.cancel) && oldSelf.cancel) || (has(self.cancel) && self.cancel)",
         "message": "cancel can only change from false to true", "fieldPath": ".cancel"},
    ]

    session_ref: ObjectRef = Field(description="The session this turn belongs to.")
    inputs: list[str] = Field(description="The inputs this turn answers, in order.", min_length=1)
    context_snapshot: ContextSnapshot = Field(description="The frozen configuration of the turn.")
    cancel: bool = Field(default=False, description="Set to true to cancel the turn (cannot be undone).")


_TERMINAL_LIST = ", ".join(f"'{p}'" for p in sorted(TERMINAL_PHASES))


class AgentRunStatus(ApiModel):
    """Observed state, written by the operator."""

    # A finished turn is a record: its phase, waitpoint and result never change again, so a
    # forged waitpoint cannot reopen it for a Resume (issue 12).
    x_validations: ClassVar[list[dict[str, str]]] = [
        {"rule": f"!has(oldSelf.phase) || !(oldSelf.phase in [{_TERMINAL_LIST}]) || "
                 "(has(self.phase) && self.phase == oldSelf.phase)",
         "message": "status.phase of a finished run (Succeeded, Failed, Cancelled) never changes",
         "fieldPath": ".phase"},
        {"rule": f"!has(oldSelf.phase) || !(oldSelf.phase in [{_TERMINAL_LIST}]) || "
                 "(has(self.waitpoint) == has(oldSelf.waitpoint) && "
                 "(!has(self.waitpoint) || self.waitpoint == oldSelf.waitpoint))",
         "message": "status.waitpoint of a finished run never changes", "fieldPath": ".waitpoint"},
        {"rule": f"!has(oldSelf.phase) || !(oldSelf.phase in [{_TERMINAL_LIST}]) || "
                 "(has(self.result) == has(oldSelf.result) && (!has(self.result) || self.result == oldSelf.result))",
         "message": "status.result of a finished run never changes", "fieldPath": ".result"},
    ]

    phase: RunPhase | None = Field(default=None, description="Pending, Running, Waiting, Cancelling, Cancelled, "
                                                            "Succeeded or Failed.")
    segments: list[Segment] = Field(default_factory=list, description="Execution segments (one Job each).")
    waitpoint: Waitpoint | None = Field(default=None, description="Set only while Waiting.")
    result: RunResult | None = Field(default=None, description="The turn's result (Succeeded only).")
    usage: Usage | None = Field(default=None, description="Token usage of the turn.")
    children: list[ChildStatus] = Field(default_factory=list,
                                        description="Delegation: the awaited child sessions and their turns.")
    held_back: str | None = Field(default=None, description="Why a resume waits: the delegation tree runs as many "
                                                            "turns as its bound allows.")
    steered: list[str] = Field(default_factory=list, description="Steer inputs delivered into this turn.")
    cancellation: Cancellation | None = Field(default=None, description="Cancellation progress.")
    observed_generation: int | None = Field(default=None, description="Last generation the operator saw.")
    conditions: list[Condition] = Field(default_factory=list, description="Conditions of the run.")
    kopf: dict[str, Any] | None = Field(default=None, description="Operator bookkeeping.", json_schema_extra=PRESERVE)


class AgentRun(ApiModel):
    """One turn of a session."""

    x_validations: ClassVar[list[dict[str, str]]] = [STATUS_KEPT]

    api_version: str = "sessionops.dev/v1alpha1"
    kind: Literal["AgentRun"] = "AgentRun"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: AgentRunSpec
    status: AgentRunStatus | None = None



"""AgentTranscript: one bounded chunk of a turn's transcript, written by the run's worker.

A turn's transcript is the ordered union of its chunks (``spec.index`` 0, 1, ...), each
owned by the AgentRun (garbage-collected with it) and labelled with session and run.
Steps carry deterministic ids derived from message ids and tool call ids, so a retried
segment that rewrites its chunks replaces steps instead of adding them.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from sessionops.api.common import ApiModel
from sessionops.api.snapshot import PRESERVE

CHUNK_BYTES_MAX = 256 * 1024
"""Bound of one chunk object's JSON (etcd stores up to 1.5 MiB; we keep well below)."""
TOOL_RESULT_MAX = 16 * 1024
"""Default bound of one tool result's text in the transcript (the checkpoint keeps it whole)."""
TRUNCATION_MARKER = "\n[... truncated: {dropped} more characters ...]"
CHUNK_OVERHEAD = 4 * 1024
"""Room left in a chunk for metadata (names, labels, owner reference, managed fields)."""
REDACTED = "[REDACTED]"


class StepKind(enum.StrEnum):
    USER_MESSAGE = "UserMessage"
    STEER = "Steer"
    ASSISTANT_MESSAGE = "AssistantMessage"
    TOOL_CALL = "ToolCall"
    DECISION = "Decision"
    TOOL_RESULT = "ToolResult"
    QUESTION = "Question"
    ANSWER = "Answer"
    CHILD = "Child"
    WAIT = "Wait"
    FINAL_ANSWER = "FinalAnswer"


class TranscriptStep(ApiModel):
    """One thing that happened in the turn."""

    id: str = Field(description="Deterministic step id (from message and tool call ids).")
    kind: StepKind = Field(description="UserMessage, Steer, AssistantMessage, ToolCall, Decision, ToolResult, "
                                       "Question, Answer, Child, Wait or FinalAnswer.")
    at: str | None = Field(default=None, description="When the worker first published the step.")
    segment: str | None = Field(default=None, description="The execution segment that produced the step.")
    text: str | None = Field(default=None, description="Message text, tool result (bounded) or answer.")
    tool: str | None = Field(default=None, description="Tool name (ToolCall, ToolResult, Decision).")
    tool_call_id: str | None = Field(default=None, description="The model's tool call id the step belongs to.")
    args: dict[str, Any] | None = Field(default=None, description="Tool arguments (secrets redacted).",
                                        json_schema_extra=PRESERVE)
    status: str | None = Field(default=None, description="ToolResult: success, error or cancelled; Decision: "
                                                         "Approve or Reject; Child: the child's phase.")
    decided_by: str | None = Field(default=None, description="Decision and Answer: who sent the resume input.")
    truncated: bool | None = Field(default=None, description="True when text was cut to the configured bound.")
    usage: dict[str, int] | None = Field(default=None, description="Model call usage (inputTokens, outputTokens).")


class AgentTranscriptSpec(ApiModel):
    """Written by the run's worker; readers list the chunks by the run label."""

    run: str = Field(description="The AgentRun (turn) this chunk belongs to.")
    session: str = Field(description="The AgentSession of the run.")
    index: int = Field(ge=0, description="Position of this chunk in the turn's transcript (0, 1, ...).")
    steps: list[TranscriptStep] = Field(default_factory=list, description="Steps in order.")


class AgentTranscript(ApiModel):
    """A chunk of a turn's transcript (at most 256 KiB), owned by its AgentRun."""

    api_version: str = "sessionops.dev/v1alpha1"
    kind: Literal["AgentTranscript"] = "AgentTranscript"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: AgentTranscriptSpec = Field(description="The chunk's run, position and steps.")


def chunk_name(run: str, index: int) -> str:
    return f"{run}-t{index}"


def size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def chunks(steps: Sequence[dict[str, Any]], limit: int = CHUNK_BYTES_MAX - CHUNK_OVERHEAD) -> list[list[dict[str, Any]]]:
    """Steps (wire form) cut, in order, into lists whose JSON stays within ``limit`` bytes each.
    Deterministic: the same steps give the same chunks, so a rewrite changes only the tail.
    Shared by the worker and the cancellation, which both append to a run's transcript."""
    out: list[list[dict[str, Any]]] = [[]]
    used = 2
    for step in steps:
        n = size(step) + 1
        if out[-1] and used + n > limit:
            out.append([])
            used = 2
        out[-1].append(step)
        used += n
    return out if out[0] else []

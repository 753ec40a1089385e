"""What a segment reports (pure): the verdict read from the thread, and the run status
merge patch that records it.

Verdicts: ``Waiting`` + waitpoint (pending interrupts), ``Succeeded`` + result + usage
(the turn ended with an answer), ``Failed`` + a ``Failed`` condition whose reason is one
of ``REASONS``. Infrastructure trouble is not a verdict: the worker exits non-zero and
the operator retries from the checkpoint.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from sessionops.agent.limits import step_limit_message
from sessionops.api.run import RESULT_TEXT_MAX, RunPhase, Usage, Waitpoint
from sessionops.api.run_conditions import with_phase
from sessionops.views import RunView

MODEL_ERROR = "ModelError"
"""The model call failed after its retries (provider error, unknown model, bad request)."""
MODEL_UNAVAILABLE = "ModelUnavailable"
"""The turn's model is not in the catalog any more, or its entry cannot be used."""
TOOL_ERROR = "ToolError"
"""A tool failed in a way it could not report to the model as an error result."""
STEP_LIMIT = "StepLimit"
"""The turn reached maxExecutionSteps model calls."""
ACCESS_REVOKED = "AccessRevoked"
"""An identity behind the turn may no longer use the Agent."""
RESUME_INVALID = "ResumeInvalid"
"""The Resume input does not complete the thread's current waitpoint."""
INVALID_SNAPSHOT = "InvalidSnapshot"
"""The run's frozen configuration does not validate (no retry can fix it)."""
REASONS = (MODEL_ERROR, MODEL_UNAVAILABLE, TOOL_ERROR, STEP_LIMIT, ACCESS_REVOKED, RESUME_INVALID, INVALID_SNAPSHOT)

CONDITION_MESSAGE_MAX = 1024
TRUNCATED = "\n[... truncated ...]"


@dataclasses.dataclass(frozen=True)
class Verdict:
    phase: str
    waitpoint: Waitpoint | None = None
    text: str | None = None
    reason: str | None = None
    message: str | None = None


def failed(reason: str, message: str) -> Verdict:
    return Verdict(RunPhase.FAILED.value, reason=reason, message=bound(message, CONDITION_MESSAGE_MAX))


def bound(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - len(TRUNCATED)] + TRUNCATED


def message_text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = [c if isinstance(c, str) else c.get("text", "") for c in content
             if isinstance(c, str) or (isinstance(c, dict) and c.get("type") == "text")]
    return "".join(parts)


def turn_messages(messages: Sequence[BaseMessage], start_ids: Iterable[str]) -> list[BaseMessage]:
    """The messages of this turn: from its first start input on. When summarization has
    folded the start away, every message left is this turn's (a summary keeps the tail)."""
    ids = set(start_ids)
    for i, m in enumerate(messages):
        if m.id in ids:
            return list(messages[i:])
    return list(messages)


def usage_of(messages: Iterable[BaseMessage]) -> Usage:
    """Sum of ``usage_metadata`` over these AI messages."""
    inp = out = 0
    for m in messages:
        if isinstance(m, AIMessage) and m.usage_metadata:
            inp += int(m.usage_metadata.get("input_tokens") or 0)
            out += int(m.usage_metadata.get("output_tokens") or 0)
    return Usage(input_tokens=inp, output_tokens=out)


def hit_step_limit(message: BaseMessage, max_steps: int) -> bool:
    """The step-limit middleware ends the turn with this fixed, model-less message."""
    return (isinstance(message, AIMessage) and not message.tool_calls and not message.usage_metadata
            and message_text(message) == step_limit_message(max_steps))


def verdict_of(messages: Sequence[BaseMessage], waitpoint: Waitpoint | None, *, has_next: bool,
               max_steps: int) -> Verdict | None:
    """The verdict of a thread that stopped; None when it stopped with nothing to report
    (tasks pending without an interrupt: the segment did not finish its work)."""
    if waitpoint is not None:
        return Verdict(RunPhase.WAITING.value, waitpoint=waitpoint)
    if has_next or not messages:
        return None
    last = messages[-1]
    if not isinstance(last, AIMessage) or last.tool_calls:
        return None
    if hit_step_limit(last, max_steps):
        return failed(STEP_LIMIT, step_limit_message(max_steps))
    return Verdict(RunPhase.SUCCEEDED.value, text=bound(message_text(last), RESULT_TEXT_MAX))


def running_patch(run: Mapping[str, Any], now: datetime.datetime) -> dict[str, Any]:
    """The segment runs (Ready: this very pod runs it): a Resume's answered waitpoint is gone
    from now on."""
    return with_phase(run, {"phase": RunPhase.RUNNING.value, "waitpoint": None}, now)


def status_patch(verdict: Verdict, *, run: Mapping[str, Any], segment: str, usage: Usage | None,
                 now: datetime.datetime) -> dict[str, Any]:
    """The run status merge patch for a verdict (absolute values: repeating it is safe)."""
    patch: dict[str, Any] = {"phase": verdict.phase, "waitpoint": None}
    if usage is not None:
        previous = Usage.model_validate(RunView(run).usage)
        # Never report less than a previous segment did (summarization may have folded
        # earlier AI messages of the turn away).
        patch["usage"] = Usage(input_tokens=max(usage.input_tokens, previous.input_tokens),
                               output_tokens=max(usage.output_tokens, previous.output_tokens)).dump()
    if verdict.phase == RunPhase.WAITING.value and verdict.waitpoint is not None:
        patch["waitpoint"] = verdict.waitpoint.dump()
        return with_phase(run, patch, now, reason=verdict.waitpoint.kind,
                          message=f"segment {segment} waits at waitpoint {verdict.waitpoint.id}")
    if verdict.phase == RunPhase.SUCCEEDED.value:
        patch["result"] = {"text": verdict.text or "", "segment": segment}
        return with_phase(run, patch, now, reason="TurnCompleted", message=f"segment {segment} answered")
    return with_phase(run, patch, now, reason=verdict.reason or "Failed",
                      message=f"segment {segment}: {verdict.message or ''}".strip())

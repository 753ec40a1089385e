"""The turn's transcript as steps (pure): a projection of the thread's messages plus the
resume decisions and answers, merged into what was published before, cut into chunks.

1. Step ids derive from message ids and tool call ids (``call:<tool_call_id>``,
   ``result:<tool_call_id>``, ...), so a retried segment that projects the same thread
   again produces the same ids: a merge by id neither loses nor doubles a step.
2. The merge keeps every step published before (summarization may fold messages away
   from the thread) with its first ``at`` and ``segment``, and appends new steps in the
   order they became known (a decision after the wait it ends).
3. Known secret values are replaced before anything leaves the worker; tool results are
   cut to the configured bound with an explicit marker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from sessionops.agent.steering import STEER_ID_PREFIX
from sessionops.agent.tools import question_id
from sessionops.api.transcript import (
    REDACTED,
    TRUNCATION_MARKER,
    StepKind,
    TranscriptStep,
)
from sessionops.views import InputView
from sessionops.worker.outcome import message_text

TEXT_MAX = 32 * 1024
"""Bound of any other step text (assistant messages, user messages): a chunk holds several."""
SECRET_MIN = 4
"""Shorter values are not redacted: replacing every "a" would destroy the text, not protect it."""
QUESTION_TOOL = "ask_user"
DELEGATE_TOOL = "delegate"

Step = dict[str, Any]


def cap(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters with an explicit marker, and whether it was cut."""
    if len(text) <= limit:
        return text, False
    return text[:limit] + TRUNCATION_MARKER.format(dropped=len(text) - limit), True


class Redactor:
    """Replaces known secret values (model key, MCP headers, database credentials)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first: a secret containing another is replaced whole.
        self.secrets = sorted({s for s in secrets if s and len(s) >= SECRET_MIN}, key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            value = value.replace(secret, REDACTED)
        return value

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value


def _usage(message: AIMessage) -> dict[str, int] | None:
    meta = message.usage_metadata
    if not meta:
        return None
    return {"inputTokens": int(meta.get("input_tokens") or 0), "outputTokens": int(meta.get("output_tokens") or 0)}


def project(messages: Sequence[BaseMessage], *, decisions: Mapping[str, Step] | None = None,
            answers: Mapping[str, Step] | None = None, final: bool = False,
            redactor: Redactor | None = None, result_max: int) -> list[Step]:
    """Steps of the turn's messages, in order. ``decisions``: tool_call_id -> Decision step;
    ``answers``: question id -> Answer step; ``final``: the last
    assistant message is the turn's final answer."""
    redact = redactor or Redactor(())
    decisions = decisions or {}
    answers = answers or {}
    steps: list[Step] = []
    call_args: dict[str, dict[str, Any]] = {}
    last_ai = max((i for i, m in enumerate(messages) if isinstance(m, AIMessage)), default=-1)
    for i, m in enumerate(messages):
        if isinstance(m, HumanMessage):
            steer = (m.id or "").startswith(STEER_ID_PREFIX)
            text, cut = cap(redact.text(message_text(m)), TEXT_MAX)
            steps.append(_step(m.id if steer else f"user:{m.id}",
                               StepKind.STEER if steer else StepKind.USER_MESSAGE, text=text, truncated=cut))
        elif isinstance(m, AIMessage):
            text, cut = cap(redact.text(message_text(m)), TEXT_MAX)
            is_final = final and i == last_ai and not m.tool_calls
            steps.append(_step(f"assistant:{m.id}", StepKind.FINAL_ANSWER if is_final else StepKind.ASSISTANT_MESSAGE,
                               text=text, truncated=cut, usage=_usage(m)))
            for call in m.tool_calls:
                call_id = call["id"] or ""
                args = redact.value(dict(call.get("args") or {}))
                call_args[call_id] = args
                if call["name"] == QUESTION_TOOL:
                    steps.append(_step(f"question:{call_id}", StepKind.QUESTION, tool=call["name"],
                                       tool_call_id=call_id, args=args))
                    for n in range(len(args.get("questions") or [])):
                        if (answer := answers.get(question_id(call_id, n))) is not None:
                            steps.append(answer)
                else:
                    steps.append(_step(f"call:{call_id}", StepKind.TOOL_CALL, tool=call["name"],
                                       tool_call_id=call_id, args=args))
                if call_id in decisions:
                    steps.append(decisions[call_id])
        elif isinstance(m, ToolMessage):
            text, cut = cap(redact.text(message_text(m)), result_max)
            status = "cancelled" if (m.id or "").startswith("cancel:") else (m.status or "success")
            child = m.name == DELEGATE_TOOL
            steps.append(_step(f"result:{m.tool_call_id}", StepKind.CHILD if child else StepKind.TOOL_RESULT,
                               tool=m.name, tool_call_id=m.tool_call_id, text=text, truncated=cut, status=status,
                               # A child's result names the child (the call's name and message).
                               args=call_args.get(m.tool_call_id) if child else None))
    return steps


def _step(id_: str, kind: StepKind, **fields: Any) -> Step:
    """A step in its wire form (camelCase, validated by the API model)."""
    return TranscriptStep(id=id_, kind=kind, **{k: v for k, v in fields.items() if v not in (None, False)}).dump()


def decision_steps(waitpoint: Mapping[str, Any] | None, resume: Mapping[str, Any] | None) -> dict[str, Step]:
    """tool_call_id -> Decision step, from an Approval waitpoint and the resume input deciding it."""
    if not waitpoint or not resume:
        return {}
    answer = InputView(resume)
    by = ((answer.submitted_by or {}).get("username")) or None
    calls = {c.get("callId"): c for c in waitpoint.get("calls") or []}
    out: dict[str, Step] = {}
    for d in answer.decisions or []:
        call = calls.get(d.get("callId"))
        if call is None:
            continue
        tcid = call.get("toolCallId") or ""
        out[tcid] = _step(f"decision:{tcid}", StepKind.DECISION, tool=call.get("tool"), tool_call_id=tcid,
                          status=d.get("decision"), decided_by=by, text=d.get("message") or None)
    return out


def answer_steps(waitpoint: Mapping[str, Any] | None, resume: Mapping[str, Any] | None,
                 redactor: Redactor | None = None) -> dict[str, Step]:
    """question id -> Answer step, from a Question waitpoint and the resume input answering it."""
    if not waitpoint or not resume:
        return {}
    redact = redactor or Redactor(())
    answered = InputView(resume)
    by = ((answered.submitted_by or {}).get("username")) or None
    out: dict[str, Step] = {}
    for q, answer in zip(waitpoint.get("questions") or [], answered.answers or [], strict=False):
        qid = q.get("questionId") or ""
        text = answer if isinstance(answer, str) else ", ".join(answer)
        out[qid] = _step(f"answer:{qid}", StepKind.ANSWER, text=redact.text(f"{q.get('question', '')} -> {text}"),
                         decided_by=by)
    return out


def wait_step(waitpoint: Mapping[str, Any]) -> Step:
    kind = waitpoint.get("kind") or ""
    what = {"Approval": [c.get("tool") for c in waitpoint.get("calls") or []],
            "Question": [q.get("question") for q in waitpoint.get("questions") or []],
            "Delegation": list(waitpoint.get("children") or [])}.get(kind, [])
    return _step(f"wait:{waitpoint.get('id')}", StepKind.WAIT, status=kind,
                 text=f"waiting for {kind.lower()}: {', '.join(map(str, what))}")


def merge(published: Sequence[Step], projected: Sequence[Step], *, segment: str, at: str) -> list[Step]:
    """Published steps updated in place by the projection, new steps appended in projection
    order (the order they became known: a decision after the wait it ends); ``at`` and
    ``segment`` of a published step never change."""
    out = [dict(s) for s in published]
    index = {s["id"]: i for i, s in enumerate(out)}
    for step in projected:
        if step["id"] in index:
            old = out[index[step["id"]]]
            out[index[step["id"]]] = {**step, "at": old.get("at", at), "segment": old.get("segment", segment)}
        else:
            index[step["id"]] = len(out)
            out.append({**step, "at": at, "segment": segment})
    return out

"""Waitpoints: pending interrupts of a thread as the public ``Waitpoint``, and back.

Reading: ``waitpoint_from_state(graph.get_state(config))`` after a segment stopped on
interrupts. Several interrupts can pend at once (parallel calls): approval calls come
first (one Approval waitpoint lists every waiting call); question calls wait until no
approval is pending (their tasks simply interrupt again when only the approvals are
resumed). The waitpoint id is a hash of its interrupt ids, so it is the same every time
the same waiting state is read, and a resume for a state that moved on is stale.

Writing: ``build_resume(state, answers=..., decisions=...)`` validates a Resume input
against the current waitpoint and returns ``Command(resume={interrupt_id: value, ...})``.
``validate_resume`` is the pure part (the admission webhook uses it): errors carry a
field path such as ``spec.decisions[1].callId``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.types import Command, Interrupt, StateSnapshot

from sessionops.api.input import CallDecision
from sessionops.api.run import PendingCall, Question, Waitpoint, WaitpointKind

KIND_ORDER = (WaitpointKind.APPROVAL.value, WaitpointKind.QUESTION.value, WaitpointKind.DELEGATION.value)


@dataclass(frozen=True)
class ResumeError:
    """One reason a Resume input does not fit the waitpoint; ``status`` is the HTTP code
    admission should answer (409: the waitpoint moved on; 422: invalid values)."""

    field: str
    reason: str
    status: int = 422

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


class ResumeInvalid(ValueError):
    def __init__(self, errors: Sequence[ResumeError]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(map(str, self.errors)))


def waitpoint_id(kind: str, interrupt_ids: Sequence[str]) -> str:
    digest = hashlib.sha256("\n".join([kind, *sorted(interrupt_ids)]).encode()).hexdigest()[:20]
    return f"wp-{digest}"


def pending_interrupts(state: StateSnapshot) -> list[Interrupt]:
    """Interrupts still waiting for a value (``get_state`` on the thread's latest checkpoint)."""
    return list(state.interrupts)


def current_tool_call_order(state: StateSnapshot) -> list[str]:
    """Tool call ids of the last AI message, in the order the model gave them."""
    for message in reversed(state.values.get("messages", []) if state.values else []):
        if isinstance(message, AIMessage):
            return [c["id"] for c in message.tool_calls]
    return []


def _selected(interrupts: Sequence[Interrupt]) -> tuple[str, list[Interrupt]] | None:
    by_kind: dict[str, list[Interrupt]] = {}
    for item in interrupts:
        kind = item.value.get("kind") if isinstance(item.value, Mapping) else None
        if kind not in KIND_ORDER:
            raise ValueError(f"interrupt {item.id} has no known kind: {item.value!r}")
        by_kind.setdefault(kind, []).append(item)
    for kind in KIND_ORDER:
        if kind in by_kind:
            return kind, by_kind[kind]
    return None


def _ordered(interrupts: list[Interrupt], order: Sequence[str]) -> list[Interrupt]:
    position = {tid: i for i, tid in enumerate(order)}
    return sorted(interrupts, key=lambda it: (position.get(it.value.get("toolCallId"), len(position)),
                                              str(it.value.get("toolCallId")), it.id))


def waitpoint_from_interrupts(interrupts: Sequence[Interrupt], order: Sequence[str] = ()) -> Waitpoint | None:
    """The waitpoint of these pending interrupts (None when nothing waits).

    ``order`` lists tool call ids in the model's order, so calls and questions are listed
    as the model asked them.
    """
    if (selected := _selected(interrupts)) is None:
        return None
    kind, items = selected
    items = _ordered(items, order)
    wp_id = waitpoint_id(kind, [it.id for it in items])
    if kind == WaitpointKind.APPROVAL.value:
        calls = [PendingCall(call_id=v["callId"], tool_call_id=v["toolCallId"], tool=v["tool"],
                             args=dict(v.get("args") or {}), allowed_decisions=list(v["allowedDecisions"]))
                 for v in (it.value for it in items)]
        return Waitpoint(id=wp_id, kind=WaitpointKind.APPROVAL, calls=calls)
    if kind == WaitpointKind.QUESTION.value:
        questions = [Question.model_validate(q) for it in items for q in it.value["questions"]]
        return Waitpoint(id=wp_id, kind=WaitpointKind.QUESTION, questions=questions)
    children = [c for it in items for c in it.value.get("children", [])]
    return Waitpoint(id=wp_id, kind=WaitpointKind.DELEGATION, children=children)


def waitpoint_from_state(state: StateSnapshot) -> Waitpoint | None:
    """The waitpoint of a thread's current state, for ``AgentRun.status.waitpoint``."""
    return waitpoint_from_interrupts(pending_interrupts(state), current_tool_call_order(state))


def _decision_fields(item: Any) -> tuple[Any, Any]:
    if isinstance(item, CallDecision):
        return item.call_id, item.decision
    if isinstance(item, Mapping):
        return item.get("callId", item.get("call_id")), item.get("decision")
    return None, None


def _answer_errors(i: int, question: Question, answer: Any) -> list[ResumeError]:
    path = f"spec.answers[{i}]"
    if question.multi_select:
        if isinstance(answer, str):
            return [ResumeError(path, "the question is multi-select: give a list of strings")]
        if not isinstance(answer, list) or not answer:
            return [ResumeError(path, "the question is multi-select: give a non-empty list of strings")]
        values = answer
        paths = [f"{path}[{j}]" for j in range(len(answer))]
    else:
        if not isinstance(answer, str):
            return [ResumeError(path, "the question is single-select: give one string")]
        values, paths = [answer], [path]
    errors: list[ResumeError] = []
    seen: set[str] = set()
    for value, value_path in zip(values, paths, strict=True):
        if not isinstance(value, str) or not value.strip():
            errors.append(ResumeError(value_path, "an answer must be a non-empty string"))
            continue
        if value in seen:
            errors.append(ResumeError(value_path, f"{value!r} is given twice"))
        seen.add(value)
        # Options bind only when the question offers some and does not allow other answers.
        if question.options and not question.allow_other and value not in question.options:
            errors.append(ResumeError(value_path, f"{value!r} is not one of the options: {', '.join(question.options)}"))
    return errors


def validate_resume(
    waitpoint: Waitpoint,
    *,
    waitpoint_id: str | None = None,
    answers: Sequence[Any] | None = None,
    decisions: Sequence[CallDecision | Mapping[str, Any]] | None = None,
) -> list[ResumeError]:
    """Why a Resume input does not complete this waitpoint (empty: it does). Pure."""
    if waitpoint_id is not None and waitpoint_id != waitpoint.id:
        return [ResumeError("spec.waitpointId", f"stale waitpoint: the run now waits at {waitpoint.id}", 409)]
    kind = WaitpointKind(waitpoint.kind)
    if kind == WaitpointKind.DELEGATION:
        return [ResumeError("spec", "a delegation waitpoint resumes when its children finish, not by an input", 409)]
    if kind == WaitpointKind.APPROVAL:
        if answers is not None:
            return [ResumeError("spec.answers", "the waitpoint is an approval: give decisions, not answers")]
        if decisions is None:
            return [ResumeError("spec.decisions", "the waitpoint is an approval: give one decision per pending call")]
        return _decision_errors(waitpoint, decisions)
    if decisions is not None:
        return [ResumeError("spec.decisions", "the waitpoint is a question: give answers, not decisions")]
    if answers is None:
        return [ResumeError("spec.answers", "the waitpoint is a question: give one answer per question")]
    if len(answers) != len(waitpoint.questions):
        return [ResumeError("spec.answers", f"expected {len(waitpoint.questions)} answers (one per question, "
                                            f"in order), got {len(answers)}")]
    return [e for i, (q, a) in enumerate(zip(waitpoint.questions, answers, strict=True)) for e in _answer_errors(i, q, a)]


def _decision_errors(waitpoint: Waitpoint, decisions: Sequence[Any]) -> list[ResumeError]:
    calls = {c.call_id: c for c in waitpoint.calls}
    errors: list[ResumeError] = []
    decided: dict[str, int] = {}
    for i, item in enumerate(decisions):
        call_id, decision = _decision_fields(item)
        if call_id not in calls:
            errors.append(ResumeError(f"spec.decisions[{i}].callId", f"{call_id!r} is not a pending call of this waitpoint"))
            continue
        if call_id in decided:
            errors.append(ResumeError(f"spec.decisions[{i}].callId",
                                      f"{call_id!r} is decided twice (also spec.decisions[{decided[call_id]}])"))
            continue
        decided[call_id] = i
        if decision not in calls[call_id].allowed_decisions:
            errors.append(ResumeError(f"spec.decisions[{i}].decision",
                                      f"{decision!r} is not allowed for {call_id}: "
                                      f"{', '.join(calls[call_id].allowed_decisions)}"))
    if missing := [c for c in calls if c not in decided]:
        errors.append(ResumeError("spec.decisions", f"missing decisions for calls: {', '.join(missing)}"))
    return errors


def build_resume(
    state: StateSnapshot,
    *,
    waitpoint_id: str | None = None,
    answers: Sequence[Any] | None = None,
    decisions: Sequence[CallDecision | Mapping[str, Any]] | None = None,
) -> Command:
    """``Command(resume={interrupt_id: value, ...})`` completing the current waitpoint.

    Raises ``ResumeInvalid`` when the input does not complete it, or when nothing waits.
    Approval values are ``{"decision", "message"}``; question values are the answers of
    that ``ask_user`` call, in order.
    """
    interrupts = pending_interrupts(state)
    waitpoint = waitpoint_from_interrupts(interrupts, current_tool_call_order(state))
    if waitpoint is None:
        raise ResumeInvalid([ResumeError("spec.run", "the run is not waiting", 409)])
    if errors := validate_resume(waitpoint, waitpoint_id=waitpoint_id, answers=answers, decisions=decisions):
        raise ResumeInvalid(errors)
    _, items = _selected(interrupts)  # type: ignore[misc]
    if WaitpointKind(waitpoint.kind) == WaitpointKind.APPROVAL:
        by_call = {}
        for item in decisions or []:
            call, decision = _decision_fields(item)
            message = item.message if isinstance(item, CallDecision) else item.get("message")
            by_call[call] = {"decision": decision, "message": message}
        return Command(resume={it.id: by_call[it.value["callId"]] for it in items})
    resume: dict[str, list[Any]] = {}
    start = 0
    for it in _ordered(items, current_tool_call_order(state)):
        count = len(it.value["questions"])
        resume[it.id] = list((answers or [])[start:start + count])
        start += count
    return Command(resume=resume)


def delegation_children(state: StateSnapshot) -> list[str]:
    """Child sessions the thread's pending Delegation interrupts wait on, in the model's order."""
    items = [it for it in pending_interrupts(state)
             if isinstance(it.value, Mapping) and it.value.get("kind") == WaitpointKind.DELEGATION.value]
    return [c for it in _ordered(items, current_tool_call_order(state)) for c in it.value.get("children", [])]


def build_delegation_resume(state: StateSnapshot, outcomes: Mapping[str, Any]) -> Command:
    """``Command(resume=...)`` answering every pending Delegation interrupt with its child's
    outcome (``outcomes``: child session -> value). Other interrupts stay pending."""
    resume = {}
    for it in pending_interrupts(state):
        if isinstance(it.value, Mapping) and it.value.get("kind") == WaitpointKind.DELEGATION.value:
            child = (it.value.get("children") or [None])[0]
            if child not in outcomes:
                raise ResumeInvalid([ResumeError("status.waitpoint.children", f"no outcome for child {child!r}")])
            resume[it.id] = outcomes[child]
    if not resume:
        raise ResumeInvalid([ResumeError("spec.run", "the run does not wait on a delegation", 409)])
    return Command(resume=resume)

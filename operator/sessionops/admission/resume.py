"""Resume completeness (pure): a waitpoint is answered only by a complete resume.

Works on the wire shapes of ``AgentRun.status.waitpoint`` and ``AgentInput.spec``.
"""

from __future__ import annotations

from typing import Any

from sessionops.admission.errors import CONFLICT, Rejection
from sessionops.api.run import WaitpointKind


def _check_answer(i: int, answer: Any, question: dict[str, Any]) -> None:
    field = f"spec.answers[{i}]"
    options = question.get("options") or []
    free = question.get("allowOther") or not options
    if question.get("multiSelect"):
        if not isinstance(answer, list) or not answer or not all(isinstance(a, str) and a for a in answer):
            raise Rejection(field, "question allows several options: answer with a non-empty list of strings")
        chosen = answer
    else:
        if not isinstance(answer, str) or not answer.strip():
            raise Rejection(field, "answer with a non-empty string")
        chosen = [answer]
    if not free:
        for a in chosen:
            if a not in options:
                raise Rejection(field, f"{a!r} is not one of the options: {', '.join(map(repr, options))}")


def check_resume(waitpoint: dict[str, Any], *, answers: list[Any] | None,
                 decisions: list[dict[str, Any]] | None) -> None:
    """Raise a Rejection unless answers/decisions answer the whole waitpoint."""
    kind = waitpoint.get("kind")
    if kind == WaitpointKind.QUESTION.value:
        questions = waitpoint.get("questions") or []
        if decisions is not None or answers is None:
            raise Rejection("spec.answers", "the run waits for answers to its questions: set spec.answers")
        if len(answers) != len(questions):
            raise Rejection("spec.answers", f"{len(answers)} answer(s) for {len(questions)} question(s): "
                                            "answer every question, in order (partial answers are rejected)")
        for i, (answer, question) in enumerate(zip(answers, questions, strict=True)):
            _check_answer(i, answer, question)
        return
    if kind == WaitpointKind.APPROVAL.value:
        calls = {c["callId"]: c for c in waitpoint.get("calls") or []}
        if answers is not None or decisions is None:
            raise Rejection("spec.decisions", "the run waits for approval decisions: set spec.decisions")
        seen: set[str] = set()
        for i, d in enumerate(decisions):
            call_id = d.get("callId")
            if call_id not in calls:
                raise Rejection(f"spec.decisions[{i}].callId", f"{call_id!r} is not a pending call of this "
                                                               f"waitpoint (pending: {', '.join(sorted(calls))})")
            if call_id in seen:
                raise Rejection(f"spec.decisions[{i}].callId", f"{call_id!r} is decided more than once")
            seen.add(call_id)
            allowed = calls[call_id].get("allowedDecisions") or ["Approve", "Reject"]
            if d.get("decision") not in allowed:
                raise Rejection(f"spec.decisions[{i}].decision",
                                f"{d.get('decision')!r} is not allowed for this call (allowed: {', '.join(allowed)})")
        missing = sorted(set(calls) - seen)
        if missing:
            raise Rejection("spec.decisions", f"every pending call needs a decision; missing: {', '.join(missing)}")
        return
    if kind == WaitpointKind.DELEGATION.value:
        raise Rejection("spec.kind", "the run waits for delegated child sessions and resumes by itself", CONFLICT)
    raise Rejection("spec.waitpointId", "the run has no waitpoint to resume", CONFLICT)

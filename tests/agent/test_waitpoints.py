"""The pure resume validator (shared with the admission webhook) and waitpoint building."""

from __future__ import annotations

import pytest
from langgraph.types import Interrupt

from sessionops.agent.approval import call_id
from sessionops.agent.tools import question_payload
from sessionops.agent.waitpoints import (
    ResumeError,
    validate_resume,
    waitpoint_from_interrupts,
)
from sessionops.api.input import CallDecision
from sessionops.api.run import PendingCall, Question, Waitpoint

APPROVAL = Waitpoint(id="wp-a", kind="Approval", calls=[
    PendingCall(call_id="c1", tool_call_id="t1", tool="run_shell", args={"command": "ls"}),
    PendingCall(call_id="c2", tool_call_id="t2", tool="write_file", allowed_decisions=["Approve"]),
])
QUESTION = Waitpoint(id="wp-q", kind="Question", questions=[
    Question(question_id="q1", question="Env?", options=["dev", "prod"]),
    Question(question_id="q2", question="Regions?", options=["eu", "us"], multi_select=True),
    Question(question_id="q3", question="Note?", options=["none"], allow_other=True),
    Question(question_id="q4", question="Name?"),
])
COMPLETE_ANSWERS = ["prod", ["eu"], "free text", "Ada"]


def approve(cid: str, decision: str = "Approve") -> dict:
    return {"callId": cid, "decision": decision}


@pytest.mark.parametrize("case, kwargs, expected", [
    ("every pending call decided once is complete",
     {"decisions": [approve("c1", "Reject"), approve("c2")]}, []),
    ("pydantic decisions are accepted as well as raw objects",
     {"decisions": [CallDecision(call_id="c2", decision="Approve"), approve("c1")]}, []),
    ("a missing decision is named",
     {"decisions": [approve("c1")]}, [("spec.decisions", "missing decisions for calls: c2")]),
    ("an unknown call id points at its decision",
     {"decisions": [approve("c1"), approve("c2"), approve("c9")]},
     [("spec.decisions[2].callId", "'c9' is not a pending call of this waitpoint")]),
    ("a call decided twice points at the second decision",
     {"decisions": [approve("c1"), approve("c1"), approve("c2")]},
     [("spec.decisions[1].callId", "'c1' is decided twice (also spec.decisions[0])")]),
    ("a decision the call does not allow is refused",
     {"decisions": [approve("c1"), approve("c2", "Reject")]},
     [("spec.decisions[1].decision", "'Reject' is not allowed for c2: Approve")]),
    ("answers do not resume an approval",
     {"answers": ["x"]}, [("spec.answers", "the waitpoint is an approval: give decisions, not answers")]),
    ("an approval needs decisions",
     {}, [("spec.decisions", "the waitpoint is an approval: give one decision per pending call")]),
])
def test_approval_resumes(case, kwargs, expected):
    errors = validate_resume(APPROVAL, **kwargs)
    assert [(e.field, e.reason) for e in errors] == expected, case


@pytest.mark.parametrize("case, answers, expected", [
    ("one valid answer per question is complete", COMPLETE_ANSWERS, []),
    ("partial answers are rejected", ["prod", ["eu"]],
     [("spec.answers", "expected 4 answers (one per question, in order), got 2")]),
    ("too many answers are rejected", [*COMPLETE_ANSWERS, "x"],
     [("spec.answers", "expected 4 answers (one per question, in order), got 5")]),
    ("a multi-select answer must be a list", ["prod", "eu", "x", "Ada"],
     [("spec.answers[1]", "the question is multi-select: give a list of strings")]),
    ("a multi-select answer must not be empty", ["prod", [], "x", "Ada"],
     [("spec.answers[1]", "the question is multi-select: give a non-empty list of strings")]),
    ("a single-select answer must be one string", [["prod"], ["eu"], "x", "Ada"],
     [("spec.answers[0]", "the question is single-select: give one string")]),
    ("options bind unless other answers are allowed", ["staging", ["eu", "mars"], "x", "Ada"],
     [("spec.answers[0]", "'staging' is not one of the options: dev, prod"),
      ("spec.answers[1][1]", "'mars' is not one of the options: eu, us")]),
    ("an option is chosen once", ["dev", ["eu", "eu"], "x", "Ada"],
     [("spec.answers[1][1]", "'eu' is given twice")]),
    ("a blank answer is no answer", ["dev", ["eu"], "x", "  "],
     [("spec.answers[3]", "an answer must be a non-empty string")]),
])
def test_question_resumes(case, answers, expected):
    errors = validate_resume(QUESTION, answers=answers)
    assert [(e.field, e.reason) for e in errors] == expected, case


def test_a_stale_waitpoint_is_a_conflict():
    [error] = validate_resume(QUESTION, waitpoint_id="wp-old", answers=COMPLETE_ANSWERS)
    assert error == ResumeError("spec.waitpointId", "stale waitpoint: the run now waits at wp-q", 409)
    assert validate_resume(QUESTION, waitpoint_id="wp-q", answers=COMPLETE_ANSWERS) == []


def test_decisions_do_not_resume_a_question():
    [error] = validate_resume(QUESTION, decisions=[approve("c1")])
    assert error.field == "spec.decisions"


def approval_interrupt(iid: str, tool_call: str) -> Interrupt:
    return Interrupt(id=iid, value={"kind": "Approval", "callId": call_id("ai-0", tool_call), "toolCallId": tool_call,
                                    "tool": "run_shell", "args": {}, "allowedDecisions": ["Approve", "Reject"]})


def test_waitpoints_list_calls_in_model_order_with_a_deterministic_id():
    interrupts = [approval_interrupt("i-b", "t2"), approval_interrupt("i-a", "t1")]
    waitpoint = waitpoint_from_interrupts(interrupts, order=["t1", "t2"])
    assert [c.tool_call_id for c in waitpoint.calls] == ["t1", "t2"]
    assert waitpoint_from_interrupts(list(reversed(interrupts)), order=["t1", "t2"]).id == waitpoint.id
    assert waitpoint_from_interrupts(interrupts[:1]).id != waitpoint.id


def test_questions_of_several_calls_are_listed_in_order():
    interrupts = [Interrupt(id="i2", value=question_payload("t2", [{"question": "B?"}])),
                  Interrupt(id="i1", value=question_payload("t1", [{"question": "A1?"}, {"question": "A2?"}]))]
    waitpoint = waitpoint_from_interrupts(interrupts, order=["t1", "t2"])
    assert [q.question for q in waitpoint.questions] == ["A1?", "A2?", "B?"]


def test_nothing_pending_is_no_waitpoint_and_unknown_payloads_are_errors():
    assert waitpoint_from_interrupts([]) is None
    with pytest.raises(ValueError, match="no known kind"):
        waitpoint_from_interrupts([Interrupt(id="x", value="what is your age?")])

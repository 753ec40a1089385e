"""Receipt decisions: delivery, session state rules, snapshots and resume completeness."""

from __future__ import annotations

import pytest

from sessionops.admission.errors import Rejection
from sessionops.admission.inputs import active_turn, carry_forward, decide_receipt
from sessionops.admission.sessions import session_snapshot_on_create
from tests import factories

CONFIG = factories.config()
SNAP = session_snapshot_on_create({"agentRef": {"name": "helper"}}, factories.agent(), CONFIG).dump()
RUN_SNAP = {**SNAP, "model": "replay/steer"}
APPROVAL = {"id": "wp-1", "kind": "Approval", "calls": [
    {"callId": "c1", "toolCallId": "t1", "tool": "run_shell", "args": {}},
    {"callId": "c2", "toolCallId": "t2", "tool": "write_file", "args": {}, "allowedDecisions": ["Approve"]}]}
QUESTION = {"id": "wp-2", "kind": "Question", "questions": [
    {"questionId": "q1", "question": "Colour?", "options": ["red", "blue"]},
    {"questionId": "q2", "question": "Sizes?", "options": ["s", "m"], "multiSelect": True},
    {"questionId": "q3", "question": "Name?", "options": [], "allowOther": True}]}


def decide(spec: dict, *, session=None, active=None, resume_run=None):
    session = session if session is not None else factories.session(snapshot=SNAP)
    return decide_receipt(spec, session, session_name="s1", active_run=active, resume_run=resume_run, config=CONFIG)


def message(**spec) -> dict:
    return {"sessionRef": {"name": "s1"}, "messages": [{"content": "hi"}], **spec}


def test_idle_session_message_defaults_to_follow_up_with_the_session_snapshot() -> None:
    r = decide(message())
    assert r.delivery == "FollowUp" and r.snapshot.dump() == SNAP


def test_message_during_an_active_turn_defaults_to_steer_with_the_turn_snapshot() -> None:
    r = decide(message(), active=factories.run(snapshot=RUN_SNAP))
    assert r.delivery == "Steer" and r.snapshot.model == "replay/steer"


def test_follow_up_overrides_apply_to_this_input_only() -> None:
    r = decide(message(delivery="FollowUp", overrides={"model": "replay/steer", "approvalMode": "AlwaysTrust"}))
    assert (r.snapshot.model, r.snapshot.approval_mode) == ("replay/steer", "AlwaysTrust")
    assert SNAP["model"] == "replay/hello"


@pytest.mark.parametrize(("spec", "active", "field", "code"), [
    (message(delivery="Steer", overrides={"model": "replay/steer"}), None, "spec.overrides", 422),
    (message(overrides={"model": "replay/steer"}), factories.run(), "spec.overrides", 422),
    (message(delivery="FollowUp", overrides={"model": "gpt-9"}), None, "spec.overrides.model", 422),
    (message(), factories.run(phase="Waiting"), "spec.kind", 409),
    (message(delivery="FollowUp"), factories.run(phase="Cancelling"), "spec.kind", 409),
], ids=["steer with overrides", "defaulted steer with overrides", "override names unavailable model",
        "message while the turn waits", "message while the turn is cancelling"])
def test_message_rejections(spec: dict, active, field: str, code: int) -> None:
    with pytest.raises(Rejection) as e:
        decide(spec, active=active)
    assert (e.value.field, e.value.code) == (field, code)


def test_a_message_to_a_session_waiting_on_children_says_so() -> None:
    waiting = factories.run(phase="Waiting", waitpoint={"id": "wp-d", "kind": "Delegation", "children": ["c"]})
    with pytest.raises(Rejection, match="waits for its delegated child sessions") as e:
        decide(message(), active=waiting)
    assert e.value.code == 409
    with pytest.raises(Rejection, match="waits for a Resume input"):
        decide(message(), active=factories.run(phase="Waiting", waitpoint=APPROVAL))


def test_missing_and_deleting_sessions() -> None:
    with pytest.raises(Rejection) as e:
        decide_receipt(message(), None, session_name="s1", active_run=None, resume_run=None, config=CONFIG)
    assert e.value.code == 404 and 'agentsession "s1" not found' in e.value.message
    deleting = factories.session(snapshot=SNAP)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    with pytest.raises(Rejection) as e:
        decide(message(), session=deleting)
    assert e.value.code == 409


def test_continue_needs_a_paused_queue_and_no_active_turn() -> None:
    paused = factories.session(snapshot=SNAP, status={"queue": {"paused": True}})
    assert decide({"sessionRef": {"name": "s1"}, "kind": "Continue"}, session=paused).delivery is None
    with pytest.raises(Rejection, match="paused"):
        decide({"sessionRef": {"name": "s1"}, "kind": "Continue"})
    with pytest.raises(Rejection, match="active") as e:
        decide({"sessionRef": {"name": "s1"}, "kind": "Continue"}, session=paused, active=factories.run())
    assert e.value.code == 409


def resume(**spec) -> dict:
    return {"sessionRef": {"name": "s1"}, "kind": "Resume", "run": "s1-t1", **spec}


def test_complete_decisions_resume_with_the_run_snapshot() -> None:
    run = factories.run(phase="Waiting", waitpoint=APPROVAL, snapshot=RUN_SNAP)
    r = decide(resume(waitpointId="wp-1", decisions=[{"callId": "c2", "decision": "Approve"},
                                                     {"callId": "c1", "decision": "Reject"}]), resume_run=run)
    assert r.snapshot.model == "replay/steer"


def test_complete_answers_are_accepted() -> None:
    run = factories.run(phase="Waiting", waitpoint=QUESTION, snapshot=RUN_SNAP)
    decide(resume(waitpointId="wp-2", answers=["red", ["s", "m"], "Ada"]), resume_run=run)


@pytest.mark.parametrize(("spec", "field", "code"), [
    (resume(waitpointId="wp-1", decisions=[{"callId": "c1", "decision": "Approve"}]), "spec.decisions", 422),
    (resume(waitpointId="wp-1", decisions=[{"callId": "c1", "decision": "Approve"},
                                           {"callId": "c1", "decision": "Approve"}]), "spec.decisions[1].callId", 422),
    (resume(waitpointId="wp-1", decisions=[{"callId": "zz", "decision": "Approve"}]), "spec.decisions[0].callId", 422),
    (resume(waitpointId="wp-1", decisions=[{"callId": "c1", "decision": "Approve"},
                                           {"callId": "c2", "decision": "Reject"}]), "spec.decisions[1].decision", 422),
    (resume(waitpointId="wp-1", answers=["x"]), "spec.answers", 422),
    (resume(waitpointId="old", decisions=[]), "spec.waitpointId", 409),
], ids=["a pending call without decision", "a call decided twice", "an unknown call", "a decision not allowed",
        "answers for an approval", "a stale waitpoint"])
def test_incomplete_or_stale_decisions_are_rejected(spec: dict, field: str, code: int) -> None:
    run = factories.run(phase="Waiting", waitpoint=APPROVAL, snapshot=RUN_SNAP)
    with pytest.raises(Rejection) as e:
        decide(spec, resume_run=run)
    assert (e.value.field, e.value.code) == (field, code)


@pytest.mark.parametrize(("answers", "field"), [
    (["red", ["s"]], "spec.answers"),
    (["green", ["s"], "x"], "spec.answers[0]"),
    (["red", "s", "x"], "spec.answers[1]"),
    (["red", [], "x"], "spec.answers[1]"),
    (["red", ["s", "xl"], "x"], "spec.answers[1][1]"),
    (["red", ["s"], ""], "spec.answers[2]"),
], ids=["partial answers", "answer outside the options", "single value for multi-select",
        "empty multi-select", "multi-select outside the options", "blank free answer"])
def test_incomplete_answers_are_rejected(answers: list, field: str) -> None:
    run = factories.run(phase="Waiting", waitpoint=QUESTION, snapshot=RUN_SNAP)
    with pytest.raises(Rejection) as e:
        decide(resume(waitpointId="wp-2", answers=answers), resume_run=run)
    assert e.value.field == field and e.value.code == 422


@pytest.mark.parametrize(("run", "code"), [(None, 404), (factories.run(phase="Cancelled"), 409),
                                           (factories.run(phase="Running"), 409),
                                           (factories.run(session_name="other", phase="Waiting"), 422)],
                         ids=["missing run", "cancelled run", "running run", "run of another session"])
def test_resume_of_a_run_that_is_not_waiting_here_is_rejected(run, code: int) -> None:
    with pytest.raises(Rejection) as e:
        decide(resume(waitpointId="wp-1", decisions=[]), resume_run=run)
    assert e.value.code == code and e.value.field == "spec.run"


def test_active_turn_ignores_terminal_and_foreign_runs() -> None:
    s = factories.session(status={"activeRun": "s1-t1"})
    assert active_turn(s, factories.run(phase="Running")) is not None
    assert active_turn(s, factories.run(phase="Succeeded")) is None
    assert active_turn(s, factories.run(name="s1-t9")) is None
    assert active_turn(factories.session(), factories.run()) is None


def test_carry_forward_restores_only_server_owned_fields() -> None:
    old = {"sequence": 3, "contextSnapshot": SNAP, "submittedBy": {"username": "u"}, "messages": []}
    assert carry_forward(old, {"messages": []}) == {"sequence": 3, "contextSnapshot": SNAP,
                                                    "submittedBy": {"username": "u"}}
    assert carry_forward(old, dict(old)) == {}


def test_answers_on_a_message_are_rejected_by_the_webhook() -> None:
    with pytest.raises(Rejection) as e:
        decide(message(answers=["x"]))
    assert e.value.field == "spec.answers"

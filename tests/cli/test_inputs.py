"""Pure builders: names, manifests, decision planning, answers and the intent comparison."""

from __future__ import annotations

from typing import Any

import pytest

from sessionops.agent.waitpoints import validate_resume
from sessionops.api.run import Waitpoint
from sessionops.cli.errors import CliError
from sessionops.cli.inputs import (
    answer_problems,
    continue_input,
    find_call,
    input_name,
    intent_mismatches,
    message_input,
    new_key,
    parse_answers,
    plan_decisions,
    resume_input,
    split_multi,
)

APPROVAL = {"id": "wp-a", "kind": "Approval", "calls": [
    {"callId": "call-1", "toolCallId": "tc_0", "tool": "write_file", "args": {"path": "a"},
     "allowedDecisions": ["Approve", "Reject"]},
    {"callId": "call-2", "toolCallId": "tc_1", "tool": "run_shell", "args": {"command": "ls"},
     "allowedDecisions": ["Approve", "Reject"]},
    {"callId": "call-3", "toolCallId": "tc_2", "tool": "run_shell", "args": {"command": "df"},
     "allowedDecisions": ["Approve", "Reject"]},
]}
SINGLE = {"id": "wp-s", "kind": "Approval", "calls": [APPROVAL["calls"][1]]}
QUESTIONS = {"id": "wp-q", "kind": "Question", "questions": [
    {"questionId": "q0", "question": "Which language?", "options": ["Python", "Go"], "multiSelect": False,
     "allowOther": True},
    {"questionId": "q1", "question": "Which checks?", "options": ["lint", "unit tests", "e2e tests"],
     "multiSelect": True, "allowOther": False},
    {"questionId": "q2", "question": "Anything else?", "options": [], "multiSelect": False, "allowOther": False},
]}


def waiting_run(waitpoint: dict[str, Any], name: str = "demo-t1") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"sessionRef": {"name": "demo"}},
            "status": {"phase": "Waiting", "waitpoint": waitpoint}}


# -- names --------------------------------------------------------------------------------------------------------

def test_names_derive_from_the_key() -> None:
    assert input_name("demo", "k1") == "demo-k1"
    assert input_name("demo-t1", "wp-0123") == "demo-t1-wp-0123"
    odd = input_name("demo", "Retry #2")
    assert odd.startswith("demo-retry-2-") and odd != input_name("demo", "retry #2")  # hash keeps keys apart
    assert input_name("demo", "Retry #2") == odd  # deterministic
    long = input_name("demo", "x" * 400)
    assert len(long) <= 253
    with pytest.raises(CliError):
        input_name("demo", "  ")
    key = new_key()
    assert len(key) == 8 and input_name("s", key) == f"s-{key}"


# -- manifests ----------------------------------------------------------------------------------------------------

def test_message_input_manifest() -> None:
    body = message_input("demo", ["hello", "second"], key="k1")
    assert body == {"apiVersion": "sessionops.dev/v1alpha1", "kind": "AgentInput", "metadata": {"name": "demo-k1"},
                    "spec": {"sessionRef": {"name": "demo"}, "kind": "Message",
                             "messages": [{"content": "hello"}, {"content": "second"}]}}
    steer = message_input("demo", ["now"], key="k2", delivery="Steer")
    assert steer["spec"]["delivery"] == "Steer"


def test_overrides_imply_follow_up_and_never_ride_a_steer() -> None:
    body = message_input("demo", ["hi"], key="k", model="replay/hello", approval="AlwaysTrust")
    assert body["spec"]["delivery"] == "FollowUp"
    assert body["spec"]["overrides"] == {"model": "replay/hello", "approvalMode": "AlwaysTrust"}
    with pytest.raises(CliError, match="follow-ups only"):
        message_input("demo", ["hi"], key="k", delivery="Steer", model="replay/hello")


def test_manifests_are_checked_with_the_crd_limits() -> None:
    with pytest.raises(CliError) as e:
        message_input("demo", ["x" * 32_769], key="k")
    assert e.value.message.startswith("spec.messages[0].content: ") and "32768" in e.value.message
    with pytest.raises(CliError, match="spec.messages"):
        message_input("demo", ["m"] * 21, key="k")
    with pytest.raises(CliError, match="spec.messages"):
        message_input("demo", [""], key="k")
    with pytest.raises(CliError, match="spec.sessionRef.name"):
        message_input("Not_A_Name", ["hi"], key="k")
    with pytest.raises(CliError, match="at least one message"):
        message_input("demo", [], key="k")


def test_continue_and_resume_manifests() -> None:
    assert continue_input("demo", key="abc") == {
        "apiVersion": "sessionops.dev/v1alpha1", "kind": "AgentInput", "metadata": {"name": "demo-continue-abc"},
        "spec": {"sessionRef": {"name": "demo"}, "kind": "Continue"}}
    resume = resume_input(waiting_run(SINGLE), decisions=[{"callId": "call-2", "decision": "Approve"}])
    assert resume["metadata"]["name"] == "demo-t1-wp-s"  # one name per waitpoint: re-deciding is recognized
    assert resume["spec"] == {"sessionRef": {"name": "demo"}, "kind": "Resume", "run": "demo-t1",
                              "waitpointId": "wp-s", "decisions": [{"callId": "call-2", "decision": "Approve"}]}
    assert resume_input(waiting_run(QUESTIONS), key="mine", answers=["a"])["metadata"]["name"] == "demo-t1-mine"
    with pytest.raises(CliError, match="not waiting"):
        resume_input({"metadata": {"name": "r"}, "spec": {"sessionRef": {"name": "s"}}, "status": {"phase": "Running"}})


# -- decisions ----------------------------------------------------------------------------------------------------

def decided(decisions: list[dict[str, Any]]) -> dict[str, str]:
    return {d["callId"]: d["decision"] for d in decisions}


def test_calls_are_found_by_number_call_id_tool_call_id_or_unique_tool() -> None:
    assert find_call(APPROVAL, "2")["callId"] == "call-2"
    assert find_call(APPROVAL, "call-3")["callId"] == "call-3"
    assert find_call(APPROVAL, "tc_0")["callId"] == "call-1"
    assert find_call(APPROVAL, "write_file")["callId"] == "call-1"
    with pytest.raises(CliError, match="matches 2 pending calls") as e:
        find_call(APPROVAL, "run_shell")
    assert "pending calls: 1 write_file (call-1), 2 run_shell (call-2), 3 run_shell (call-3)" in e.value.details
    with pytest.raises(CliError, match="'9' is not a pending call"):
        find_call(APPROVAL, "9")


def test_a_single_pending_call_needs_no_name() -> None:
    assert plan_decisions(SINGLE, "Approve", []) == [{"callId": "call-2", "decision": "Approve"}]
    assert plan_decisions(SINGLE, "Reject", [], message="no") == [
        {"callId": "call-2", "decision": "Reject", "message": "no"}]


def test_one_resume_decides_every_call() -> None:
    with pytest.raises(CliError, match="waits on 3 calls and one resume decides them all"):
        plan_decisions(APPROVAL, "Approve", [])
    with pytest.raises(CliError, match=r"undecided: 3 run_shell \(call-3\)"):
        plan_decisions(APPROVAL, "Approve", ["1"], others=["2"])
    assert decided(plan_decisions(APPROVAL, "Approve", ["1", "call-3"], others=["2"])) == {
        "call-1": "Approve", "call-2": "Reject", "call-3": "Approve"}
    assert decided(plan_decisions(APPROVAL, "Approve", [], all_calls=True, others=["tc_1"])) == {
        "call-1": "Approve", "call-2": "Reject", "call-3": "Approve"}
    assert decided(plan_decisions(APPROVAL, "Reject", [], all_calls=True)) == {
        "call-1": "Reject", "call-2": "Reject", "call-3": "Reject"}
    # Listed in the waitpoint's order whatever the order on the command line.
    assert [d["callId"] for d in plan_decisions(APPROVAL, "Approve", ["3", "1"], others=["2"])] == [
        "call-1", "call-2", "call-3"]


def test_contradictions_and_wrong_waitpoints_are_refused() -> None:
    with pytest.raises(CliError, match="both Approve and Reject"):
        plan_decisions(APPROVAL, "Approve", ["1"], others=["call-1"])
    with pytest.raises(CliError, match="not both"):
        plan_decisions(APPROVAL, "Approve", ["1"], all_calls=True)
    with pytest.raises(CliError, match="use `answer`"):
        plan_decisions(QUESTIONS, "Approve", [])


def test_without_client_checks_the_request_goes_as_given() -> None:
    assert plan_decisions(APPROVAL, "Approve", ["nope"], client_checks=False) == [
        {"callId": "nope", "decision": "Approve"}]
    assert plan_decisions(APPROVAL, "Approve", [], client_checks=False) == []


def test_planned_decisions_satisfy_the_servers_rules() -> None:
    wp = Waitpoint.model_validate(APPROVAL)
    for decisions in (plan_decisions(APPROVAL, "Approve", [], all_calls=True),
                      plan_decisions(APPROVAL, "Reject", ["1"], others=["2", "3"], message="m")):
        assert validate_resume(wp, waitpoint_id="wp-a", decisions=decisions) == []


# -- answers ------------------------------------------------------------------------------------------------------

def test_multi_select_answers_split_on_commas() -> None:
    assert split_multi("lint, unit tests") == ["lint", "unit tests"]
    assert split_multi(r"a\,b,c") == ["a,b", "c"]
    assert split_multi("x\\") == ["x\\"]
    assert split_multi(r"a\nb") == [r"a\nb"]
    assert parse_answers(QUESTIONS, ["Go, really", "lint,e2e tests", "no, thanks"]) == [
        "Go, really", ["lint", "e2e tests"], "no, thanks"]


@pytest.mark.parametrize("raw", [
    ["Go"],                                       # too few
    ["Go", "lint", "x", "extra"],                 # too many
    ["Go", "docs", "x"],                          # not an option (allowOther is false)
    ["Go", "lint,lint", "x"],                     # twice
    ["Go", ",", "x"],                             # empty choices
    ["Go", "lint", " "],                          # blank single answer
    ["Kotlin", "lint, unit tests", "anything"],   # allowOther / free text: accepted
    ["Python", "e2e tests", "no"],                # accepted
])
def test_client_side_answer_checks_agree_with_admission(raw: list[str]) -> None:
    answers = parse_answers(QUESTIONS, raw)
    server = validate_resume(Waitpoint.model_validate(QUESTIONS), waitpoint_id="wp-q", answers=answers)
    assert bool(answer_problems(QUESTIONS, answers)) == bool(server), (answers, server)


def test_answer_problems_are_worded_for_the_command_line() -> None:
    assert answer_problems(QUESTIONS, ["Go"]) == ["expected 3 answers (one per question, in order), got 1"]
    assert answer_problems(QUESTIONS, parse_answers(QUESTIONS, ["Go", "lint,docs", "x"])) == [
        "answer 2 (Which checks?): 'docs' is not one of the options: lint, unit tests, e2e tests"]
    assert "use `approve` or `reject`" in answer_problems(APPROVAL, ["x"])[0]


# -- intent -------------------------------------------------------------------------------------------------------

def received(spec: dict[str, Any]) -> dict[str, Any]:
    """What the server stores: the client's spec plus admission's fields (and a filled-in delivery)."""
    return {"delivery": "FollowUp", **spec, "sequence": 4, "submittedBy": {"username": "me"},
            "contextSnapshot": {"model": "replay/hello"}}


def test_the_same_request_matches_its_receipt() -> None:
    sent = message_input("demo", ["hello"], key="k")["spec"]
    assert intent_mismatches(sent, received(sent)) == []  # delivery left to admission: not compared
    follow = message_input("demo", ["hello"], key="k", delivery="FollowUp")["spec"]
    assert intent_mismatches(follow, received(sent)) == []
    no_kind = {k: v for k, v in sent.items() if k != "kind"}
    assert intent_mismatches(sent, received(no_kind)) == []  # kind defaults to Message


def test_a_different_request_with_the_same_key_is_reported_field_by_field() -> None:
    original = received(message_input("demo", ["hello", "more"], key="k")["spec"])
    sent = message_input("demo", ["hello", "less"], key="k", delivery="Steer")["spec"]
    assert [str(m) for m in intent_mismatches(sent, original)] == [
        'spec.delivery: this request "Steer", original "FollowUp"',
        'spec.messages[1].content: this request "less", original "more"']
    other = message_input("other", ["hello"], key="k", model="replay/steer")["spec"]
    assert [m.field for m in intent_mismatches(other, original)] == [
        "spec.sessionRef.name", "spec.messages", "spec.overrides"]
    decisions = resume_input(waiting_run(SINGLE), decisions=[{"callId": "call-2", "decision": "Reject"}])["spec"]
    approved = dict(decisions, decisions=[{"callId": "call-2", "decision": "Approve"}])
    assert [str(m) for m in intent_mismatches(decisions, received(approved))] == [
        'spec.decisions[0].decision: this request "Reject", original "Approve"']

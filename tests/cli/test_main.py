"""The commands end to end against an in-memory API (FakeKube): output, requests and exit codes."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

import sessionops.cli.main as cli
from sessionops.cli.errors import EXIT_CONFLICT, EXIT_NOT_FOUND, EXIT_OK, EXIT_USER
from tests.cli.fake import FakeKube, an_input, denied, run, session
from tests.cli.test_inputs import APPROVAL, QUESTIONS, SINGLE

runner = CliRunner()


@pytest.fixture()
def kube(monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    fake = FakeKube()
    seen: dict[str, Any] = {}

    def connect(kubeconfig: Any = None, context: Any = None, namespace: Any = None) -> FakeKube:
        seen.update(kubeconfig=kubeconfig, context=context, namespace=namespace)
        return fake

    monkeypatch.setattr(cli, "connect", connect)
    fake.seen = seen  # type: ignore[attr-defined]
    fake.put("agentsessions", session())
    return fake


def invoke(*args: str, input: str | None = None) -> Any:
    return runner.invoke(cli.app, list(args), input=input, env={"COLUMNS": "200"})


def waiting(kube: FakeKube, waitpoint: dict[str, Any], name: str = "demo-t1") -> None:
    kube.put("agentruns", run(name, phase="Waiting", waitpoint=waitpoint))
    kube.objects[("agentsessions", "demo")]["status"].update(activeRun=name, phase="Waiting")


# -- send -----------------------------------------------------------------------------------------------------------

def test_send_creates_a_message_and_prints_the_key(kube: FakeKube) -> None:
    res = invoke("send", "demo", "hello there", "and more", "-n", "team-a")
    assert res.exit_code == EXIT_OK, res.output
    [body] = kube.created
    assert body["spec"]["messages"] == [{"content": "hello there"}, {"content": "and more"}]
    key = body["metadata"]["name"].removeprefix("demo-")
    assert f"sent input demo-{key} to session demo (sequence 1, phase Pending, FollowUp)" in res.stdout
    assert f"key: {key} (to retry without sending twice: --key {key})" in res.stdout
    assert kube.seen == {"kubeconfig": None, "context": None, "namespace": "team-a"}  # type: ignore[attr-defined]


def test_send_options_and_stdin(kube: FakeKube) -> None:
    res = invoke("-n", "team-b", "--context", "dev", "send", "demo", "-", "--model", "replay/hello",
                 "--approval", "alwaystrust", "--key", "k1", input="from stdin\n")
    assert res.exit_code == EXIT_OK, res.output
    assert kube.seen == {"kubeconfig": None, "context": "dev", "namespace": "team-b"}  # type: ignore[attr-defined]
    assert kube.created[0]["spec"] == {
        "sessionRef": {"name": "demo"}, "kind": "Message", "messages": [{"content": "from stdin"}],
        "delivery": "FollowUp", "overrides": {"model": "replay/hello", "approvalMode": "AlwaysTrust"}, "sequence": 1}
    assert "key:" not in res.stdout  # the user chose it
    res = invoke("send", "demo", "x", "--steer", "--model", "m")
    assert res.exit_code == EXIT_USER
    assert res.stderr.strip() == ("error: --model and --approval apply to follow-ups only: a steer runs with the "
                                  "active turn's configuration")
    assert invoke("send", "demo", "x", "--steer", "--follow-up").exit_code == EXIT_USER


def test_the_same_key_twice_is_received_once(kube: FakeKube) -> None:
    assert invoke("send", "demo", "hello", "--key", "k1").exit_code == EXIT_OK
    kube.objects[("agentinputs", "demo-k1")]["status"] = {"phase": "Consumed", "run": "demo-t1"}
    res = invoke("send", "demo", "hello", "--key", "k1", "--follow-up")
    assert res.exit_code == EXIT_OK, res.output
    assert res.stdout.strip() == ("already received: input demo-k1 (sequence 1, phase Consumed, FollowUp, "
                                  "run demo-t1)")
    assert len(kube.created) == 1


def test_a_different_request_with_a_used_key_is_a_conflict(kube: FakeKube) -> None:
    assert invoke("send", "demo", "hello", "--key", "k1").exit_code == EXIT_OK
    res = invoke("send", "demo", "goodbye", "--key", "k1", "--steer")
    assert res.exit_code == EXIT_CONFLICT
    assert res.stderr.splitlines() == [
        'error: key "k1" already used by input demo-k1 for a different request (nothing was sent): '
        "spec.delivery; spec.messages[0].content",
        '  spec.delivery: this request "Steer", original "FollowUp"',
        '  spec.messages[0].content: this request "goodbye", original "hello"']
    assert len(kube.created) == 1


def test_already_exists_after_a_race_is_compared_too(kube: FakeKube) -> None:
    kube.put("agentinputs", an_input("demo-k1", messages=[{"content": "hello"}], delivery="FollowUp"))
    kube.race.add(("agentinputs", "demo-k1"))  # not there when looked up, there when created
    res = invoke("send", "demo", "hello", "--key", "k1")
    assert res.exit_code == EXIT_OK and "already received: input demo-k1" in res.stdout
    res = invoke("send", "demo", "other", "--key", "k1")
    assert res.exit_code == EXIT_CONFLICT


def test_admission_rejections_print_one_clear_line(kube: FakeKube) -> None:
    def refuse(body: dict[str, Any]) -> None:
        raise denied(409, 'spec.kind: messages are refused while turn "demo-t1" waits for a Resume input')

    kube.admit = refuse
    res = invoke("send", "demo", "hi")
    assert res.exit_code == EXIT_CONFLICT
    assert res.stderr.splitlines() == [
        'error: conflict: spec.kind: messages are refused while turn "demo-t1" waits for a Resume input']
    assert res.stdout == ""


def test_a_missing_session_is_not_found(kube: FakeKube) -> None:
    def refuse(body: dict[str, Any]) -> None:
        raise denied(404, 'spec.sessionRef.name: agentsession "nope" not found in this namespace')

    kube.admit = refuse
    res = invoke("send", "nope", "hi")
    assert res.exit_code == EXIT_NOT_FOUND
    assert res.stderr.strip() == 'error: spec.sessionRef.name: agentsession "nope" not found in this namespace'


# -- approve / reject -----------------------------------------------------------------------------------------------

def test_approve_the_only_pending_call_of_a_sessions_active_run(kube: FakeKube) -> None:
    waiting(kube, SINGLE)
    res = invoke("approve", "demo")
    assert res.exit_code == EXIT_OK, res.output
    [body] = kube.created
    assert body["metadata"]["name"] == "demo-t1-wp-s"
    assert body["spec"]["decisions"] == [{"callId": "call-2", "decision": "Approve"}]
    assert "resumed run demo-t1 with input demo-t1-wp-s" in res.stdout
    assert "Approve run_shell (call-2)" in res.stdout
    assert "follow it: kubectl sessionops watch demo-t1 -n team-a" in res.stdout
    again = invoke("approve", "demo-t1")
    assert again.exit_code == EXIT_OK and "already received: input demo-t1-wp-s" in again.stdout
    changed = invoke("reject", "demo-t1", "-m", "no")
    assert changed.exit_code == EXIT_CONFLICT
    assert changed.stderr.splitlines()[0].startswith(
        "error: waitpoint wp-s already used by input demo-t1-wp-s for a different request")


def test_approve_with_several_calls_needs_every_call_decided(kube: FakeKube) -> None:
    waiting(kube, APPROVAL)
    res = invoke("approve", "demo-t1")
    assert res.exit_code == EXIT_USER
    assert res.stderr.splitlines() == [
        "error: the run waits on 3 calls and one resume decides them all: name the calls (number, call id or tool), "
        "decide the others with --reject, or use --all",
        "  pending calls: 1 write_file (call-1), 2 run_shell (call-2), 3 run_shell (call-3)"]
    res = invoke("approve", "demo-t1", "1", "3", "--reject", "2", "-m", "not now")
    assert res.exit_code == EXIT_OK, res.output
    assert kube.created[0]["spec"]["decisions"] == [
        {"callId": "call-1", "decision": "Approve", "message": "not now"},
        {"callId": "call-2", "decision": "Reject", "message": "not now"},
        {"callId": "call-3", "decision": "Approve", "message": "not now"}]


def test_reject_needs_a_message_and_can_approve_others(kube: FakeKube) -> None:
    waiting(kube, APPROVAL)
    res = invoke("reject", "demo-t1", "--all")
    assert res.exit_code == EXIT_USER and "--message" in res.output
    res = invoke("reject", "demo-t1", "--all", "--approve", "write_file", "-m", "too risky")
    assert res.exit_code == EXIT_OK, res.output
    assert [d["decision"] for d in kube.created[0]["spec"]["decisions"]] == ["Approve", "Reject", "Reject"]


def test_deciding_a_run_that_does_not_wait(kube: FakeKube) -> None:
    kube.put("agentruns", run("demo-t1", phase="Running"))
    res = invoke("approve", "demo-t1")
    assert res.exit_code == EXIT_CONFLICT
    assert res.stderr.strip() == "error: run demo-t1 is not waiting for input (phase Running)"
    res = invoke("approve", "demo")
    assert res.exit_code == EXIT_CONFLICT and res.stderr.strip() == "error: session demo has no active run"
    res = invoke("approve", "nope")
    assert res.exit_code == EXIT_NOT_FOUND
    assert res.stderr.strip() == 'error: AgentRun "nope" not found in namespace team-a (nor a session of that name)'


def test_without_client_checks_admission_has_the_word(kube: FakeKube) -> None:
    waiting(kube, APPROVAL)

    def refuse(body: dict[str, Any]) -> None:
        raise denied(422, "spec.decisions[0].callId: 'nope' is not a pending call of this waitpoint")

    kube.admit = refuse
    res = invoke("approve", "demo-t1", "nope", "--no-client-checks")
    assert res.exit_code == EXIT_USER
    assert res.stderr.strip() == ("error: rejected: spec.decisions[0].callId: 'nope' is not a pending call of "
                                  "this waitpoint")


# -- answer ---------------------------------------------------------------------------------------------------------

def test_answer_checks_the_answers_first(kube: FakeKube) -> None:
    waiting(kube, QUESTIONS, "demo-t2")
    res = invoke("answer", "demo-t2", "Go")
    assert res.exit_code == EXIT_USER
    assert res.stderr.splitlines() == [
        "error: expected 3 answers (one per question, in order), got 1",
        "  1. Which language? [Python; Go, or your own]",
        "  2. Which checks? [lint; unit tests; e2e tests, several]",
        "  3. Anything else? [free text]"]
    assert kube.created == []
    res = invoke("answer", "demo", "Kotlin", "lint, e2e tests", "no")
    assert res.exit_code == EXIT_OK, res.output
    assert kube.created[0]["spec"]["answers"] == ["Kotlin", ["lint", "e2e tests"], "no"]
    res = invoke("approve", "demo-t2")
    assert res.exit_code == EXIT_USER
    assert res.stderr.strip() == "error: the run waits at a Question waitpoint, not for approvals: use `answer`"


def test_answer_without_client_checks_shows_the_admission_reason(kube: FakeKube) -> None:
    waiting(kube, QUESTIONS)

    def refuse(body: dict[str, Any]) -> None:
        raise denied(422, "spec.answers: expected 3 answers (one per question, in order), got 1")

    kube.admit = refuse
    res = invoke("answer", "demo-t1", "Go", "--no-client-checks")
    assert res.exit_code == EXIT_USER
    assert res.stderr.strip() == "error: rejected: spec.answers: expected 3 answers (one per question, in order), got 1"


# -- cancel / continue ----------------------------------------------------------------------------------------------

def test_cancel_sets_spec_cancel_once(kube: FakeKube) -> None:
    waiting(kube, SINGLE)
    res = invoke("cancel", "demo")
    assert res.exit_code == EXIT_OK, res.output
    assert kube.patches == [("agentruns", "demo-t1", {"spec": {"cancel": True}})]
    assert ("cancel requested for run demo-t1 (was Waiting); the queue of session demo stays paused until "
            "`kubectl sessionops continue demo -n team-a`") in res.stdout
    res = invoke("cancel", "demo-t1")
    assert res.exit_code == EXIT_OK and "cancel already requested for run demo-t1 (phase Waiting)" in res.stdout
    assert len(kube.patches) == 1
    kube.put("agentruns", run("demo-t2", phase="Succeeded"))
    res = invoke("cancel", "demo-t2")
    assert res.exit_code == EXIT_OK and "run demo-t2 already ended (Succeeded): nothing to cancel" in res.stdout
    kube.objects[("agentsessions", "demo")]["status"].pop("activeRun")
    res = invoke("cancel", "demo")
    assert res.exit_code == EXIT_OK and "session demo has no active run: nothing to cancel" in res.stdout
    assert len(kube.patches) == 1


def test_cancel_wait_follows_the_run_to_cancelled(kube: FakeKube) -> None:
    kube.script("agentruns", "demo-t1", [run(phase="Waiting", waitpoint=SINGLE), run(phase="Waiting", waitpoint=SINGLE),
                                         run(phase="Cancelling"), run(phase="Cancelled")])
    res = invoke("cancel", "demo-t1", "--wait", "--timeout", "10")
    assert res.exit_code == EXIT_OK, res.output
    assert "demo-t1: Cancelling -> Cancelled" in res.stdout
    assert "Approval needed" not in res.stdout


def test_continue_creates_a_continue_input(kube: FakeKube) -> None:
    res = invoke("continue", "demo", "--key", "c1")
    assert res.exit_code == EXIT_OK, res.output
    assert kube.created[0]["metadata"]["name"] == "demo-continue-c1"
    assert kube.created[0]["spec"] == {"sessionRef": {"name": "demo"}, "kind": "Continue", "sequence": 1}

    def refuse(body: dict[str, Any]) -> None:
        raise denied(409, "spec.kind: Continue is accepted only while the session's queue is paused")

    kube.admit = refuse
    res = invoke("continue", "demo")
    assert res.exit_code == EXIT_CONFLICT
    assert res.stderr.strip() == ("error: conflict: spec.kind: Continue is accepted only while the session's queue "
                                  "is paused")


# -- status / watch / usage -----------------------------------------------------------------------------------------

def test_status_shows_the_session(kube: FakeKube) -> None:
    waiting(kube, SINGLE)
    kube.put("agentruns", run("demo-t0", phase="Succeeded", seq=0, result={"text": "earlier answer"}))
    res = invoke("status", "demo")
    assert res.exit_code == EXIT_OK, res.output
    assert "Phase       Waiting" in res.stdout
    assert "Active run  demo-t1 Waiting" in res.stdout
    assert "Approval needed (wp-s)" in res.stdout and "earlier answer" in res.stdout
    res = invoke("status", "nope")
    assert res.exit_code == EXIT_NOT_FOUND
    assert res.stderr.strip() == 'error: AgentSession "nope" not found in namespace team-a'


def test_watch_exit_codes(kube: FakeKube) -> None:
    kube.put("agentruns", run("demo-t1", phase="Failed"))
    assert invoke("watch", "demo-t1").exit_code == 4
    kube.put("agentruns", run("demo-t1", phase="Running"))
    res = invoke("watch", "demo-t1", "--timeout", "0.2", "--interval", "0.05")
    assert res.exit_code == 5 and "timed out after 0.2s: run demo-t1 is Running" in res.stdout
    assert invoke("watch", "nope").exit_code == EXIT_NOT_FOUND


def test_usage_errors_exit_1_and_help_exits_0(kube: FakeKube) -> None:
    assert invoke("bogus").exit_code == EXIT_USER
    assert invoke("send").exit_code == EXIT_USER
    assert invoke("watch", "x", "--interval", "0").exit_code == EXIT_USER
    res = invoke("--help")
    assert res.exit_code == EXIT_OK
    for command in ("send", "approve", "reject", "answer", "cancel", "continue", "status", "watch"):
        assert command in res.stdout

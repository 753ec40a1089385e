"""The CRDs' own validation (schema + CEL with oldSelf) run through cel-python, against
valid and invalid objects, exactly as the API server applies them."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from sessionops.api import crds
from testcluster.schema import FieldError, admit_custom_object, crd_rule_problems

CRDS = {yaml.safe_load(t)["spec"]["names"]["kind"]: yaml.safe_load(t) for t in crds.render_all().values()}
SNAP = {"systemPrompt": "p", "model": "replay/hello", "approvalMode": "Default"}


def admit(kind: str, obj: dict, old: dict | None = None) -> dict:
    return admit_custom_object(CRDS[kind], "v1alpha1", obj, old)[0]


def obj(kind: str, spec: dict, name: str = "x") -> dict:
    return {"apiVersion": "sessionops.dev/v1alpha1", "kind": kind, "metadata": {"name": name, "namespace": "a"},
            "spec": spec}


def rejected(kind: str, new: dict, old: dict | None = None) -> str:
    with pytest.raises(FieldError) as e:
        admit(kind, new, old)
    return e.value.message


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_every_rule_compiles_as_a_real_api_server_would(kind: str) -> None:
    assert crd_rule_problems(CRDS[kind]) == []


def test_blank_session_model_is_rejected_with_the_cel_message() -> None:
    admit("AgentSession", obj("AgentSession", {"agentRef": {"name": "a"}, "model": "m"}))
    msg = rejected("AgentSession", obj("AgentSession", {"agentRef": {"name": "a"}, "model": "  "}))
    assert "spec.model" in msg and "must not be blank" in msg


def test_session_agent_ref_is_immutable_and_long_names_are_refused() -> None:
    old = admit("AgentSession", obj("AgentSession", {"agentRef": {"name": "a"}}))
    new = copy.deepcopy(old)
    new["spec"]["agentRef"]["name"] = "b"
    assert "agentRef is immutable" in rejected("AgentSession", new, old)
    assert "at most 40" in rejected("AgentSession", obj("AgentSession", {"agentRef": {"name": "a"}}, name="x" * 41))


def input_spec(**spec) -> dict:
    return {"sessionRef": {"name": "s"}, "messages": [{"content": "hi"}], **spec}


def test_input_spec_is_immutable_after_creation() -> None:
    old = admit("AgentInput", obj("AgentInput", input_spec(sequence=1, contextSnapshot=SNAP)))
    assert old["spec"]["kind"] == "Message"  # the CRD default
    new = copy.deepcopy(old)
    new["spec"]["messages"][0]["content"] = "edited"
    assert "spec is immutable" in rejected("AgentInput", new, old)
    admit("AgentInput", copy.deepcopy(old), old)  # re-applying the same spec is fine


@pytest.mark.parametrize(("spec", "words"), [
    ({"sessionRef": {"name": "s"}}, "at least one message"),
    (input_spec(kind="Continue"), "only Message inputs carry messages"),
    (input_spec(overrides={"model": "m"}), "FollowUp delivery only"),
    (input_spec(delivery="FollowUp", overrides={"model": " "}), "must not be blank"),
    ({"sessionRef": {"name": "s"}, "kind": "Resume", "decisions": []}, "names run and waitpointId"),
    (input_spec(run="r1"), "belong to Resume inputs"),
    ({"sessionRef": {"name": "s"}, "kind": "Continue", "delivery": "Steer"}, "Message inputs only"),
    (input_spec(messages=[{"content": "x"}] * 21), "21"),
    (input_spec(messages=[{"content": "x" * 32_769}]), "Too long"),
    (input_spec(messages=[{"content": "ok"}, {"content": " \n\t\u3000"}]),
     "spec.messages[1].content: Invalid value: must not be blank (whitespace only)"),
], ids=["message without messages", "continue with messages", "overrides without FollowUp", "blank override model",
        "resume without run", "run on a message", "delivery on a continue", "too many messages", "oversize message",
        "whitespace-only message"])
def test_invalid_inputs_are_rejected_with_a_field_and_reason(spec: dict, words: str) -> None:
    assert words in rejected("AgentInput", obj("AgentInput", spec))


def run_obj(cancel: bool) -> dict:
    return obj("AgentRun", {"sessionRef": {"name": "s"}, "inputs": ["i"], "contextSnapshot": SNAP, "cancel": cancel})


def test_run_cancel_only_goes_from_false_to_true() -> None:
    false, true = admit("AgentRun", run_obj(False)), admit("AgentRun", run_obj(True))
    admit("AgentRun", copy.deepcopy(true), false)
    admit("AgentRun", copy.deepcopy(true), true)  # repeating is a no-op
    assert "cancel can only change from false to true" in rejected("AgentRun", copy.deepcopy(false), true)


def test_run_spec_other_than_cancel_is_immutable() -> None:
    old = admit("AgentRun", run_obj(False))
    new = copy.deepcopy(old)
    new["spec"]["inputs"] = ["other"]
    assert "only spec.cancel may change" in rejected("AgentRun", new, old)


# ------------------------------------------------------------------ status transition rules (issue 12)

def with_status(kind: str, spec: dict, status: dict | None) -> dict:
    result = obj(kind, spec)
    if status is not None:
        result["status"] = status
    return result


SESSION_SPEC = {"agentRef": {"name": "a"}, "contextSnapshot": SNAP}


def session(status: dict | None) -> dict:
    return admit("AgentSession", with_status("AgentSession", SESSION_SPEC, status))


def test_session_last_sequence_never_decreases() -> None:
    old = session({"lastSequence": 3})
    admit("AgentSession", session({"lastSequence": 4}), old)
    admit("AgentSession", session({"lastSequence": 3, "phase": "Idle"}), old)  # other fields may change
    for forged in ({"lastSequence": 0}, {"lastSequence": 2}, {"phase": "Idle"}):  # absent: defaulted to 0
        message = rejected("AgentSession", with_status("AgentSession", SESSION_SPEC, forged), old)
        assert "status.lastSequence" in message and "never decreases" in message
    # A first status (no old status) may start anywhere: transition rules need an old value.
    admit("AgentSession", session({"lastSequence": 0}), session(None))


def test_a_written_status_cannot_be_removed() -> None:
    old = session({"lastSequence": 3})
    message = rejected("AgentSession", with_status("AgentSession", SESSION_SPEC, None), old)
    assert "status" in message and "cannot be removed" in message
    admit("AgentSession", session(None), session(None))  # never written: nothing to keep
    run_old = admit("AgentRun", with_status("AgentRun", run_obj(False)["spec"], {"phase": "Succeeded"}))
    assert "cannot be removed" in rejected("AgentRun", with_status("AgentRun", run_obj(False)["spec"], None), run_old)


def run_with(status: dict | None) -> dict:
    return admit("AgentRun", with_status("AgentRun", run_obj(False)["spec"], status))


WAITPOINT = {"id": "w1", "kind": "Question", "questions": [{"questionId": "q1", "question": "?"}]}


@pytest.mark.parametrize("terminal", ["Succeeded", "Failed", "Cancelled"])
def test_a_finished_run_keeps_its_phase_waitpoint_and_result(terminal: str) -> None:
    old = run_with({"phase": terminal, "result": {"text": "done", "segment": "r-1"}})
    # Conditions, usage and bookkeeping may still be written on a finished run.
    admit("AgentRun", run_with({"phase": terminal, "result": {"text": "done", "segment": "r-1"},
                                "usage": {"inputTokens": 1, "outputTokens": 2}}), old)
    for phase in ("Waiting", "Running", "Pending", *({"Succeeded", "Failed", "Cancelled"} - {terminal})):
        message = rejected("AgentRun", with_status("AgentRun", run_obj(False)["spec"],
                                                   {"phase": phase, "result": {"text": "done", "segment": "r-1"}}), old)
        assert "status.phase" in message and "never changes" in message
    forged = with_status("AgentRun", run_obj(False)["spec"],
                         {"phase": terminal, "waitpoint": WAITPOINT, "result": {"text": "done", "segment": "r-1"}})
    assert "status.waitpoint" in rejected("AgentRun", forged, old)
    forged = with_status("AgentRun", run_obj(False)["spec"], {"phase": terminal, "result": {"text": "forged"}})
    assert "status.result" in rejected("AgentRun", forged, old)


def test_an_active_run_moves_freely_between_phases() -> None:
    waiting = run_with({"phase": "Waiting", "waitpoint": WAITPOINT})
    running = run_with({"phase": "Running"})
    admit("AgentRun", copy.deepcopy(running), waiting)
    admit("AgentRun", copy.deepcopy(waiting), running)
    admit("AgentRun", run_with({"phase": "Succeeded", "result": {"text": "ok"}}), running)
    admit("AgentRun", run_with({"phase": "Cancelled"}), run_with({"phase": "Cancelling"}))
    admit("AgentRun", run_with({"phase": "Running"}), run_with(None))


def input_with(status: dict | None) -> dict:
    return admit("AgentInput", with_status("AgentInput", input_spec(sequence=1, contextSnapshot=SNAP), status))


@pytest.mark.parametrize("settled", ["Consumed", "Rejected", "Cancelled"])
def test_a_settled_input_never_changes_phase(settled: str) -> None:
    old = input_with({"phase": settled, **({"run": "s-t1"} if settled == "Consumed" else {})})
    for phase in {"Pending", "Consumed", "Rejected", "Cancelled"} - {settled}:
        message = rejected("AgentInput", with_status("AgentInput", input_spec(sequence=1, contextSnapshot=SNAP),
                                                     {"phase": phase, "run": "s-t1"}), old)
        assert "status.phase" in message and "never changes" in message


def test_a_consumed_input_keeps_its_run_and_a_pending_one_may_settle() -> None:
    consumed = input_with({"phase": "Consumed", "run": "s-t1"})
    admit("AgentInput", input_with({"phase": "Consumed", "run": "s-t1", "observedGeneration": 1}), consumed)
    for forged in ({"phase": "Consumed", "run": "s-t9"}, {"phase": "Consumed"}):
        message = rejected("AgentInput", with_status("AgentInput", input_spec(sequence=1, contextSnapshot=SNAP),
                                                     forged), consumed)
        assert "status.run" in message
    for phase in ("Consumed", "Rejected", "Cancelled"):
        admit("AgentInput", input_with({"phase": phase, "run": "s-t1"}), input_with({"phase": "Pending"}))
    admit("AgentInput", input_with({"phase": "Consumed", "run": "s-t1"}), input_with(None))


def test_the_charts_input_crd_accepts_a_valid_input_and_rejects_a_blank_model() -> None:
    path = Path(__file__).resolve().parents[2] / "charts/sessionops/crds/sessionops.dev_agentinputs.yaml"
    crd = yaml.safe_load(path.read_text())
    version = crd["spec"]["versions"][0]["name"]
    body = {
        "apiVersion": f"sessionops.dev/{version}",
        "kind": "AgentInput",
        "metadata": {"name": "in-1", "namespace": "default"},
        "spec": {"sessionRef": {"name": "s"}, "messages": [{"content": "hi"}]},
    }
    result, warnings = admit_custom_object(crd, version, body, None)
    assert result["spec"]["kind"] == "Message"
    assert warnings == []
    blank = copy.deepcopy(body)
    blank["spec"]["overrides"] = {"model": " "}
    blank["spec"]["delivery"] = "FollowUp"
    with pytest.raises(FieldError) as info:
        admit_custom_object(crd, version, blank, None)
    assert "spec.overrides.model: Invalid value: must not be blank" in info.value.message

"""The CRDs' own validation (schema + CEL with oldSelf) run through cel-python, against
valid and invalid objects, exactly as the API server applies them."""

from __future__ import annotations

import copy

import pytest
import yaml

from sessionops.api import crds
from tests.cluster.schema import FieldError, admit_custom_object, crd_rule_problems

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

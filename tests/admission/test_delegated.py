"""Admission of delegated children (pure rules): parent checks, frozen snapshots, tree labels, identity."""

from __future__ import annotations

import pytest

from sessionops.admission import delegated
from sessionops.admission.errors import Rejection
from sessionops.admission.sessions import session_snapshot_on_create
from tests import factories

CONFIG = factories.config(models=("replay/hello", "replay/steer", "replay/target"))
PARENT_SNAP = {**session_snapshot_on_create({"agentRef": {"name": "helper"}}, factories.agent(), CONFIG).dump(),
               "model": "replay/steer", "approvalMode": "AlwaysTrust"}
TARGET = factories.agent("target", uid="target-uid", generation=7, systemPrompt="You review.", model="replay/target",
                         approvalMode="Default")


def parent(phase: str | None = "Running", cancel: bool = False) -> dict:
    run = factories.run("p-t1", "p", phase=phase, snapshot=PARENT_SNAP)
    run["spec"]["cancel"] = cancel
    return run


def child_spec(inherit: bool = True, agent: str = "helper", **spec) -> dict:
    return {"agentRef": {"name": agent}, **spec,
            "delegation": {"parentRun": "p-t1", "toolCallId": "call_1", "name": "kid", "inherit": inherit}}


def test_only_an_active_parent_run_may_delegate() -> None:
    assert delegated.check_parent(parent(), "p-t1")["metadata"]["name"] == "p-t1"
    with pytest.raises(Rejection) as missing:
        delegated.check_parent(None, "p-t1")
    assert (missing.value.field, missing.value.code) == ("spec.delegation.parentRun", 404)
    for gone in (parent("Succeeded"), parent("Cancelled"), parent("Waiting", cancel=True)):
        with pytest.raises(Rejection, match="is not active") as e:
            delegated.check_parent(gone, "p-t1")
        assert e.value.code == 409


def test_an_inheriting_child_freezes_the_parent_runs_snapshot() -> None:
    snap = delegated.child_snapshot(child_spec(), parent(), None, CONFIG)
    assert snap.dump() == PARENT_SNAP
    for key, value in (("model", "replay/hello"), ("approvalMode", "Default"), ("context", {"x": 1})):
        with pytest.raises(Rejection, match="inheriting child") as e:
            delegated.child_snapshot(child_spec(**{key: value}), parent(), None, CONFIG)
        assert e.value.field == f"spec.{key}"
    with pytest.raises(Rejection, match='parent run\'s agent "helper"'):
        delegated.child_snapshot(child_spec(agent="target"), parent(), None, CONFIG)


def test_an_explicit_agent_is_resolved_now_with_the_parent_runs_approval_mode() -> None:
    snap = delegated.child_snapshot(child_spec(inherit=False, agent="target"), parent(), TARGET, CONFIG)
    assert (snap.system_prompt, snap.model, snap.approval_mode) == ("You review.", "replay/target", "AlwaysTrust")
    assert (snap.source.agent_name, snap.source.agent_generation) == ("target", 7)
    with pytest.raises(Rejection, match="parent run's approval mode") as e:
        delegated.child_snapshot(child_spec(inherit=False, agent="target", approvalMode="Default"), parent(),
                                 TARGET, CONFIG)
    assert e.value.field == "spec.approvalMode"
    with pytest.raises(Rejection, match="not found") as e:
        delegated.child_snapshot(child_spec(inherit=False, agent="gone"), parent(), None, CONFIG)


def test_children_carry_the_root_of_their_tree() -> None:
    root = factories.session("p")
    assert delegated.child_labels(parent(), root, 5) == {
        "sessionops.dev/tree": "p", "sessionops.dev/parent-run": "p-t1", "sessionops.dev/parent-session": "p",
        "sessionops.dev/depth": "1"}
    nested = factories.session("p")
    nested["metadata"]["labels"] = {"sessionops.dev/tree": "grandparent", "sessionops.dev/depth": "1"}
    labels = delegated.child_labels(parent(), nested, 5)
    assert (labels["sessionops.dev/tree"], labels["sessionops.dev/depth"]) == ("grandparent", "2")


def test_a_tree_stops_growing_at_its_depth_limit() -> None:
    deep = factories.session("p")
    deep["metadata"]["labels"] = {"sessionops.dev/tree": "root", "sessionops.dev/depth": "2"}
    assert delegated.child_labels(parent(), deep, 3)["sessionops.dev/depth"] == "3"
    with pytest.raises(Rejection, match="at most 2 level") as e:
        delegated.child_labels(parent(), deep, 2)
    assert e.value.field == "spec.delegation.parentRun" and 'below its root "root"' in str(e.value)


def test_a_delegated_input_acts_for_the_parent_runs_submitter() -> None:
    child = factories.session("kid-1")
    child["spec"]["delegation"] = child_spec()["delegation"]
    first = {"spec": {"submittedBy": {"username": "alice", "groups": ["devs"]}}}
    msg = {"kind": "Message", "messages": [{"content": "do it"}]}

    def submitter(session=child, run=None, first_input=first, name="kid-1-delegated", spec=msg):
        return delegated.delegated_submitter(session, run or parent(), "p-t1", first_input, name, spec)

    assert submitter() == {"username": "alice", "groups": ["devs"]}
    cases = [
        ({"session": factories.session("other")}, "metadata.labels[sessionops.dev/parent-run]", "not delegated by"),
        ({"run": parent("Cancelled")}, "spec.delegation.parentRun", "is not active"),
        ({"name": "kid-1-second"}, "metadata.name", 'is named "kid-1-delegated"'),
        ({"spec": {"kind": "Resume"}}, "spec.kind", "a delegated input is a Message"),
        ({"first_input": {"spec": {}}}, "metadata.labels[sessionops.dev/parent-run]", "no admitted input"),
    ]
    for change, field, reason in cases:
        with pytest.raises(Rejection, match=reason) as e:
            submitter(**change)
        assert e.value.field == field, change


def test_a_pod_bound_token_delegates_only_for_its_own_run() -> None:
    worker = {"username": "system:serviceaccount:team-a:sessionops-worker",
              "extra": {"authentication.kubernetes.io/pod-name": ["p-t1-1-abcde"]}}
    delegated.check_pod(worker, "p-t1", "p-t1")
    with pytest.raises(Rejection, match='pod "p-t1-1-abcde" is not a worker of agentrun "q-t1"') as e:
        delegated.check_pod(worker, "p-t1", "q-t1")
    assert e.value.code == 403
    delegated.check_pod({"username": "kubernetes-admin"}, None, "q-t1")  # no pod: the SAR decides alone


def test_tree_labels_are_set_by_admission_and_never_change() -> None:
    tree = {"sessionops.dev/tree": "root", "sessionops.dev/depth": "1"}
    assert delegated.tree_label_problem({"app": "x"}, None, delegated=False) is None
    assert delegated.tree_label_problem(tree, None, delegated=True) is None
    assert delegated.tree_label_problem(tree, None, delegated=False) == \
        "metadata.labels[sessionops.dev/tree]: set by sessionops on delegated child sessions only"
    assert delegated.tree_label_problem({**tree, "app": "y"}, tree, delegated=True) is None
    assert delegated.tree_label_problem({"sessionops.dev/tree": "root"}, tree, delegated=True) == \
        "metadata.labels[sessionops.dev/depth]: set by sessionops and immutable"


def test_an_explicit_target_is_reviewed_for_the_parents_submitter() -> None:
    alice = {"username": "alice", "groups": ["devs"]}
    assert delegated.target_review_spec(alice, "team-a", "target") == {
        "user": "alice", "groups": ["devs"], "resourceAttributes": {
            "namespace": "team-a", "verb": "get", "group": "sessionops.dev", "resource": "agents", "name": "target"}}
    refusal = delegated.target_refused(alice, "target", "denied by policy")
    assert (refusal.field, refusal.code) == ("spec.agentRef.name", 403)
    assert str(refusal) == 'spec.agentRef.name: alice may not get agent "target": denied by policy'


def test_the_delegate_permission_is_a_subject_access_review_of_the_requester() -> None:
    user = {"username": "system:serviceaccount:team-a:sessionops-worker", "uid": "u1",
            "groups": ["system:serviceaccounts"], "extra": {"k": ["v"]}}
    assert delegated.review_spec(user, "team-a", "p-t1") == {
        "user": user["username"], "uid": "u1", "groups": ["system:serviceaccounts"], "extra": {"k": ["v"]},
        "resourceAttributes": {"namespace": "team-a", "verb": "delegate", "group": "sessionops.dev",
                               "resource": "agentruns", "name": "p-t1"}}
    assert "may not delegate on agentrun \"p-t1\": no rule" in delegated.forbidden_message(user, "p-t1", "no rule")

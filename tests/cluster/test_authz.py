"""SubjectAccessReview answers from a per-test policy table."""

from __future__ import annotations

import pytest

from tests.cluster.authz import Policy, review
from tests.cluster.schema import FieldError


class FakeCluster:
    def __init__(self, policy: Policy | None = None) -> None:
        self.authz_policy = policy


def sar(user="alice", groups=("system:authenticated",), **attrs) -> dict:
    spec: dict = {"user": user, "groups": list(groups)}
    if "path" in attrs:
        spec["nonResourceAttributes"] = {"path": attrs.pop("path"), "verb": attrs.pop("verb", "get")}
    else:
        resource = {
            "verb": "create",
            "group": "sessionops.dev",
            "version": "v1alpha1",
            "resource": "agentinputs",
            "namespace": "team-a",
        }
        resource.update(attrs)
        spec["resourceAttributes"] = resource
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


async def decide(policy: Policy | None, request: dict, **kwargs) -> dict:
    return (await review(FakeCluster(policy), request, **kwargs))["status"]


async def test_without_a_policy_everything_is_allowed():
    status = await decide(None, sar())
    assert status["allowed"] is True


async def test_an_empty_policy_denies_by_default_without_an_explicit_denial():
    status = await decide(Policy(), sar())
    assert status == {"allowed": False}


async def test_an_allow_rule_allows_exactly_what_it_names():
    policy = Policy()
    policy.allow(user="alice", verbs=["create"], resources=["agentinputs"], api_groups=["sessionops.dev"])
    assert (await decide(policy, sar()))["allowed"] is True
    assert (await decide(policy, sar(verb="delete")))["allowed"] is False
    assert (await decide(policy, sar(user="bob")))["allowed"] is False
    assert (await decide(policy, sar(resource="agentsessions")))["allowed"] is False
    assert (await decide(policy, sar(group="")))["allowed"] is False


async def test_an_explicit_deny_wins_over_an_allow():
    policy = Policy.allow_all()
    policy.deny(user="mallory", verbs=["create"])
    status = await decide(policy, sar(user="mallory"))
    assert status["allowed"] is False and status["denied"] is True
    assert "denied by test policy rule" in status["reason"]
    assert (await decide(policy, sar(user="mallory", verb="get")))["allowed"] is True


async def test_group_rules_apply_to_members():
    policy = Policy()
    policy.allow(group="devs", verbs=["*"])
    assert (await decide(policy, sar(user="carol", groups=["devs"])))["allowed"] is True
    assert (await decide(policy, sar(user="carol", groups=["ops"])))["allowed"] is False


@pytest.mark.parametrize(
    ("resources", "resource", "subresource", "expected"),
    [
        (["pods"], "pods", "", True),
        (["pods"], "pods", "log", False),
        (["pods/log"], "pods", "log", True),
        (["*/log"], "jobs", "log", True),
        (["*"], "pods", "exec", True),
    ],
    ids=[
        "a resource matches itself",
        "a resource does not cover its subresources",
        "resource/sub names a subresource",
        "*/sub names that subresource of any resource",
        "* covers subresources too (RBAC)",
    ],
)
async def test_subresources_follow_rbac(resources, resource, subresource, expected):
    policy = Policy()
    policy.allow(user="alice", verbs=["get"], resources=resources, api_groups=[""])
    request = sar(verb="get", group="", resource=resource, subresource=subresource)
    assert (await decide(policy, request))["allowed"] is expected


async def test_names_and_namespaces_narrow_a_rule():
    policy = Policy()
    policy.allow(user="alice", verbs=["get"], names=["s1"], namespaces=["team-a"])
    assert (await decide(policy, sar(verb="get", name="s1")))["allowed"] is True
    assert (await decide(policy, sar(verb="get", name="s2")))["allowed"] is False
    assert (await decide(policy, sar(verb="get", name="s1", namespace="team-b")))["allowed"] is False
    assert (await decide(policy, sar(verb="get", name="s1", namespace="")))["allowed"] is False


async def test_non_resource_urls_match_exactly_or_by_prefix():
    policy = Policy()
    policy.allow(user="alice", verbs=["get"], non_resource_urls=["/healthz", "/metrics/*"])
    assert (await decide(policy, sar(path="/healthz")))["allowed"] is True
    assert (await decide(policy, sar(path="/metrics/x")))["allowed"] is True
    assert (await decide(policy, sar(path="/version")))["allowed"] is False
    assert (await decide(policy, sar(verb="get", resource="pods", group="")))["allowed"] is False


async def test_system_masters_are_always_allowed():
    status = await decide(Policy(), sar(user="admin", groups=["system:masters"]))
    assert status["allowed"] is True


async def test_revoke_removes_grants():
    policy = Policy()
    policy.allow(user="alice", verbs=["create"])
    policy.allow(user="alice", verbs=["get"])
    policy.allow(user="bob", verbs=["create"])
    assert policy.revoke(user="alice", verbs=["create"]) == 1
    assert (await decide(policy, sar()))["allowed"] is False
    assert (await decide(policy, sar(verb="get")))["allowed"] is True
    assert policy.revoke(user="alice") == 1
    assert (await decide(policy, sar(verb="get")))["allowed"] is False
    rule = policy.allow_rules[0]
    assert policy.revoke(rule) == 1 and policy.allow_rules == []


async def test_every_review_is_recorded():
    policy = Policy.allow_all()
    await decide(policy, sar(name="in-1"))
    await decide(policy, sar(path="/healthz"))
    first, second = policy.record
    assert first["user"] == "alice" and first["verb"] == "create" and first["resource"] == "agentinputs"
    assert first["namespace"] == "team-a" and first["name"] == "in-1" and first["allowed"] is True
    assert second["path"] == "/healthz" and second["allowed"] is True
    policy.clear_record()
    assert policy.record == []


async def test_a_self_subject_access_review_uses_the_requesting_user():
    policy = Policy()
    policy.allow(user="alice", verbs=["create"])
    request = sar(user="")
    request["kind"] = "SelfSubjectAccessReview"
    del request["spec"]["user"], request["spec"]["groups"]
    result = await review(FakeCluster(policy), request, user_info={"username": "alice", "groups": []})
    assert result["status"]["allowed"] is True
    assert result["kind"] == "SelfSubjectAccessReview"
    result = await review(FakeCluster(policy), request, user_info={"username": "bob", "groups": []})
    assert result["status"]["allowed"] is False


async def test_a_local_review_takes_its_namespace_from_metadata():
    policy = Policy()
    policy.allow(user="alice", verbs=["create"], namespaces=["team-a"])
    request = sar()
    del request["spec"]["resourceAttributes"]["namespace"]
    request["kind"] = "LocalSubjectAccessReview"
    request["metadata"] = {"namespace": "team-a"}
    assert (await decide(policy, request))["allowed"] is True


async def test_a_review_without_attributes_is_invalid():
    request = sar()
    del request["spec"]["resourceAttributes"]
    with pytest.raises(FieldError) as info:
        await review(FakeCluster(None), request)
    assert info.value.status == 422
    assert info.value.causes[0]["field"] == "spec.resourceAttributes"


async def test_the_input_review_is_not_mutated():
    request = sar()
    before = repr(request)
    result = await review(FakeCluster(Policy.allow_all()), request)
    assert repr(request) == before
    assert result["spec"] == request["spec"] and "status" not in request


def test_a_rule_needs_a_subject():
    with pytest.raises(ValueError):
        Policy().allow(verbs=["get"])

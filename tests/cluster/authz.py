"""SubjectAccessReview answers for the test API server, from a per-test policy table.

The emulated API server has **no RBAC**: Roles, ClusterRoles and their bindings may be stored
but are never evaluated, and requests made to the emulator itself are not authorized. What
tests can control is the answer to ``SubjectAccessReview`` /
``SelfSubjectAccessReview`` requests - which is all the operator uses (it re-checks the
permissions of the identity that submitted an input). `review` answers them from
``cluster.authz_policy``:

- ``None`` (the default): everything is allowed;
- a `Policy`: explicit deny rules first (``denied: true``), then allow rules; no match means
  "no opinion", i.e. ``allowed: false`` (default deny). Members of ``system:masters`` are
  always allowed, as with the real API server.

Every review is appended to ``policy.record`` so tests can assert what was asked::

    policy = Policy()
    policy.allow(user="alice", verbs=["create"], resources=["agentinputs"], api_groups=["sessionops.dev"])
    cluster.authz_policy = policy
    ...
    assert policy.record[-1]["allowed"] is True

Matching follows RBAC: ``*`` wildcards for verbs, API groups, resources (``*`` also covers
subresources; ``pods/log`` and ``*/log`` name subresources), empty ``names`` means any name,
``namespaces=["*"]`` means any namespace and cluster-scoped requests, and non-resource URLs
match exactly or by a trailing ``*`` prefix.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .schema import FieldError

__all__ = ["Decision", "Policy", "Rule", "review"]


def _tuple(value: str | Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


@dataclass(frozen=True)
class Rule:
    """One allow or deny rule. A rule applies to a subject when its user or one of its groups is
    listed (``"*"`` = anybody)."""

    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ("*",)
    api_groups: tuple[str, ...] = ("*",)
    resources: tuple[str, ...] = ("*",)
    namespaces: tuple[str, ...] = ("*",)
    names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    def applies_to(self, user: str, groups: Iterable[str]) -> bool:
        if "*" in self.users or user in self.users:
            return True
        return "*" in self.groups or any(g in self.groups for g in groups)

    def matches(self, attrs: dict) -> bool:
        if not self.applies_to(attrs.get("user") or "", attrs.get("groups") or ()):
            return False
        verb = attrs.get("verb") or ""
        if "*" not in self.verbs and verb not in self.verbs:
            return False
        if attrs.get("non_resource"):
            path = attrs.get("path") or ""
            for url in self.non_resource_urls:
                if url == "*" or url == path or (url.endswith("*") and path.startswith(url[:-1])):
                    return True
            return False
        if "*" not in self.api_groups and (attrs.get("group") or "") not in self.api_groups:
            return False
        resource, sub = attrs.get("resource") or "", attrs.get("subresource") or ""
        combined = f"{resource}/{sub}" if sub else resource
        if not any(r == "*" or r == combined or (sub and r == f"*/{sub}") for r in self.resources):
            return False
        namespace = attrs.get("namespace") or ""
        if "*" not in self.namespaces and namespace not in self.namespaces:
            return False
        return not self.names or "*" in self.names or (attrs.get("name") or "") in self.names

    def describe(self) -> str:
        who = ", ".join([*(f"User {u!r}" for u in self.users), *(f"Group {g!r}" for g in self.groups)])
        if self.non_resource_urls:
            what = f"verbs={list(self.verbs)} nonResourceURLs={list(self.non_resource_urls)}"
        else:
            what = (
                f"verbs={list(self.verbs)} apiGroups={list(self.api_groups)} resources={list(self.resources)}"
                f" namespaces={list(self.namespaces)}" + (f" names={list(self.names)}" if self.names else "")
            )
        return f"{who}: {what}"


@dataclass(frozen=True)
class Decision:
    allowed: bool
    denied: bool
    reason: str


def _make_rule(
    user: str | Iterable[str] | None,
    group: str | Iterable[str] | None,
    users: Iterable[str] | None,
    groups: Iterable[str] | None,
    verbs: str | Iterable[str],
    resources: str | Iterable[str],
    api_groups: str | Iterable[str],
    namespaces: str | Iterable[str],
    names: str | Iterable[str] | None,
    non_resource_urls: str | Iterable[str] | None,
) -> Rule:
    all_users = _tuple(user) + _tuple(users)
    all_groups = _tuple(group) + _tuple(groups)
    if not all_users and not all_groups:
        raise ValueError("a rule needs a user or a group ('*' for anybody)")
    urls = _tuple(non_resource_urls)
    return Rule(
        users=all_users,
        groups=all_groups,
        verbs=_tuple(verbs),
        api_groups=() if urls else _tuple(api_groups),
        resources=() if urls else _tuple(resources),
        namespaces=_tuple(namespaces),
        names=_tuple(names),
        non_resource_urls=urls,
    )


@dataclass
class Policy:
    """A SubjectAccessReview policy table: allow rules, explicit deny rules, default deny."""

    allow_rules: list[Rule] = field(default_factory=list)
    deny_rules: list[Rule] = field(default_factory=list)
    record: list[dict] = field(default_factory=list)

    @classmethod
    def allow_all(cls) -> Policy:
        policy = cls()
        policy.allow(user="*")
        policy.allow(user="*", non_resource_urls=["*"])
        return policy

    def allow(
        self,
        user: str | Iterable[str] | None = None,
        group: str | Iterable[str] | None = None,
        *,
        users: Iterable[str] | None = None,
        groups: Iterable[str] | None = None,
        verbs: str | Iterable[str] = ("*",),
        resources: str | Iterable[str] = ("*",),
        api_groups: str | Iterable[str] = ("*",),
        namespaces: str | Iterable[str] = ("*",),
        names: str | Iterable[str] | None = None,
        non_resource_urls: str | Iterable[str] | None = None,
    ) -> Rule:
        rule = _make_rule(
            user, group, users, groups, verbs, resources, api_groups, namespaces, names, non_resource_urls
        )
        self.allow_rules.append(rule)
        return rule

    def deny(
        self,
        user: str | Iterable[str] | None = None,
        group: str | Iterable[str] | None = None,
        *,
        users: Iterable[str] | None = None,
        groups: Iterable[str] | None = None,
        verbs: str | Iterable[str] = ("*",),
        resources: str | Iterable[str] = ("*",),
        api_groups: str | Iterable[str] = ("*",),
        namespaces: str | Iterable[str] = ("*",),
        names: str | Iterable[str] | None = None,
        non_resource_urls: str | Iterable[str] | None = None,
    ) -> Rule:
        rule = _make_rule(
            user, group, users, groups, verbs, resources, api_groups, namespaces, names, non_resource_urls
        )
        self.deny_rules.append(rule)
        return rule

    def revoke(self, rule: Rule | None = None, **filters: Any) -> int:
        """Remove allow rules: the given rule, or every rule whose listed fields equal ``filters``.

        ``policy.revoke(user="alice")`` removes all of Alice's grants; ``policy.revoke(user="alice",
        verbs=["create"])`` only those with exactly these verbs. Returns how many were removed.
        """
        if rule is not None:
            before = len(self.allow_rules)
            self.allow_rules = [r for r in self.allow_rules if r != rule]
            return before - len(self.allow_rules)
        aliases = {"user": "users", "group": "groups"}
        wanted = {aliases.get(k, k): _tuple(v) for k, v in filters.items()}
        for key in wanted:
            if key not in Rule.__dataclass_fields__:
                raise TypeError(f"unknown rule field {key!r}")

        def selected(r: Rule) -> bool:
            for key, value in wanted.items():
                current = getattr(r, key)
                if key in ("users", "groups"):
                    if not set(value) <= set(current):
                        return False
                elif current != value:
                    return False
            return True

        before = len(self.allow_rules)
        self.allow_rules = [r for r in self.allow_rules if not selected(r)]
        return before - len(self.allow_rules)

    def authorize(self, attrs: dict) -> Decision:
        """Decide for request attributes (``user``, ``groups``, ``verb``, ``group``, ``resource``,
        ``subresource``, ``namespace``, ``name`` or ``non_resource`` + ``path``)."""
        if "system:masters" in (attrs.get("groups") or ()):
            return Decision(True, False, 'allowed: member of the "system:masters" group')
        for rule in self.deny_rules:
            if rule.matches(attrs):
                return Decision(False, True, f"denied by test policy rule ({rule.describe()})")
        for rule in self.allow_rules:
            if rule.matches(attrs):
                return Decision(True, False, f"allowed by test policy rule ({rule.describe()})")
        return Decision(False, False, "")

    def clear_record(self) -> None:
        self.record.clear()


def _attributes(spec: dict, user: str, groups: list[str]) -> dict:
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if bool(resource) == bool(non_resource):
        raise FieldError(
            'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: '
            '"null": exactly one of nonResourceAttributes or resourceAttributes must be specified',
            causes=[
                {
                    "reason": "FieldValueInvalid",
                    "message": 'Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes '
                    "must be specified",
                    "field": "spec.resourceAttributes",
                }
            ],
            kind="SubjectAccessReview",
            group="authorization.k8s.io",
        )
    if non_resource:
        return {
            "user": user,
            "groups": groups,
            "verb": non_resource.get("verb") or "",
            "non_resource": True,
            "path": non_resource.get("path") or "",
        }
    return {
        "user": user,
        "groups": groups,
        "verb": resource.get("verb") or "",
        "group": resource.get("group") or "",
        "version": resource.get("version") or "",
        "resource": resource.get("resource") or "",
        "subresource": resource.get("subresource") or "",
        "namespace": resource.get("namespace") or "",
        "name": resource.get("name") or "",
        "non_resource": False,
    }


async def review(cluster: Any, sar: dict, *, user_info: dict | None = None) -> dict:
    """Answer a SubjectAccessReview (or, with ``user_info``, a SelfSubjectAccessReview).

    Returns a copy of ``sar`` with ``status: {allowed, denied, reason}``. For a
    SelfSubjectAccessReview the subject is ``user_info`` (``username``, ``groups``), as the real
    server takes it from the authenticated request. A LocalSubjectAccessReview takes its
    namespace from ``metadata.namespace``. Raises `FieldError` for a malformed review.
    """
    result = copy.deepcopy(sar)
    spec = result.setdefault("spec", {})
    kind = result.get("kind") or "SubjectAccessReview"
    if kind == "SelfSubjectAccessReview" or user_info is not None:
        info = user_info or {}
        user, groups = info.get("username") or "", list(info.get("groups") or [])
    else:
        user, groups = spec.get("user") or "", list(spec.get("groups") or [])
    if kind == "LocalSubjectAccessReview" and spec.get("resourceAttributes") is not None:
        spec["resourceAttributes"].setdefault(
            "namespace", (result.get("metadata") or {}).get("namespace", "")
        )
    attrs = _attributes(spec, user, groups)

    policy = getattr(cluster, "authz_policy", None)
    if policy is None:
        decision = Decision(
            True, False, "no authorization policy installed: the test cluster allows everything"
        )
    else:
        decision = policy.authorize(attrs)
        entry = {"kind": kind, **{k: v for k, v in attrs.items() if k != "non_resource"}}
        entry.update(allowed=decision.allowed, denied=decision.denied, reason=decision.reason)
        policy.record.append(entry)
    status: dict[str, Any] = {"allowed": decision.allowed}
    if decision.denied:
        status["denied"] = True
    if decision.reason:
        status["reason"] = decision.reason
    result["status"] = status
    return result

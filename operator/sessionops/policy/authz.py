"""SubjectAccessReview specs for an identity (pure): one shape for the worker's execution-time
checks and for admission's checks of a delegating requester and of a run's submitter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessionops import GROUP
from sessionops.api.input import SubmittedBy


def subject_of(userinfo: Mapping[str, Any]) -> SubmittedBy:
    """An AdmissionReview's ``userInfo`` as the identity admission records and reviews."""
    return SubmittedBy(username=userinfo.get("username", ""), uid=userinfo.get("uid") or None,
                       groups=list(userinfo.get("groups") or []),
                       extra={k: list(v) for k, v in (userinfo.get("extra") or {}).items()})


def review_spec(subject: SubmittedBy, namespace: str, verb: str, resource: str, name: str, *,
                group: str = GROUP) -> dict[str, Any]:
    """The SubjectAccessReview spec: may ``subject`` ``verb`` this object (of our API group unless
    ``group`` says otherwise; an empty ``name`` means any object of the resource)?"""
    attributes = {"namespace": namespace, "verb": verb, "group": group, "resource": resource}
    if name:
        attributes["name"] = name
    spec: dict[str, Any] = {"user": subject.username, "resourceAttributes": attributes}
    if subject.groups:
        spec["groups"] = list(subject.groups)
    if subject.uid:
        spec["uid"] = subject.uid
    if subject.extra:
        spec["extra"] = {k: list(v) for k, v in subject.extra.items()}
    return spec

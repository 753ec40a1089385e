"""The Agent author's rights, asked of the API server: what the pod-shaping fields need
(``sessionops.policy.podaccess``) as SubjectAccessReviews for the requester, all at once.
Safe to repeat: reviews write nothing."""

from __future__ import annotations

import asyncio
from typing import Any

from sessionops.admission.errors import FORBIDDEN, Rejection
from sessionops.platform.kube import Kube
from sessionops.policy import podaccess


async def check_needs(kube: Kube, needs: list[podaccess.Need], subject: Any, namespace: str) -> None:
    """Every permission the fields need, asked for ``subject``; all refusals named, the first field first."""
    answers = await asyncio.gather(*(kube.access_review(n.review_spec(subject, namespace)) for n in needs))
    refused = [f"{n.field}: {n.refusal(subject, namespace, reason)}"
               for n, (ok, reason) in zip(needs, answers, strict=True) if not ok]
    if refused:
        first, _, message = refused[0].partition(": ")
        raise Rejection(first, "; ".join([message, *refused[1:]]), FORBIDDEN)

"""Before each worker Job: the Agent's pod-shaping fields are still allowed (``sessionops.policy.podaccess``).

Admission checked them for the requester and recorded that identity on the Agent; here the same
checks run again for the recorded author against the current RBAC and the current image
allow-list, so a revoked grant or a narrowed allow-list stops the next segment instead of
running under rights nobody holds any more.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from sessionops.api.agent import AgentSpec
from sessionops.api.config import OperatorConfig
from sessionops.platform.kube import Kube
from sessionops.policy import podaccess

REASON = "WorkerSettingsRefused"


async def refusal(kube: Kube, config: OperatorConfig, agent: dict[str, Any] | None) -> str | None:
    """Why the Agent's worker settings may not be used now ("<field>: <reason>"); None when they may."""
    if agent is None:
        return None
    meta = agent.get("metadata") or {}
    try:
        spec = AgentSpec.model_validate(agent.get("spec") or {})
    except ValidationError:
        return f"agent {meta.get('name')}: its spec is not valid any more"
    for field, reason in podaccess.static_problems(spec.worker, config.worker):
        return f"agent {meta.get('name')}: {field}: {reason}"
    needs = podaccess.needs(spec, config.worker)
    if not needs:
        return None
    author = podaccess.author_of(meta.get("annotations"))
    if author is None:
        return (f"agent {meta.get('name')}: {needs[0].field}: no recorded author (annotation "
                f"{podaccess.AUTHOR_ANNOTATION}); re-apply the Agent so admission can check its author")
    namespace = meta.get("namespace", "")
    for need in needs:
        allowed, reason = await kube.access_review(need.review_spec(author, namespace))
        if not allowed:
            return f"agent {meta.get('name')}: {need.field}: {need.refusal(author, namespace, reason)}"
    return None

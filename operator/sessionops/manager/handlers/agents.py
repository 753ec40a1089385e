"""The Agent controller: Agent events and skill ConfigMap events recompute Agent status;
a configuration change recomputes every Agent (``manager`` wires that). Event-driven only:
nothing polls."""

from __future__ import annotations

from typing import Any

import kopf

from sessionops.manager.runtime import Runtime
from sessionops.readiness.reconcile import SKILL_LABEL, reconcile_agent, reconcile_namespace


async def agent_changed(body: dict[str, Any], type: str | None, memo: Any, **_: Any) -> None:
    rt: Runtime = memo.runtime
    if type != "DELETED":
        await reconcile_agent(rt.kube, rt.config.current, dict(body))


@kopf.on.event("", "v1", "configmaps", labels={SKILL_LABEL: kopf.PRESENT})
async def skill_changed(namespace: str, memo: Any, **_: Any) -> None:
    """A skill appeared or went away: Agents naming it may change readiness."""
    rt: Runtime = memo.runtime
    await reconcile_namespace(rt.kube, rt.config.current, namespace)

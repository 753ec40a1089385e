"""The Agent status adapter: read what readiness depends on, write the status when it changed.
Safe to repeat: the status is recomputed from the objects and an unchanged one is not written
(which also ends the loop of a status write being an Agent event)."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from sessionops.api.agent import AgentSpec
from sessionops.api.config import OperatorConfig
from sessionops.platform.kube import Kube
from sessionops.readiness import agents

SKILL_LABEL = "sessionops.dev/skill"


async def reconcile_agent(kube: Kube, config: OperatorConfig, agent: dict[str, Any]) -> dict[str, Any] | None:
    """Returns the status written, or None when nothing changed."""
    meta = agent["metadata"]
    namespace = meta["namespace"]
    try:
        spec: AgentSpec | None = AgentSpec.model_validate(agent.get("spec") or {})
    except ValueError:
        spec = None  # agents.status reports it
    skills: set[str] = set()
    present: set[str] = set()
    if spec is not None:
        if agents.named_skills(spec):
            skills = {cm["metadata"]["name"] for cm in await kube.configmaps(namespace, SKILL_LABEL)}
        names = sorted({ref.name for ref in agents.secret_refs(spec, config)})
        found = await asyncio.gather(*(kube.secret_exists(namespace, n) for n in names))
        present = {n for n, ok in zip(names, found, strict=True) if ok}
    wanted = agents.status(agent, config, skills=skills, secrets=present, now=datetime.datetime.now(datetime.UTC))
    current = agent.get("status") or {}
    if all(current.get(k) == v for k, v in wanted.items()):
        return None
    await kube.patch_status("agents", namespace, meta["name"], {"status": wanted})
    return wanted


async def reconcile_namespace(kube: Kube, config: OperatorConfig, namespace: str | None = None) -> None:
    """Every Agent of a namespace (all namespaces when None): a skill or the config changed."""
    for agent in await kube.list_agents(namespace):
        await reconcile_agent(kube, config, agent)

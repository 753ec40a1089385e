"""Manifests as users write them (the e2e tests apply these with kubectl)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

API = "sessionops.dev/v1alpha1"
PARENT_RUN = "sessionops.dev/parent-run"


def agent(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Agent", "metadata": {"name": name},
            "spec": {"systemPrompt": "You are a careful assistant.", **spec}}


def session(name: str, agent_name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "AgentSession", "metadata": {"name": name},
            "spec": {"agentRef": {"name": agent_name}, **spec}}


def message(name: str, session_name: str, text: str = "hello", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "AgentInput", "metadata": {"name": name},
            "spec": {"sessionRef": {"name": session_name}, "messages": [{"content": text}], **spec}}


def resume(name: str, session_name: str, run: str, waitpoint: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "AgentInput", "metadata": {"name": name},
            "spec": {"sessionRef": {"name": session_name}, "kind": "Resume", "run": run,
                     "waitpointId": waitpoint, **spec}}


def cont(name: str, session_name: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "AgentInput", "metadata": {"name": name},
            "spec": {"sessionRef": {"name": session_name}, "kind": "Continue"}}


def phase(*phases: str) -> Callable[[dict[str, Any]], bool]:
    """A ``wait_for`` predicate: the object's status.phase is one of ``phases``."""
    return lambda obj: (obj.get("status") or {}).get("phase") in phases


async def start_turn(stack: Any, name: str, model: str, text: str = "go", **agent_spec: Any) -> None:
    """An Agent, a session on ``model`` and one follow-up, all named after ``name``."""
    await stack.apply(agent(name, **agent_spec))
    await stack.apply(session(name, name, model=model))
    await stack.apply(message(f"{name}-1", name, text, delivery="FollowUp"))


async def listed(stack: Any, kind: str, selector: str) -> list[dict[str, Any]]:
    """``kubectl get KIND -l SELECTOR``: the objects."""
    out = await stack.kubectl("get", kind, "-l", selector, "-o", "json")
    return json.loads(out.stdout)["items"]


async def children_of(stack: Any, run: str) -> list[dict[str, Any]]:
    """The child sessions a run's delegate calls made."""
    return await listed(stack, "asess", f"{PARENT_RUN}={run}")

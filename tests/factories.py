"""Builders of realistic objects for tests (plain dicts, as the API server stores them)."""

from __future__ import annotations

from typing import Any

from sessionops.api.config import OperatorConfig

NS = "team-a"


def config(default_model: str = "replay/hello", models: tuple[str, ...] = ("replay/hello", "replay/steer"),
           **defaults: Any) -> OperatorConfig:
    return OperatorConfig.model_validate({
        "defaults": {"model": default_model, **defaults},
        "models": [{"name": m, "provider": "replay", "model": m.split("/")[-1],
                    "endpoint": "http://127.0.0.1:8089/v1"} for m in models],
    })


def agent(name: str = "helper", uid: str = "agent-uid-1", generation: int = 1, **spec: Any) -> dict[str, Any]:
    body = {"systemPrompt": "You are helpful.", **spec}
    return {"apiVersion": "sessionops.dev/v1alpha1", "kind": "Agent",
            "metadata": {"name": name, "namespace": NS, "uid": uid, "generation": generation},
            "spec": body}


def session(name: str = "s1", agent_name: str = "helper", *, snapshot: dict | None = None,
            status: dict | None = None, rv: str = "10", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"agentRef": {"name": agent_name}, **spec}
    if snapshot is not None:
        body["contextSnapshot"] = snapshot
    return {"apiVersion": "sessionops.dev/v1alpha1", "kind": "AgentSession",
            "metadata": {"name": name, "namespace": NS, "uid": f"{name}-uid", "resourceVersion": rv},
            "spec": body, "status": status or {}}


def run(name: str = "s1-t1", session_name: str = "s1", *, phase: str | None = "Running",
        snapshot: dict | None = None, waitpoint: dict | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if waitpoint:
        status["waitpoint"] = waitpoint
    return {"apiVersion": "sessionops.dev/v1alpha1", "kind": "AgentRun",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"sessionRef": {"name": session_name}, "inputs": ["i1"], "contextSnapshot": snapshot or {}},
            "status": status}

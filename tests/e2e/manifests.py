"""Manifests as users write them (the e2e tests apply these with kubectl)."""

from __future__ import annotations

from typing import Any

API = "sessionops.dev/v1alpha1"


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

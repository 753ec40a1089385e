"""The API types of sessionops: pydantic models that are the single source of truth
for the CRD schemas (``python -m sessionops.api.crds``) and for the operator config.

Pure data and pure validation only: no Kubernetes, PostgreSQL or network I/O here.

The names below are resolved on first use, not when the package is imported: building a model
class is most of a module's import, and a process loads only the modules it uses (a worker
never needs ``Agent`` or ``AgentSession``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessionops.api.agent import Agent, AgentSpec
    from sessionops.api.common import Condition, ObjectRef
    from sessionops.api.config import ModelEntry, OperatorConfig
    from sessionops.api.input import AgentInput, AgentInputSpec, AgentInputStatus
    from sessionops.api.run import AgentRun, AgentRunSpec, AgentRunStatus
    from sessionops.api.session import AgentSession, AgentSessionSpec, AgentSessionStatus
    from sessionops.api.snapshot import ContextSnapshot

_HOMES = {
    "Agent": "agent", "AgentSpec": "agent", "Condition": "common", "ObjectRef": "common",
    "ModelEntry": "config", "OperatorConfig": "config",
    "AgentInput": "input", "AgentInputSpec": "input", "AgentInputStatus": "input",
    "AgentRun": "run", "AgentRunSpec": "run", "AgentRunStatus": "run",
    "AgentSession": "session", "AgentSessionSpec": "session", "AgentSessionStatus": "session",
    "ContextSnapshot": "snapshot",
}

__all__ = [
    "Agent", "AgentInput", "AgentInputSpec", "AgentInputStatus", "AgentRun", "AgentRunSpec", "AgentRunStatus",
    "AgentSession", "AgentSessionSpec", "AgentSessionStatus", "AgentSpec", "Condition", "ContextSnapshot",
    "ModelEntry", "ObjectRef", "OperatorConfig",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)

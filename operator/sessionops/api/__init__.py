"""The API types of sessionops: pydantic models that are the single source of truth
for the CRD schemas (``python -m sessionops.api.crds``) and for the operator config.

Pure data and pure validation only: no Kubernetes, PostgreSQL or network I/O here.
"""

from sessionops.api.agent import Agent, AgentSpec
from sessionops.api.common import Condition, ObjectRef
from sessionops.api.config import ModelEntry, OperatorConfig
from sessionops.api.input import AgentInput, AgentInputSpec, AgentInputStatus
from sessionops.api.run import AgentRun, AgentRunSpec, AgentRunStatus
from sessionops.api.session import AgentSession, AgentSessionSpec, AgentSessionStatus
from sessionops.api.snapshot import ContextSnapshot

__all__ = [
    "Agent", "AgentSpec", "AgentInput", "AgentInputSpec", "AgentInputStatus", "AgentRun",
    "AgentRunSpec", "AgentRunStatus", "AgentSession", "AgentSessionSpec", "AgentSessionStatus",
    "Condition", "ContextSnapshot", "ModelEntry", "ObjectRef", "OperatorConfig",
]

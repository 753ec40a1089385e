"""Building the agent graph of a turn from its frozen ``ContextSnapshot``.

What belongs here: the built-in tools, the middleware (per-call approval, steering,
tool access, limits), the graph builder on top of langchain's ``create_agent``, and
the translation between pending interrupts and ``Waitpoint`` / resume commands.

No Kubernetes or database I/O here (the ``agent`` import contract): everything that needs the
cluster (steer inputs, skill ConfigMaps, authorization, delegation) comes in as plain callables
or mappings from the worker, and the checkpointer is handed in by the caller.
"""

from sessionops.agent.builder import AgentNodes, SessionState, build_agent, compile_agent, node_names
from sessionops.agent.waitpoints import (
    ResumeError,
    ResumeInvalid,
    build_resume,
    pending_interrupts,
    validate_resume,
    waitpoint_from_interrupts,
    waitpoint_from_state,
)

__all__ = [
    "AgentNodes",
    "SessionState",
    "ResumeError",
    "ResumeInvalid",
    "build_agent",
    "build_resume",
    "compile_agent",
    "node_names",
    "pending_interrupts",
    "validate_resume",
    "waitpoint_from_interrupts",
    "waitpoint_from_state",
]

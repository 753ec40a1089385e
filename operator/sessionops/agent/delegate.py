"""The ``delegate`` tool: hand a task to a child session and wait for its turn.

``delegate(message, name, agent=None)``. The tool asks ``dispatch`` (the worker's, which
creates the child session and its input in Kubernetes, or refuses) for the child, then
waits with an interrupt of kind ``Delegation``: the segment ends, the parent holds no pod,
and the operator resumes the thread when the child's turn ended or a deadline passed, with
the child's outcome as the interrupt's value.

Resuming (or retrying) re-runs the tool from its start, so ``dispatch`` must be
idempotent: the child's name derives from the run and the tool call id, and a repeated
call finds the child it made before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.types import interrupt

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

Dispatch = Callable[[str, str, str, str | None], str]
"""``dispatch(tool_call_id, name, message, agent) -> child session name``; raises
``ToolException`` when the child may not be made (the model reads why)."""


def delegation_payload(tool_call_id: str, name: str, child: str) -> dict[str, Any]:
    """The interrupt payload (read back by ``waitpoints``)."""
    return {"kind": "Delegation", "toolCallId": tool_call_id, "name": name, "children": [child]}


def result_text(name: str, value: Mapping[str, Any]) -> str:
    """The tool result for the child's outcome; an outcome without an answer is an error result."""
    phase = value.get("phase")
    where = f"child {name!r} (session {value.get('session')})"
    if value.get("deadlinePassed"):
        raise ToolException(f"delegate: {where} did not finish before the deadline (it was {phase}); "
                            "it was cancelled and its result will not come")
    if phase == "Succeeded":
        return str(value.get("text") or "")
    detail = f": {value['message']}" if value.get("message") else ""
    raise ToolException(f"delegate: {where} ended {phase}{detail}")


def delegate_tool(dispatch: Dispatch) -> BaseTool:
    def delegate(message: str, name: str, runtime: ToolRuntime, agent: str | None = None) -> str:
        """Hand a task to a child agent and wait for its answer.

        `message` is the task, `name` names the child (1 to 64 letters, digits, '_' or '-').
        Without `agent` the child runs with your own configuration; with `agent` it runs that
        Agent. Calls in one message run in parallel.
        """
        if not NAME_PATTERN.match(name or ""):
            raise ToolException("delegate: name must be 1 to 64 characters of letters, digits, '_' or '-'")
        if not (message or "").strip():
            raise ToolException("delegate: message must not be empty")
        child = dispatch(runtime.tool_call_id, name, message, agent or None)
        value = interrupt(delegation_payload(runtime.tool_call_id, name, child))
        return result_text(name, value if isinstance(value, Mapping) else {})

    return StructuredTool.from_function(delegate, handle_tool_error=True)

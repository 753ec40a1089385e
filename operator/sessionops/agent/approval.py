"""Per-call approval: a tool-call middleware that pauses one call inside its own task.

langchain's ``create_agent`` runs every pending tool call as its own ``Send`` task, so an
``interrupt()`` here pauses only this call: sibling calls that need no approval run and
persist their results while this one waits (the stock ``HumanInTheLoopMiddleware``
pauses the whole batch in ``after_model``, before any tool runs, and does not fit).

Resuming re-runs the task from its start: the interrupt returns the decision, and an
approved call runs exactly the pending call (the same ``tool_call``; no model call).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal, TypedDict

from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, interrupt

DecisionName = Literal["Approve", "Reject"]
ALLOWED_DECISIONS: list[str] = ["Approve", "Reject"]


class ApprovalRequest(TypedDict):
    """Interrupt payload of one call waiting for a decision (read back by ``waitpoints``)."""

    kind: Literal["Approval"]
    callId: str
    toolCallId: str
    tool: str
    args: dict[str, Any]
    allowedDecisions: list[str]


class ApprovalDecision(TypedDict, total=False):
    """Resume value of one approval interrupt."""

    decision: DecisionName
    message: str | None


def call_id(ai_message_id: str | None, tool_call_id: str) -> str:
    """Deterministic ``callId`` of a pending call: bound to its AI message and tool call."""
    digest = hashlib.sha256(f"{ai_message_id or ''}\x00{tool_call_id}".encode()).hexdigest()[:16]
    return f"call-{digest}"


def rejection_message(message: str | None) -> str:
    return f"rejected by the user: {message}" if message else "rejected by the user"


def _owning_ai_message_id(state: Any, tool_call_id: str) -> str | None:
    messages = state.get("messages", []) if isinstance(state, Mapping) else getattr(state, "messages", [])
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(c.get("id") == tool_call_id for c in message.tool_calls):
            return message.id
    return None


class ApprovalMiddleware(AgentMiddleware):
    """Pauses calls of the tools in ``require`` for a decision, unless disabled (AlwaysTrust)."""

    def __init__(self, require: Iterable[str], *, enabled: bool = True) -> None:
        super().__init__()
        self.require = frozenset(require)
        self.enabled = enabled

    @property
    def name(self) -> str:
        return "approval"

    def _request(self, request: ToolCallRequest) -> ApprovalRequest | None:
        call = request.tool_call
        if not self.enabled or call["name"] not in self.require:
            return None
        return ApprovalRequest(
            kind="Approval", callId=call_id(_owning_ai_message_id(request.state, call["id"]), call["id"]),
            toolCallId=call["id"], tool=call["name"], args=dict(call.get("args") or {}),
            allowedDecisions=list(ALLOWED_DECISIONS),
        )

    @staticmethod
    def _decide(request: ToolCallRequest, payload: ApprovalRequest) -> ToolMessage | None:
        """None to run the call; else the error result told to the model."""
        # interrupt() raises GraphInterrupt (a GraphBubbleUp) the first time: nothing here
        # catches it, so the pause reaches the graph. On resume it returns the decision.
        value = interrupt(payload)
        decision = value.get("decision") if isinstance(value, Mapping) else None
        if decision == "Approve":
            return None
        if decision == "Reject":
            return ToolMessage(content=rejection_message(value.get("message")), status="error",
                               tool_call_id=request.tool_call["id"], name=request.tool_call["name"])
        # build_resume validates decisions first: a malformed value here is a bug, not user input.
        raise ValueError(f"invalid approval decision for call {payload['callId']}: {value!r}")

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        if (payload := self._request(request)) is None:
            return handler(request)
        rejection = self._decide(request, payload)
        return handler(request) if rejection is None else rejection

    async def awrap_tool_call(
        self, request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        if (payload := self._request(request)) is None:
            return await handler(request)
        rejection = self._decide(request, payload)
        return await handler(request) if rejection is None else rejection

"""Tool access re-resolved at execution time: a caller-supplied ``tool_filter``.

Authorization is never frozen into the snapshot: the worker decides per tool name,
now, whether the input's sender may use it (SubjectAccessReviews). A refused tool is
hidden from every model call and refused at the call boundary, also when the call was
requested before the revocation (a call resumed after an approval is re-checked). The
filter is asked once per model call for the whole tool list, so its answers can be
fetched together rather than one name after another.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

ToolFilter = Callable[[Sequence[str]], Collection[str]]
"""The names, among these, of the tools that may be used now. Exceptions propagate (the turn
fails and is retried) rather than silently hiding a tool because an API call failed."""


def refusal_message(tool: str) -> str:
    return f"tool {tool!r} is not available: access to it was revoked or never granted"


class ToolAccessMiddleware(AgentMiddleware):
    def __init__(self, tool_filter: ToolFilter | None = None) -> None:
        super().__init__()
        self.tool_filter = tool_filter

    @property
    def name(self) -> str:
        return "tool_access"

    def _allowed(self, tool: str) -> bool:
        return self.tool_filter is None or tool in self.tool_filter([tool])

    def _visible(self, request: ModelRequest) -> ModelRequest:
        if self.tool_filter is None:
            return request
        # Provider-side tools (dicts) are not ours to authorize.
        allowed = self.tool_filter([t.name for t in request.tools if not isinstance(t, dict)])
        tools = [t for t in request.tools if isinstance(t, dict) or t.name in allowed]
        return request.override(tools=tools)

    def _refusal(self, request: ToolCallRequest) -> ToolMessage | None:
        name = request.tool_call["name"]
        if self._allowed(name):
            return None
        return ToolMessage(content=refusal_message(name), status="error",
                           tool_call_id=request.tool_call["id"], name=name)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        return handler(self._visible(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> Any:
        return await handler(self._visible(request))

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        refusal = self._refusal(request)
        return handler(request) if refusal is None else refusal

    async def awrap_tool_call(
        self, request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        refusal = self._refusal(request)
        return await handler(request) if refusal is None else refusal

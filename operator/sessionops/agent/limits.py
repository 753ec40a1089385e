"""Bounds of a turn: model calls per turn, and the size of tool results.

Why not langchain's ``ModelCallLimitMiddleware``: (1) its run counter is an
``UntrackedValue``, never checkpointed, so it restarts at 0 in every segment (each
Resume or Retry Job is a new invocation) and ``maxExecutionSteps`` would bound a
segment, not the turn; (2) it counts in ``after_model``, which steering's jump back to
the model would skip. Here the count is written by the model node itself, in the same
write as the AI message, and is reset only when a new turn starts (``before_agent``
runs only for new input, never on resume or retry).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
    hook_config,
)
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

CHARS_PER_TOKEN = 4


class StepLimitState(AgentState):
    turn_model_calls: NotRequired[Annotated[int, PrivateStateAttr]]


def step_limit_message(limit: int) -> str:
    return f"Stopped: this turn reached its limit of {limit} model calls (maxExecutionSteps)."


class StepLimitMiddleware(AgentMiddleware):
    state_schema = StepLimitState

    def __init__(self, max_steps: int) -> None:
        super().__init__()
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.max_steps = max_steps

    @property
    def name(self) -> str:
        return "step_limit"

    def before_agent(self, state: StepLimitState, runtime: Any) -> dict[str, Any] | None:
        return {"turn_model_calls": 0}

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: StepLimitState, runtime: Any) -> dict[str, Any] | None:
        if state.get("turn_model_calls", 0) < self.max_steps:
            return None
        return {"jump_to": "end", "messages": [AIMessage(content=step_limit_message(self.max_steps))]}

    @staticmethod
    def _counted(request: ModelRequest, response: Any) -> ExtendedModelResponse:
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        count = request.state.get("turn_model_calls", 0) + 1
        return ExtendedModelResponse(model_response=response, command=Command(update={"turn_model_calls": count}))

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        return self._counted(request, handler(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> Any:
        return self._counted(request, await handler(request))


def truncate_text(text: str, token_limit: int) -> str:
    limit = token_limit * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... truncated: {len(text) - limit} more characters (toolResultTokenLimit) ...]"


class ToolResultLimitMiddleware(AgentMiddleware):
    """Truncates tool results longer than ``token_limit`` tokens (about 4 characters each)."""

    def __init__(self, token_limit: int) -> None:
        super().__init__()
        self.token_limit = token_limit

    @property
    def name(self) -> str:
        return "tool_result_limit"

    def _bounded_message(self, message: Any) -> Any:
        if isinstance(message, ToolMessage) and isinstance(message.content, str):
            text = truncate_text(message.content, self.token_limit)
            if text is not message.content:
                return message.model_copy(update={"content": text})
        return message

    def _bounded(self, result: ToolMessage | Command[Any]) -> ToolMessage | Command[Any]:
        if isinstance(result, Command) and isinstance(result.update, dict) and "messages" in result.update:
            update = {**result.update, "messages": [self._bounded_message(m) for m in result.update["messages"]]}
            return dataclasses.replace(result, update=update)
        return self._bounded_message(result)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        return self._bounded(handler(request))

    async def awrap_tool_call(
        self, request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        return self._bounded(await handler(request))

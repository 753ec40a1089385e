"""Small helpers shared by the agent and cancellation tests."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph.state import CompiledStateGraph

from sessionops.api.snapshot import ContextSnapshot


def snapshot(**overrides: Any) -> ContextSnapshot:
    values: dict[str, Any] = {"system_prompt": "You are a test agent.", "model": "scripted",
                              "approval_mode": "Default"}
    values.update(overrides)
    return ContextSnapshot(**values)


def thread(thread_id: str = "session-uid-1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def say(graph: CompiledStateGraph, text: str, config: dict[str, Any]) -> dict[str, Any]:
    """A new turn (Start segment)."""
    return graph.invoke({"messages": [HumanMessage(text)]}, config, durability="sync")


def resume(graph: CompiledStateGraph, command: Any, config: dict[str, Any]) -> dict[str, Any]:
    """A Resume segment."""
    return graph.invoke(command, config, durability="sync")


def messages(graph: CompiledStateGraph, config: dict[str, Any]) -> list[BaseMessage]:
    return list(graph.get_state(config).values.get("messages", []))


def tool_results(msgs: list[BaseMessage]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in msgs if isinstance(m, ToolMessage)}


def last_ai_text(msgs: list[BaseMessage]) -> str:
    return next(str(m.content) for m in reversed(msgs) if isinstance(m, AIMessage))

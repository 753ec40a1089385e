"""A deterministic chat model for graph tests, strict about history like a real provider.

The response is chosen by the number of AI messages already in the input, so a retried
or resumed call gets the same answer; tool call ids and AI message ids are derived from
that number. Every request's history is checked: each tool call answered exactly once,
results directly after their call, no orphan results (the checks of a strict provider
and of ``sessionops.replay``). A violation raises ``HistoryInvalid``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

Step = str | list[tuple[str, dict[str, Any]]] | Callable[[list[BaseMessage]], AIMessage]
"""Final text, or tool calls ``[(name, args), ...]``, or a function of the history."""


class HistoryInvalid(AssertionError):
    pass


def check_history(messages: Sequence[BaseMessage]) -> None:
    """Raises HistoryInvalid at the first violation a strict provider would reject."""
    open_calls: dict[str, None] = {}
    owner: dict[str, int] = {}
    answered: set[str] = set()
    for i, m in enumerate(messages):
        if isinstance(m, SystemMessage):
            continue
        if isinstance(m, ToolMessage):
            tid = m.tool_call_id
            if tid in open_calls:
                del open_calls[tid]
                answered.add(tid)
            elif tid in answered:
                raise HistoryInvalid(f"messages[{i}]: duplicate result for tool call {tid!r}")
            elif tid in owner:
                raise HistoryInvalid(f"messages[{i}]: result for {tid!r} does not directly follow its call")
            else:
                raise HistoryInvalid(f"messages[{i}]: orphan tool result {tid!r}")
            continue
        if open_calls:
            raise HistoryInvalid(f"messages[{i}]: tool calls without results before it: {list(open_calls)}")
        if isinstance(m, AIMessage):
            for call in m.tool_calls:
                if call["id"] in owner:
                    raise HistoryInvalid(f"messages[{i}]: duplicate tool call id {call['id']!r}")
                owner[call["id"]] = i
                open_calls[call["id"]] = None
        elif not isinstance(m, HumanMessage):
            raise HistoryInvalid(f"messages[{i}]: unexpected message type {type(m).__name__}")
    if open_calls:
        raise HistoryInvalid(f"tool calls without results at the end: {list(open_calls)}")


def tool_call_id(step: int, index: int) -> str:
    return f"call_{step}_{index}"


class ScriptedChatModel(BaseChatModel):
    script: list[Any] = Field(default_factory=list)
    default: str = "done"
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[list[str]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        self.bound_tools.append([getattr(t, "name", None) or t.get("name") for t in tools])
        return self

    @property
    def model_calls(self) -> int:
        """Agent model calls (summary requests excluded)."""
        return sum(1 for c in self.calls if not _is_summary_request(c))

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(list(messages))
        if _is_summary_request(messages):
            return _result(AIMessage(content="SUMMARY", id="summary"))
        check_history(messages)
        n = sum(1 for m in messages if isinstance(m, AIMessage))
        step = self.script[n] if n < len(self.script) else self.default
        if callable(step):
            message = step(list(messages))
        elif isinstance(step, str):
            message = AIMessage(content=step)
        else:
            message = AIMessage(content="", tool_calls=[
                {"name": name, "args": args, "id": tool_call_id(n, i), "type": "tool_call"}
                for i, (name, args) in enumerate(step)
            ])
        if message.id is None:
            message.id = f"ai-{n}"
        return _result(message)


def _is_summary_request(messages: Sequence[BaseMessage]) -> bool:
    return len(messages) == 1 and "Messages to summarize" in str(messages[0].content)


def _result(message: AIMessage) -> ChatResult:
    return ChatResult(generations=[ChatGeneration(message=message)])

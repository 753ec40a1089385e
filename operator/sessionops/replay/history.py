"""Strict history validation, as a strict provider (OpenAI, Anthropic) applies it.

A conversation sent to the model must pair every tool call with exactly one result:
after an assistant message with `tool_calls`, one `tool` message per call id must
follow before the next `user` or `assistant` message. System (and developer)
messages may appear anywhere. The first violation is reported with the index of the
message at fault, so a bug in the agent's state handling (a lost or duplicated tool
result after a cancellation or a resume) fails loudly instead of being replayed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ROLES = ("system", "developer", "user", "assistant", "tool")


class HistoryError(ValueError):
    """An invalid history; `index` is the message at fault, `param` its OpenAI-style path."""

    def __init__(self, index: int | None, message: str) -> None:
        self.index = index
        self.param = "messages" if index is None else f"messages[{index}]"
        super().__init__(f"{self.param}: {message}")


def validate_history(messages: Any) -> None:
    """Raises HistoryError for the first violation; returns None for a valid history."""
    if not isinstance(messages, list) or not messages:
        raise HistoryError(None, "must be a non-empty list of messages")

    pending: dict[str, None] = {}  # ordered: unanswered calls of the open assistant message
    open_assistant: int | None = None  # the assistant message whose results are being read
    call_owner: dict[str, int] = {}  # every tool call id seen -> its assistant message index
    answered_by: dict[str, int] = {}  # tool call id -> index of its tool message

    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise HistoryError(i, f"must be an object, got {type(message).__name__}")
        role = message.get("role")
        if role not in ROLES:
            raise HistoryError(i, f"invalid role {role!r}; expected one of {', '.join(ROLES)}")

        if role in ("system", "developer"):
            _check_content(i, message, required=True)
            continue

        if role == "tool":
            _check_content(i, message, required=True)
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise HistoryError(i, "a tool message needs a non-empty 'tool_call_id'")
            if call_id in pending:
                del pending[call_id]
                answered_by[call_id] = i
            elif call_id in answered_by:
                raise HistoryError(
                    i,
                    f"duplicate result for tool call {call_id!r} "
                    f"(already answered by messages[{answered_by[call_id]}])",
                )
            elif call_id in call_owner:
                raise HistoryError(
                    i,
                    f"tool message for call {call_id!r} of messages[{call_owner[call_id]}] "
                    "must directly follow that assistant message",
                )
            else:
                raise HistoryError(
                    i,
                    f"orphan tool message: no preceding assistant message has a tool call with id {call_id!r}",
                )
            continue

        # user or assistant: the open assistant message's calls must all be answered.
        if pending:
            raise HistoryError(
                open_assistant,
                "an assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id' before the next "
                f"{role} message (messages[{i}]); missing results for: {', '.join(pending)}",
            )
        open_assistant = None
        if role == "user":
            _check_content(i, message, required=True)
            continue

        tool_calls = message.get("tool_calls")
        _check_content(i, message, required=tool_calls is None)
        if tool_calls is None:
            continue
        if not isinstance(tool_calls, list) or not tool_calls:
            raise HistoryError(i, "'tool_calls' must be a non-empty list when present")
        for j, call in enumerate(tool_calls):
            call_id = _check_tool_call(i, j, call)
            if call_id in call_owner:
                raise HistoryError(
                    i,
                    f"tool_calls[{j}]: duplicate tool call id {call_id!r} "
                    f"(also used in messages[{call_owner[call_id]}])",
                )
            call_owner[call_id] = i
            pending[call_id] = None
        open_assistant = i

    if pending:
        raise HistoryError(
            open_assistant,
            "an assistant message with 'tool_calls' must be followed by tool messages "
            f"responding to each 'tool_call_id'; missing results for: {', '.join(pending)}",
        )


def _check_content(i: int, message: dict[str, Any], *, required: bool) -> None:
    content = message.get("content")
    if content is None:
        if required:
            raise HistoryError(i, f"a {message['role']} message needs 'content'")
        return
    if isinstance(content, str):
        return
    if isinstance(content, list) and all(isinstance(part, dict) and "type" in part for part in content):
        return
    raise HistoryError(i, "'content' must be a string or a list of typed content parts")


def _check_tool_call(i: int, j: int, call: Any) -> str:
    where = f"tool_calls[{j}]"
    if not isinstance(call, dict):
        raise HistoryError(i, f"{where} must be an object")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise HistoryError(i, f"{where} needs a non-empty 'id'")
    if call.get("type", "function") != "function":
        raise HistoryError(i, f"{where}: unsupported type {call.get('type')!r}")
    function = call.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise HistoryError(i, f"{where} needs 'function.name'")
    if not isinstance(function.get("arguments"), str):
        raise HistoryError(i, f"{where}: 'function.arguments' must be a JSON string")
    return call_id


def count_assistant_messages(messages: Sequence[dict[str, Any]]) -> int:
    """The response index for a history: how many assistant turns it already holds."""
    return sum(1 for message in messages if message.get("role") == "assistant")

"""Strict history validation: what a strict provider accepts and rejects."""

from __future__ import annotations

import pytest

from sessionops.replay import HistoryError, validate_history


def user(text: str = "hi") -> dict:
    return {"role": "user", "content": text}


def system(text: str = "be brief") -> dict:
    return {"role": "system", "content": text}


def assistant(*call_ids: str, content: str | None = None) -> dict:
    message: dict = {"role": "assistant", "content": content}
    if call_ids:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
            for cid in call_ids
        ]
    return message


def tool(call_id: str, text: str = "ok") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


VALID = {
    "a single user message": [user()],
    "a text answer and a follow-up": [system(), user(), assistant(content="hello"), user("more")],
    "one call answered": [user(), assistant("a"), tool("a"), assistant(content="done")],
    "parallel calls answered in any order": [
        user(),
        assistant("a", "b", "c"),
        tool("c"),
        tool("a"),
        tool("b"),
    ],
    "a system message between tool results": [user(), assistant("a", "b"), tool("a"), system(), tool("b")],
    "a user message after all results": [
        user(),
        assistant("a"),
        tool("a"),
        user("steer"),
        assistant(content="ok"),
    ],
    "content parts instead of a string": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    "an assistant message with content and calls": [user(), assistant("a", content="looking"), tool("a")],
}


@pytest.mark.parametrize("history", VALID.values(), ids=VALID.keys())
def test_valid_history_is_accepted(history: list[dict]) -> None:
    validate_history(history)


INVALID = {
    "a missing tool result before the next assistant message": (
        [user(), assistant("a", "b"), tool("a"), assistant(content="done")],
        1,
        "missing results for: b",
    ),
    "a missing tool result at the end": (
        [user(), assistant("a", "b"), tool("b")],
        1,
        "missing results for: a",
    ),
    "a user message between tool results": (
        [user(), assistant("a", "b"), tool("a"), user("steer"), tool("b")],
        1,
        "before the next user message",
    ),
    "a duplicate tool result": ([user(), assistant("a"), tool("a"), tool("a")], 3, "duplicate result"),
    "a duplicate result after the next turn": (
        [user(), assistant("a"), tool("a"), assistant("b"), tool("b"), tool("a")],
        5,
        "duplicate result",
    ),
    "an orphan tool message": ([user(), tool("x")], 1, "orphan tool message"),
    "an orphan tool message after a text answer": ([user(), assistant(content="hi"), tool("x")], 2, "orphan"),
    "a duplicate tool call id": (
        [user(), assistant("a"), tool("a"), assistant("a"), tool("a")],
        3,
        "duplicate tool call id 'a'",
    ),
    "an unknown role": ([user(), {"role": "robot", "content": "beep"}], 1, "invalid role 'robot'"),
    "a tool message without tool_call_id": (
        [user(), assistant("a"), {"role": "tool", "content": "x"}],
        2,
        "tool_call_id",
    ),
    "an assistant message with neither content nor calls": (
        [user(), {"role": "assistant"}],
        1,
        "needs 'content'",
    ),
    "an empty tool_calls list": (
        [user(), {"role": "assistant", "content": "x", "tool_calls": []}],
        1,
        "non-empty",
    ),
    "arguments that are not a string": (
        [
            user(),
            {
                "role": "assistant",
                "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": {}}}],
            },
        ],
        1,
        "JSON string",
    ),
}


@pytest.mark.parametrize(("history", "index", "reason"), INVALID.values(), ids=INVALID.keys())
def test_invalid_history_is_rejected_naming_the_message(history: list[dict], index: int, reason: str) -> None:
    with pytest.raises(HistoryError) as caught:
        validate_history(history)
    assert caught.value.index == index
    assert str(caught.value).startswith(f"messages[{index}]: ")
    assert reason in str(caught.value)


@pytest.mark.parametrize("messages", [[], None, "hi", {"role": "user"}])
def test_messages_must_be_a_non_empty_list(messages: object) -> None:
    with pytest.raises(HistoryError, match="non-empty list"):
        validate_history(messages)

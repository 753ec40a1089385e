"""OpenAI chat-completions payloads for a scenario response (pure functions, no I/O).

Everything a client can observe is derived from the scenario, the response index and
the request, never from a clock or a random source (except `created`), so a retried
request gets a byte-identical answer apart from that timestamp:

0. the conversation is the scenario's main line or its first branch whose `match`
   occurs in the request's first user message (`select_conversation`); its label is
   the scenario name, or `<scenario>.b<branch index>` for a branch; for a scenario
   with `turns`, the turn script chosen by the latest user message, labelled
   `<scenario>.t<turn index>` (`select_answer`);
1. tool call ids are `call_<label>_<index>_<position>`, where `index` counts every
   assistant message of the history (unique across turns, as strict providers require);
2. the completion id is a hash of the label, the index and the request's messages;
3. token counts are estimated as ceil(characters / 4) per text (see `usage`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from sessionops.replay.history import count_assistant_messages
from sessionops.replay.scenarios import Response, Scenario

# Placeholders of turn scripts (see `scenarios`), replaced from the request's history.
MESSAGE_PLACEHOLDER = "{{message}}"
TOOL_RESULT_PLACEHOLDER = "{{tool_result}}"

SYSTEM_FINGERPRINT = "sessionops-replay"
# Streamed argument pieces are this long, so clients must accumulate tool call deltas.
ARGUMENT_PIECE = 12


class Conversation(NamedTuple):
    """The responses answering one conversation: a scenario's main line or one branch."""

    label: str  # the scenario name, or `<name>.b<branch>`; used in tool call and completion ids
    branch: int | None  # index into `scenario.branches`, None for the main line
    responses: Sequence[Response]
    fallbackContent: str | None
    turn: int | None = None  # index into `scenario.turns`, for a scenario with turns

    def response(self, index: int) -> Response | None:
        """The response at `index`, the fallback text past the end, or None when exhausted."""
        if index < len(self.responses):
            return self.responses[index]
        if self.fallbackContent is not None:
            return Response(content=self.fallbackContent)
        return None


def _text(content: Any) -> str:
    """A message's text (list content: its text parts joined by newlines)."""
    if isinstance(content, list):
        return "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        )
    return content if isinstance(content, str) else ""


def first_user_message(messages: Sequence[Any]) -> str | None:
    """The text of the first `user` message (list content: text parts joined by newlines)."""
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            return _text(message.get("content"))
    return None


def _latest_user(messages: Sequence[Any]) -> int | None:
    return next(
        (i for i in range(len(messages) - 1, -1, -1)
         if isinstance(messages[i], dict) and messages[i].get("role") == "user"),
        None,
    )


def select_answer(scenario: Scenario, messages: Sequence[Any]) -> tuple[Conversation, int] | None:
    """The conversation answering `messages` and the response index in it.

    Main line or branch: index = assistant messages in the whole history. Turns: the
    first turn whose cue occurs in the latest user message (case-insensitive), index =
    assistant messages after that message; None when no turn matches.
    """
    if not scenario.turns:
        conversation = select_conversation(scenario, first_user_message(messages))
        return conversation, count_assistant_messages(messages)
    latest = _latest_user(messages)
    text = "" if latest is None else _text(messages[latest]["content"]).lower()
    for i, turn in enumerate(scenario.turns):
        if turn.cue is None or turn.cue.lower() in text:
            conversation = Conversation(f"{scenario.name}.t{i}", None, turn.responses, turn.fallbackContent, i)
            return conversation, count_assistant_messages(messages[0 if latest is None else latest + 1 :])
    return None


def render_turn(response: Response, messages: Sequence[Any]) -> Response:
    """A turn script's response with its placeholders replaced from the history."""
    latest = _latest_user(messages)
    message = "" if latest is None else _text(messages[latest]["content"])
    results: list[str] = []
    for m in reversed(messages):  # the tool results answering the previous response
        if not (isinstance(m, dict) and m.get("role") == "tool"):
            break
        results.insert(0, _text(m.get("content")))
    values = {MESSAGE_PLACEHOLDER: message, TOOL_RESULT_PLACEHOLDER: "\n".join(results)}

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            for placeholder, text in values.items():
                value = value.replace(placeholder, text)
            return value
        if isinstance(value, list):
            return [fill(v) for v in value]
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value

    return response.model_copy(update={
        "content": fill(response.content),
        "toolCalls": [call.model_copy(update={"args": fill(call.args)}) for call in response.toolCalls],
    })


def select_conversation(scenario: Scenario, first_user_text: str | None) -> Conversation:
    """The first branch whose `match` occurs in `first_user_text`, else the main line."""
    if first_user_text is not None:
        for i, branch in enumerate(scenario.branches):
            if branch.match in first_user_text:
                return Conversation(f"{scenario.name}.b{i}", i, branch.responses, branch.fallbackContent)
    return Conversation(scenario.name, None, scenario.responses, scenario.fallbackContent)


def select_response(scenario: Scenario, index: int, *, first_user_text: str | None = None) -> Response | None:
    """The response at `index` of the conversation `first_user_text` selects (see above)."""
    return select_conversation(scenario, first_user_text).response(index)


def tool_call_id(scenario: str, index: int, position: int) -> str:
    return f"call_{scenario}_{index}_{position}"


def completion_id(scenario: str, index: int, messages: Sequence[Any]) -> str:
    canonical = json.dumps([scenario, index, messages], sort_keys=True, separators=(",", ":"))
    return "chatcmpl-replay-" + hashlib.sha256(canonical.encode()).hexdigest()[:24]


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def usage(
    response: Response, tool_calls: Sequence[dict[str, Any]], messages: Sequence[Any], tools: Any
) -> dict[str, int]:
    """Deterministic token counts: 4 per message plus ceil(chars / 4) of every text.

    The prompt counts message contents, tool call names and arguments, and the JSON of
    the tool definitions; the completion counts the content and the calls. A scenario's
    `usage` overrides either number.
    """
    prompt = 3
    for message in messages:
        if not isinstance(message, dict):
            continue
        prompt += 4 + estimate_tokens(_content_text(message.get("content")))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            prompt += estimate_tokens(str(function.get("name", "")) + str(function.get("arguments", "")))
    if tools:
        prompt += estimate_tokens(json.dumps(tools, sort_keys=True))
    completion = estimate_tokens(response.content or "") + sum(
        estimate_tokens(call["function"]["name"] + call["function"]["arguments"]) for call in tool_calls
    )
    if response.usage is not None:
        if response.usage.promptTokens is not None:
            prompt = response.usage.promptTokens
        if response.usage.completionTokens is not None:
            completion = response.usage.completionTokens
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def openai_tool_calls(scenario: str, index: int, response: Response) -> list[dict[str, Any]]:
    return [
        {
            "id": tool_call_id(scenario, index, position),
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.args, ensure_ascii=False)},
        }
        for position, call in enumerate(response.toolCalls)
    ]


def finish_reason(response: Response) -> str:
    return "tool_calls" if response.toolCalls else "stop"


def completion(
    *,
    completion_id: str,
    model: str,
    created: int,
    response: Response,
    tool_calls: list[dict[str, Any]],
    token_usage: dict[str, int],
) -> dict[str, Any]:
    """A non-streaming `chat.completion` object."""
    message: dict[str, Any] = {"role": "assistant", "content": response.content, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason(response)}
        ],
        "usage": token_usage,
    }


def chunks(
    *,
    completion_id: str,
    model: str,
    created: int,
    response: Response,
    tool_calls: list[dict[str, Any]],
    token_usage: dict[str, int],
    include_usage: bool,
) -> list[dict[str, Any]]:
    """The `chat.completion.chunk` objects of a streamed answer, in order.

    Content is streamed word by word; each tool call opens with a delta carrying its
    index, id and name, followed by its arguments in pieces. With `include_usage`
    every chunk has `usage: null` and a last chunk with no choices carries the usage,
    as OpenAI does for `stream_options: {include_usage: true}`.
    """
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": piece} for piece in re.findall(r"\s*\S+\s*|\s+", response.content or "")]
    for position, call in enumerate(tool_calls):
        function = call["function"]
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": position,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": function["name"], "arguments": ""},
                    }
                ]
            }
        )
        arguments = function["arguments"]
        deltas += [
            {
                "tool_calls": [
                    {"index": position, "function": {"arguments": arguments[k : k + ARGUMENT_PIECE]}}
                ]
            }
            for k in range(0, len(arguments), ARGUMENT_PIECE)
        ]

    def chunk(choices: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": choices,
        }
        if include_usage:
            body["usage"] = None
        return body

    out = [chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]) for delta in deltas]
    out.append(chunk([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish_reason(response)}]))
    if include_usage:
        last = chunk([])
        last["usage"] = token_usage
        out.append(last)
    return out


def error_body(
    message: str, *, type: str = "invalid_request_error", code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """The OpenAI error envelope."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}

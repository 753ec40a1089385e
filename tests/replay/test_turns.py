"""Scenarios with `turns` (the demo assistant): every user message is answered, by cue."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from sessionops.agent.builder import SUMMARY_PROMPT_SUFFIX
from sessionops.api.snapshot import Summarization
from sessionops.replay import ReplayServer, ScenarioError, parse_scenario, validate_history

from .conftest import EXAMPLES

SCRIPT = {
    "name": "turny",
    "turns": [
        {"cue": "Shell", "responses": [
            {"content": "running", "toolCalls": [{"name": "run_shell", "args": {"command": "echo {{message}}"}}]},
            {"content": "got: {{tool_result}}"},
        ]},
        {"responses": [{"content": "echo: {{message}}"}]},
    ],
}


async def post(server: ReplayServer, messages: list[dict], headers: dict | None = None) -> tuple[int, Any]:
    body = {"model": "replay/turny", "messages": messages}
    async with aiohttp.ClientSession() as http, \
            http.post(server.url + "/v1/chat/completions", json=body, headers=headers or {}) as resp:
        return resp.status, await resp.json()


def reply(body: dict) -> dict:
    """The answer as the client appends it to its history."""
    message = body["choices"][0]["message"]
    return {k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}


@pytest.fixture
async def turny() -> Any:
    async with ReplayServer([parse_scenario(SCRIPT)], dirs=[EXAMPLES]) as server:
        yield server


async def test_every_user_message_is_answered_however_long_the_conversation(turny: ReplayServer) -> None:
    history: list[dict] = [{"role": "system", "content": "be brief"}]
    for n in range(12):
        history.append({"role": "user", "content": f"message {n}"})
        status, body = await post(turny, history)
        assert status == 200, body
        assert body["choices"][0]["message"]["content"] == f"echo: message {n}"
        history.append(reply(body))
    validate_history(history)


async def test_a_cue_word_picks_the_tool_script_and_ids_stay_unique_across_turns(turny: ReplayServer) -> None:
    history: list[dict] = []
    ids: list[str] = []
    for n in range(2):
        history.append({"role": "user", "content": f"use the SHELL please {n}"})
        status, body = await post(turny, history)
        assert status == 200, body
        call = body["choices"][0]["message"]["tool_calls"][0]
        assert json.loads(call["function"]["arguments"]) == {"command": f"echo use the SHELL please {n}"}
        ids.append(call["id"])
        history += [reply(body), {"role": "tool", "tool_call_id": call["id"], "content": f"out {n}"}]
        status, body = await post(turny, history)
        assert body["choices"][0]["message"]["content"] == f"got: out {n}"
        history.append(reply(body))
    assert ids == ["call_turny.t0_0_0", "call_turny.t0_2_0"]
    validate_history(history)  # a strict provider accepts the whole multi-turn history


async def test_a_retried_call_gets_the_same_answer(turny: ReplayServer) -> None:
    history = [{"role": "user", "content": "shell"}]
    first, second = await post(turny, history), await post(turny, history)
    assert first[1]["id"] == second[1]["id"]
    assert reply(first[1]) == reply(second[1])


async def test_a_turn_past_its_script_is_a_clear_400_naming_the_turn(turny: ReplayServer) -> None:
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "echo: hi"}]
    status, body = await post(turny, history)
    assert status == 400 and body["error"]["code"] == "scenario_exhausted"
    assert "(turn 1, cue None) is exhausted" in body["error"]["message"]


async def test_an_invalid_history_is_still_rejected(turny: ReplayServer) -> None:
    status, body = await post(turny, [{"role": "user", "content": "x"},
                                      {"role": "tool", "tool_call_id": "nope", "content": "orphan"}])
    assert status == 400 and body["error"]["code"] == "invalid_history"


async def test_without_a_catch_all_turn_an_unmatched_message_is_a_400_listing_the_cues() -> None:
    only = parse_scenario({"name": "turny", "turns": [{"cue": "shell", "responses": [{"content": "x"}]}]})
    async with ReplayServer([only]) as server:
        status, body = await post(server, [{"role": "user", "content": "hello"}])
    assert status == 400 and body["error"]["code"] == "no_matching_turn"
    assert "no turn's cue occurs in the latest user message (cues: 'shell')" in body["error"]["message"]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"responses": [{"content": "a"}], "turns": [{"responses": [{"content": "b"}]}]}, "not both"),
        ({}, "needs either `responses` (at least one) or `turns`"),
        ({"turns": [{"responses": [{"content": "a"}]}, {"cue": "x", "responses": [{"content": "b"}]}]},
         "turns.0: only the last turn may omit `cue`"),
        ({"turns": [{"responses": [{"content": "a"}]}], "branches": [{"match": "m", "responses": [{"content": "b"}]}]},
         "cannot be combined with `branches`"),
        ({"turns": [{"cue": "", "responses": [{"content": "a"}]}]}, "turns.0.cue: String should have at least 1"),
    ],
    ids=["both", "neither", "catch-all not last", "with branches", "empty cue"],
)
def test_invalid_turn_scenarios_are_rejected_with_the_reason(data: dict, reason: str) -> None:
    with pytest.raises(ScenarioError, match="^bad: ") as caught:
        parse_scenario({"name": "x", **data}, source="bad")
    assert reason in str(caught.value)


async def test_the_demo_assistant_answers_its_cue_words_with_the_documented_tools() -> None:
    async with ReplayServer(dirs=[EXAMPLES]) as server:
        tools = {}
        for cue in ("note", "shell", "question", "delegate"):
            async with aiohttp.ClientSession() as http, http.post(server.url + "/v1/chat/completions", json={
                    "model": "replay/assistant", "messages": [{"role": "user", "content": f"a {cue.upper()} x"}]}) as r:
                tools[cue] = [c["function"]["name"] for c in (await r.json())["choices"][0]["message"]["tool_calls"]]
        async with aiohttp.ClientSession() as http, http.post(server.url + "/v1/chat/completions", json={
                "model": "replay/assistant", "messages": [{"role": "user", "content": "hello"}]}) as r:
            plain = (await r.json())["choices"][0]["message"]
    assert tools == {"note": ["write_file"], "shell": ["run_shell"], "question": ["ask_user"],
                     "delegate": ["delegate"]}
    assert plain["content"].startswith('You said: "hello".') and "tool_calls" not in plain


async def test_a_server_with_a_key_refuses_requests_without_it_and_records_the_key_presented() -> None:
    async with ReplayServer([parse_scenario(SCRIPT)], api_key="sk-right") as server:
        missing = await post(server, [{"role": "user", "content": "hi"}])
        wrong = await post(server, [{"role": "user", "content": "hi"}], {"Authorization": "Bearer sk-wrong"})
        right = await post(server, [{"role": "user", "content": "hi"}], {"Authorization": "Bearer sk-right"})
        records = [(r["status"], r["apiKey"]) for r in server.records]
    assert missing[0] == wrong[0] == 401 and missing[1]["error"]["code"] == "invalid_api_key"
    assert right[0] == 200
    assert records == [(401, None), (401, "sk-wrong"), (200, "sk-right")]


async def test_the_demo_assistant_summarizes_with_text_even_when_the_history_holds_cue_words() -> None:
    """The summarization middleware's request quotes the conversation: it must not start a tool script."""
    prompt = Summarization().prompt + SUMMARY_PROMPT_SUFFIX.format(messages="human: run the shell, take a note")
    async with ReplayServer(dirs=[EXAMPLES]) as server, aiohttp.ClientSession() as http, \
            http.post(server.url + "/v1/chat/completions", json={
                "model": "replay/assistant", "messages": [{"role": "user", "content": prompt}]}) as r:
        message = (await r.json())["choices"][0]["message"]
    assert message["content"].startswith("Summary:") and "tool_calls" not in message

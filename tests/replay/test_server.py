"""The replay server over raw HTTP: protocol details, errors, recording, registration."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from sessionops.replay import ReplayServer, parse_scenario, start_replay_server

from .conftest import EXAMPLES


async def post(server: ReplayServer, body: Any, path: str = "/v1/chat/completions") -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.post(server.url + path, json=body) as resp:
        return resp.status, await resp.json()


async def get(server: ReplayServer, path: str) -> Any:
    async with aiohttp.ClientSession() as http, http.get(server.url + path) as resp:
        assert resp.status == 200
        return await resp.json()


def chat(model: str, *messages: dict, **params: Any) -> dict:
    return {"model": model, "messages": list(messages) or [{"role": "user", "content": "hi"}], **params}


CALLS_0 = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_three-parallel_0_0",
            "type": "function",
            "function": {"name": "read_file", "arguments": "{}"},
        },
        {
            "id": "call_three-parallel_0_1",
            "type": "function",
            "function": {"name": "read_file", "arguments": "{}"},
        },
        {
            "id": "call_three-parallel_0_2",
            "type": "function",
            "function": {"name": "run_shell", "arguments": "{}"},
        },
    ],
}


def result(call_id: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


async def test_an_unknown_scenario_is_a_404_in_openai_error_format(replay: ReplayServer) -> None:
    status, body = await post(replay, chat("replay/nope"))
    assert status == 404
    assert body["error"]["code"] == "model_not_found"
    assert body["error"]["type"] == "invalid_request_error"
    assert "'replay/nope' does not exist" in body["error"]["message"]


async def test_both_model_spellings_and_both_paths_select_the_scenario(replay: ReplayServer) -> None:
    for model, path in [("hello", "/v1/chat/completions"), ("replay/hello", "/chat/completions")]:
        status, body = await post(replay, chat(model), path)
        assert status == 200
        assert body["model"] == model
        assert body["choices"][0]["message"]["content"].startswith("Hello!")
        assert body["choices"][0]["finish_reason"] == "stop"


async def test_the_answer_is_chosen_by_the_number_of_assistant_messages(replay: ReplayServer) -> None:
    history = [
        {"role": "user", "content": "go"},
        CALLS_0,
        *map(result, ["call_three-parallel_0_0", "call_three-parallel_0_1", "call_three-parallel_0_2"]),
    ]
    _, first = await post(replay, chat("replay/three-parallel", history[0]))
    _, second = await post(replay, chat("replay/three-parallel", *history))
    assert [c["id"] for c in first["choices"][0]["message"]["tool_calls"]] == [
        c["id"] for c in CALLS_0["tool_calls"]
    ]
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    assert second["choices"][0]["message"]["content"] == "I compared a.txt and b.txt."
    assert [r["index"] for r in await get(replay, "/requests")] == [0, 1]


@pytest.mark.parametrize(
    ("history", "index", "reason"),
    [
        (
            [CALLS_0, result("call_three-parallel_0_0"), result("call_three-parallel_0_1")],
            1,
            "missing results for: call_three-parallel_0_2",
        ),
        (
            [
                CALLS_0,
                *map(
                    result,
                    [
                        "call_three-parallel_0_0",
                        "call_three-parallel_0_1",
                        "call_three-parallel_0_2",
                        "call_three-parallel_0_1",
                    ],
                ),
            ],
            5,
            "duplicate result",
        ),
        ([result("call_x")], 1, "orphan tool message"),
    ],
    ids=["missing result", "duplicate result", "orphan tool message"],
)
async def test_history_violations_are_rejected_with_400(
    replay: ReplayServer, history: list[dict], index: int, reason: str
) -> None:
    status, body = await post(
        replay, chat("replay/three-parallel", {"role": "user", "content": "go"}, *history)
    )
    assert status == 400
    assert body["error"]["code"] == "invalid_history"
    assert body["error"]["param"] == f"messages[{index}]"
    assert body["error"]["message"].startswith(f"messages[{index}]: ")
    assert reason in body["error"]["message"]


async def test_a_request_past_the_end_of_the_scenario_is_a_clear_400(replay: ReplayServer) -> None:
    status, body = await post(
        replay,
        chat(
            "replay/hello",
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "again"},
        ),
    )
    assert status == 400
    assert body["error"]["code"] == "scenario_exhausted"
    assert "'hello' is exhausted: it has 1 responses" in body["error"]["message"]


async def test_a_fallback_text_answers_past_the_end(replay: ReplayServer) -> None:
    history = [{"role": "user", "content": "hi"}]
    for _ in range(6):
        history.append({"role": "assistant", "content": "..."})
        history.append({"role": "user", "content": "more"})
    status, body = await post(replay, chat("replay/steer", *history))
    assert status == 200
    assert body["choices"][0]["message"]["content"] == "I have nothing more to add."


async def test_streaming_sends_tool_call_deltas_and_a_final_usage_chunk(replay: ReplayServer) -> None:
    body = chat("replay/parallel-approval", stream=True, stream_options={"include_usage": True})
    async with (
        aiohttp.ClientSession() as http,
        http.post(replay.url + "/v1/chat/completions", json=body) as resp,
    ):
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        text = await resp.text()
    events = [line.removeprefix("data: ") for line in text.splitlines() if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    assert all(c["usage"] is None for c in chunks[:-1])
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    deltas = [d for c in chunks[:-1] for d in c["choices"][0]["delta"].get("tool_calls", [])]
    opened = [d for d in deltas if "id" in d]
    assert [(d["index"], d["id"], d["function"]["name"]) for d in opened] == [
        (0, "call_parallel-approval_0_0", "write_file"),
        (1, "call_parallel-approval_0_1", "run_shell"),
    ]
    arguments = ["".join(d["function"]["arguments"] for d in deltas if d["index"] == i) for i in (0, 1)]
    assert json.loads(arguments[1]) == {"command": "sh hello.sh", "timeout_seconds": 30}
    assert len(deltas) > 4, "arguments arrive in several pieces"


async def test_usage_is_deterministic_and_scenarios_can_override_it(replay: ReplayServer) -> None:
    _, first = await post(replay, chat("replay/hello"))
    _, again = await post(replay, chat("replay/hello"))
    assert first["usage"] == again["usage"]
    assert first["id"] == again["id"]
    assert (
        first["usage"]["total_tokens"]
        == first["usage"]["prompt_tokens"] + first["usage"]["completion_tokens"]
    )
    replay.add(
        parse_scenario({"name": "costly", "responses": [{"content": "x", "usage": {"promptTokens": 1000}}]})
    )
    _, costly = await post(replay, chat("costly"))
    assert costly["usage"] == {"prompt_tokens": 1000, "completion_tokens": 1, "total_tokens": 1001}


async def test_stream_options_without_stream_are_rejected_like_openai(replay: ReplayServer) -> None:
    status, body = await post(replay, chat("hello", stream_options={"include_usage": True}))
    assert (status, body["error"]["param"]) == (400, "stream_options")


async def test_malformed_requests_get_openai_errors(replay: ReplayServer) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(replay.url + "/v1/chat/completions", data=b"{") as resp,
    ):
        assert resp.status == 400
        assert "parse the JSON body" in (await resp.json())["error"]["message"]
    status, body = await post(replay, {"messages": []})
    assert (status, body["error"]["param"]) == (400, "model")


async def test_requests_are_recorded_and_can_be_cleared(replay: ReplayServer) -> None:
    await post(
        replay,
        chat("replay/hello", {"role": "system", "content": "be nice"}, {"role": "user", "content": "hi"}),
    )
    await post(replay, chat("replay/nope"))
    records = await get(replay, "/requests")
    assert [(r["scenario"], r["index"], r["status"]) for r in records] == [
        ("hello", 0, 200),
        (None, None, 404),
    ]
    assert records[0]["messages"][0] == {"role": "system", "content": "be nice"}
    assert records[0]["model"] == "replay/hello" and records[0]["timestamp"].endswith("+00:00")
    assert [r["status"] for r in await get(replay, "/requests?scenario=replay/hello")] == [200]
    async with aiohttp.ClientSession() as http, http.delete(replay.url + "/requests") as resp:
        assert resp.status == 204
    assert await get(replay, "/requests") == []


async def test_models_list_every_scenario_and_health_reports_ok(replay: ReplayServer) -> None:
    models = await get(replay, "/v1/models")
    assert models["object"] == "list"
    assert {"replay/hello", "replay/steer", "replay/parallel-approval"} <= {m["id"] for m in models["data"]}
    assert (await get(replay, "/healthz"))["status"] == "ok"


async def test_scenarios_can_be_registered_at_run_time(replay: ReplayServer) -> None:
    scenario = {
        "name": "late",
        "responses": [{"toolCalls": [{"name": "load_skill", "args": {"name": "git"}}]}],
    }
    status, body = await post(replay, scenario, "/scenarios")
    assert (status, body) == (201, {"name": "late", "model": "replay/late", "responses": 1})
    status, answer = await post(replay, chat("replay/late"))
    assert answer["choices"][0]["message"]["tool_calls"][0]["function"] == {
        "name": "load_skill",
        "arguments": '{"name": "git"}',
    }
    status, _ = await post(replay, scenario, "/scenarios")
    assert status == 200, "re-registering replaces"
    status, body = await post(replay, {"name": "late", "responses": [{"toolCalls": [{}]}]}, "/scenarios")
    assert status == 400
    assert "responses.0.toolCalls.0.name: Field required" in body["error"]["message"]
    assert "late" in {s["name"] for s in await get(replay, "/scenarios")}


async def test_a_delayed_response_is_recorded_before_it_is_answered(replay: ReplayServer) -> None:
    replay.add(parse_scenario({"name": "slow", "responses": [{"content": "late", "delaySeconds": 0.3}]}))
    answer = asyncio.create_task(post(replay, chat("slow")))
    await asyncio.sleep(0.1)
    assert [r["scenario"] for r in replay.records] == ["slow"], "an in-flight call is already visible"
    assert not answer.done()
    status, body = await answer
    assert (status, body["choices"][0]["message"]["content"]) == (200, "late")


async def test_start_replay_server_returns_a_runner_and_url() -> None:
    runner, url = await start_replay_server([EXAMPLES])
    try:
        async with aiohttp.ClientSession() as http, http.get(url + "/healthz") as resp:
            assert (await resp.json())["scenarios"] >= 6
    finally:
        await runner.cleanup()

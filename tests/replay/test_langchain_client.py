"""The replay model driven by the real langchain-openai client, as the worker drives it."""

from __future__ import annotations

import openai
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from sessionops.replay import ReplayServer


@tool
def list_files(path: str = ".") -> str:
    """List the files in a directory of the work directory."""
    return "README.md\nsrc/"


@tool
def read_file(path: str) -> str:
    """Read a file of the work directory."""
    return f"contents of {path}"


@tool
def write_file(path: str, content: str) -> str:
    """Write a file in the work directory."""
    return f"wrote {len(content)} characters to {path}"


@tool
def run_shell(command: str, timeout_seconds: int = 60) -> str:
    """Run a shell command in the work directory."""
    return f"ran {command}"


TOOLS = [list_files, read_file, write_file, run_shell]


def model(server: ReplayServer, scenario: str, **kwargs: object) -> ChatOpenAI:
    return ChatOpenAI(
        model=f"replay/{scenario}", base_url=server.url + "/v1", api_key="x", max_retries=0, **kwargs
    )


def test_sync_invoke_answers_with_the_scenario_text(threaded_replay: ReplayServer) -> None:
    answer = model(threaded_replay, "hello").invoke("hi")
    assert isinstance(answer, AIMessage)
    assert answer.content == "Hello! I am the sessionops replay model. How can I help you today?"
    assert answer.usage_metadata is not None and answer.usage_metadata["output_tokens"] > 0


def test_sync_stream_reassembles_the_text_and_reports_usage(threaded_replay: ReplayServer) -> None:
    chunks = list(model(threaded_replay, "hello", stream_usage=True).stream("hi"))
    assert len(chunks) > 3, "the text arrives in pieces"
    full = sum(chunks[1:], chunks[0])
    assert isinstance(full, AIMessageChunk)
    assert full.content.startswith("Hello! I am the sessionops replay model.")
    assert full.usage_metadata is not None and full.usage_metadata["total_tokens"] > 0


async def test_the_same_request_twice_gets_the_identical_answer(replay: ReplayServer) -> None:
    llm = model(replay, "parallel-approval").bind_tools(TOOLS)
    first, second = await llm.ainvoke("go"), await llm.ainvoke("go")
    assert first.tool_calls == second.tool_calls
    assert [c["id"] for c in first.tool_calls] == ["call_parallel-approval_0_0", "call_parallel-approval_0_1"]
    assert first.content == second.content == "I will write the script and run it."
    assert first.usage_metadata == second.usage_metadata


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
async def test_parallel_tool_calls_are_parsed_into_tool_calls(replay: ReplayServer, streaming: bool) -> None:
    llm = model(replay, "three-parallel", streaming=streaming).bind_tools(TOOLS)
    answer = await llm.ainvoke("compare the files")
    assert [(c["name"], c["args"], c["id"]) for c in answer.tool_calls] == [
        ("read_file", {"path": "a.txt"}, "call_three-parallel_0_0"),
        ("read_file", {"path": "b.txt"}, "call_three-parallel_0_1"),
        ("run_shell", {"command": "diff a.txt b.txt", "timeout_seconds": 60}, "call_three-parallel_0_2"),
    ]
    assert answer.invalid_tool_calls == []
    assert answer.response_metadata["finish_reason"] == "tool_calls"


async def test_ask_user_arguments_arrive_intact(replay: ReplayServer) -> None:
    answer = await model(replay, "ask-user").ainvoke("help me set up the example")
    (call,) = answer.tool_calls
    assert call["name"] == "ask_user"
    assert [q["options"] for q in call["args"]["questions"]] == [
        ["Python", "Go", "Rust"],
        ["lint", "unit tests", "e2e tests"],
    ]
    assert [q["multi_select"] for q in call["args"]["questions"]] == [False, True]


async def test_a_history_with_a_missing_tool_result_is_rejected(replay: ReplayServer) -> None:
    llm = model(replay, "three-parallel").bind_tools(TOOLS)
    calls = await llm.ainvoke("go")
    history = [HumanMessage("go"), calls, ToolMessage("a", tool_call_id=calls.tool_calls[0]["id"])]
    with pytest.raises(openai.BadRequestError) as caught:
        await llm.ainvoke(history)
    assert caught.value.status_code == 400
    assert "messages[1]: an assistant message with 'tool_calls'" in str(caught.value)
    assert "call_three-parallel_0_1, call_three-parallel_0_2" in str(caught.value)


async def test_an_unknown_scenario_raises_not_found(replay: ReplayServer) -> None:
    with pytest.raises(openai.NotFoundError, match="no replay scenario named 'nope'"):
        await model(replay, "nope").ainvoke("hi")


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
async def test_an_agent_runs_a_scenario_to_its_final_answer(replay: ReplayServer, streaming: bool) -> None:
    agent = create_agent(model(replay, "tools-then-answer", streaming=streaming), tools=TOOLS)
    state = await agent.ainvoke({"messages": [HumanMessage("what is in this project?")]})
    assert state["messages"][-1].content.startswith("I listed the work directory and read README.md")
    assert [m.content for m in state["messages"] if isinstance(m, ToolMessage)] == [
        "README.md\nsrc/",
        "contents of README.md",
    ]
    records = replay.records
    assert [(r["scenario"], r["index"], r["status"]) for r in records] == [
        ("tools-then-answer", i, 200) for i in range(3)
    ]
    assert records[-1]["tools"] == ["list_files", "read_file", "write_file", "run_shell"]


async def test_an_agent_answers_parallel_calls_each_exactly_once(replay: ReplayServer) -> None:
    agent = create_agent(model(replay, "parallel-approval"), tools=TOOLS)
    state = await agent.ainvoke({"messages": [HumanMessage("write and run a script")]})
    assert state["messages"][-1].content == "Wrote hello.sh and ran it."
    last_request = replay.records[-1]
    assert last_request["index"] == 1
    assert [m["tool_call_id"] for m in last_request["messages"] if m["role"] == "tool"] == [
        "call_parallel-approval_0_0",
        "call_parallel-approval_0_1",
    ]

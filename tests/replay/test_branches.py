"""Scenario branches: one scenario answers each conversation by its first user message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from sessionops.replay import ReplayServer, ScenarioError, load_scenario_file, parse_scenario
from sessionops.replay.history import validate_history
from sessionops.replay.protocol import (
    first_user_message,
    select_conversation,
    select_response,
    tool_call_id,
)

DELEGATOR = """\
name: delegator
responses:
  - toolCalls:
      - {name: delegate, args: {message: "summarize README.md"}}
  - content: "The child says: README.md describes the project."
branches:
  - match: "summarize"
    responses:
      - toolCalls:
          - {name: read_file, args: {path: README.md}}
      - content: "README.md describes the project."
    fallbackContent: "Nothing more to summarize."
  - match: "README"
    responses: [{content: "never chosen for a summary: the first branch wins"}]
"""


@pytest.fixture
def delegator(tmp_path: Path) -> Any:
    path = tmp_path / "delegator.yaml"
    path.write_text(DELEGATOR)
    return load_scenario_file(path)


def user(content: Any) -> dict:
    return {"role": "user", "content": content}


def assistant(content: str) -> dict:
    return {"role": "assistant", "content": content}


# Parsing


def test_a_scenario_with_branches_loads(delegator: Any) -> None:
    assert [b.match for b in delegator.branches] == ["summarize", "README"]
    assert delegator.branches[0].responses[0].toolCalls[0].name == "read_file"
    assert delegator.branches[0].fallbackContent == "Nothing more to summarize."
    assert delegator.branches[1].fallbackContent is None
    assert parse_scenario({"name": "plain", "responses": [{"content": "hi"}]}).branches == []


@pytest.mark.parametrize(
    ("branch", "field"),
    [
        ({"match": "x", "responses": [{"content": "a"}], "when": "x"}, "branches.0.when: Extra inputs"),
        ({"match": "", "responses": [{"content": "a"}]}, "branches.0.match: String should have at least 1"),
        ({"responses": [{"content": "a"}]}, "branches.0.match: Field required"),
        ({"match": "x", "responses": []}, "branches.0.responses: List should have at least 1 item"),
        ({"match": "x", "responses": [{}]}, "branches.0.responses.0: Value error, a response needs"),
    ],
    ids=["unknown field", "empty match", "no match", "no responses", "empty response"],
)
def test_invalid_branches_are_rejected_with_the_field(branch: dict, field: str) -> None:
    with pytest.raises(ScenarioError, match="^bad: ") as caught:
        parse_scenario({"name": "b", "responses": [{"content": "a"}], "branches": [branch]}, source="bad")
    assert field in str(caught.value)


# Selection


def test_the_first_matching_branch_wins(delegator: Any) -> None:
    conversation = select_conversation(delegator, "please summarize the README")
    assert (conversation.label, conversation.branch) == ("delegator.b0", 0)
    assert conversation.responses == delegator.branches[0].responses
    assert select_conversation(delegator, "open the README").label == "delegator.b1"


@pytest.mark.parametrize("text", ["what is in this project?", None, "", "Summarize"])
def test_no_matching_branch_selects_the_main_line(delegator: Any, text: str | None) -> None:
    conversation = select_conversation(delegator, text)
    assert (conversation.label, conversation.branch) == ("delegator", None)
    assert conversation.responses == delegator.responses
    assert select_response(delegator, 0, first_user_text=text) == delegator.responses[0]


def test_the_index_counts_inside_the_branch_and_the_branch_has_its_own_fallback(delegator: Any) -> None:
    responses = [select_response(delegator, i, first_user_text="summarize it") for i in range(4)]
    assert responses[:2] == delegator.branches[0].responses
    assert [r.content for r in responses[2:] if r] == ["Nothing more to summarize."] * 2
    assert select_response(delegator, 1, first_user_text="README") is None, "branch 1 has no fallback"
    assert select_response(delegator, 2) is None, "the main line has no fallback either"


def test_select_response_without_a_text_is_unchanged(delegator: Any) -> None:
    assert [select_response(delegator, i) for i in range(3)] == [*delegator.responses, None]


def test_the_first_user_message_skips_system_messages_and_joins_text_parts() -> None:
    parts = [
        {"type": "text", "text": "one"},
        {"type": "image_url", "image_url": {}},
        {"type": "text", "text": "two"},
    ]
    assert first_user_message([{"role": "system", "content": "x"}, user(parts), user("later")]) == "one\ntwo"
    assert first_user_message([{"role": "system", "content": "x"}]) is None
    assert first_user_message([user("first"), assistant("a"), user("second")]) == "first"


def test_branch_tool_call_ids_differ_from_the_main_line_and_are_valid_history(delegator: Any) -> None:
    branch = select_conversation(delegator, "summarize").label
    assert tool_call_id(branch, 0, 0) == "call_delegator.b0_0_0" != tool_call_id("delegator", 0, 0)
    call = {
        "id": tool_call_id(branch, 0, 0),
        "type": "function",
        "function": {"name": "f", "arguments": "{}"},
    }
    validate_history(
        [
            user("summarize"),
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "ok"},
        ]
    )


# Over HTTP


def model(server: ReplayServer, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="replay/delegator", base_url=server.url + "/v1", api_key="x", max_retries=0, **kwargs
    )


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
async def test_a_child_on_the_same_scenario_gets_its_branch_not_the_parents_delegate_call(
    delegator: Any, streaming: bool
) -> None:
    async with ReplayServer([delegator]) as server:

        @tool
        def read_file(path: str) -> str:
            """Read a file of the work directory."""
            return f"contents of {path}"

        @tool
        async def delegate(message: str) -> str:
            """Hand a task to a child session running the same model."""
            child = create_agent(model(server, streaming=streaming), tools=[read_file, delegate])
            state = await child.ainvoke({"messages": [HumanMessage(message)]})
            return state["messages"][-1].content

        parent = create_agent(model(server, streaming=streaming), tools=[read_file, delegate])
        state = await parent.ainvoke({"messages": [HumanMessage("document the project")]})

        assert state["messages"][-1].content == "The child says: README.md describes the project."
        (result,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        assert (result.tool_call_id, result.content) == (
            "call_delegator_0_0",
            "README.md describes the project.",
        )
        records = list(server.records)
        assert [(r["scenario"], r["branch"], r["index"], r["status"]) for r in records] == [
            ("delegator", None, 0, 200),  # parent: delegate
            ("delegator", 0, 0, 200),  # child: read_file
            ("delegator", 0, 1, 200),  # child: answer
            ("delegator", None, 1, 200),  # parent: final answer
        ]
        child_results = [m for m in records[2]["messages"] if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in child_results] == ["call_delegator.b0_0_0"]

        async with aiohttp.ClientSession() as http:
            async with http.get(server.url + "/requests?scenario=replay/delegator") as resp:
                assert [r["branch"] for r in await resp.json()] == [None, 0, 0, None]
            body = {"model": "delegator", "messages": [user("open the README"), assistant("x"), user("more")]}
            async with http.post(server.url + "/v1/chat/completions", json=body) as resp:
                error = (await resp.json())["error"]
        assert (resp.status, error["code"]) == (400, "scenario_exhausted")
        assert "'delegator' (branch 1, match 'README') is exhausted: it has 1 responses" in error["message"]
        assert server.records[-1]["branch"] == 1

"""Steer delivery at safe points: claim before inject, idempotent on retry."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from sessionops.agent import build_agent
from sessionops.agent.steering import SteeringMiddleware, delivered_steer_uids, steer_message_id
from tests.agent.harness import messages, say, snapshot, thread
from tests.agent.scripted import ScriptedChatModel

CFG = thread()


class Crash(Exception):
    """The worker process dying at a chosen moment."""


class Inbox:
    """What the worker reads from Kubernetes: steer inputs and their claim/delivery marks."""

    def __init__(self) -> None:
        self.steers: list[tuple[str, str]] = []
        self.claimed: list[str] = []
        self.delivered: list[str] = []
        self.crash_on_claim = False

    def fetch(self) -> list[tuple[str, str]]:
        # Pending steers and the ones claimed by this run but not confirmed, in sequence order.
        return [(uid, text) for uid, text in self.steers if uid not in self.delivered]

    def claim(self, uids: list[str]) -> None:
        self.claimed.extend(u for u in uids if u not in self.claimed)
        if self.crash_on_claim:
            raise Crash("worker killed right after the claim")

    def on_delivered(self, uids: list[str]) -> None:
        self.delivered.extend(u for u in uids if u not in self.delivered)

    def middleware(self) -> SteeringMiddleware:
        return SteeringMiddleware(self.fetch, self.on_delivered, self.claim)


def steer_messages(msgs) -> list[HumanMessage]:
    return [m for m in msgs if isinstance(m, HumanMessage) and (m.id or "").startswith("steer:")]


def arrives_after_first_model_call(inbox: Inbox, uid: str, text: str):
    def step(history):
        inbox.steers.append((uid, text))
        return AIMessage(content="", tool_calls=[{"name": "list_files", "args": {}, "id": "call_0_0"}])
    return step


def test_a_steer_is_delivered_before_the_next_model_call_never_between_call_and_result(saver, workdir):
    inbox = Inbox()
    model = ScriptedChatModel(script=[arrives_after_first_model_call(inbox, "u1", "also check x"), "done"])
    graph = build_agent(snapshot(), model=model, workdir=workdir, checkpointer=saver, steering=inbox.middleware())
    say(graph, "look around", CFG)

    second_request = model.calls[1]
    assert [type(m).__name__ for m in second_request[-3:]] == ["AIMessage", "ToolMessage", "HumanMessage"]
    assert second_request[-1].id == steer_message_id("u1") and second_request[-1].content == "also check x"
    assert inbox.claimed == ["u1"]
    assert inbox.delivered == ["u1"]  # confirmed once the state held it
    assert delivered_steer_uids(graph.get_state(CFG).values) == ["u1"]


def test_a_steer_after_a_final_answer_sends_the_turn_back_to_the_model(saver, workdir):
    inbox = Inbox()

    def answer_then_steer(history):
        inbox.steers.append(("u2", "and in French?"))
        return AIMessage(content="Hello.")

    model = ScriptedChatModel(script=[answer_then_steer, "Bonjour."])
    graph = build_agent(snapshot(), model=model, workdir=workdir, checkpointer=saver, steering=inbox.middleware())
    out = say(graph, "greet me", CFG)
    assert [(type(m).__name__, m.content) for m in out["messages"]] == [
        ("HumanMessage", "greet me"), ("AIMessage", "Hello."),
        ("HumanMessage", "and in French?"), ("AIMessage", "Bonjour.")]
    assert model.model_calls == 2


def test_the_same_steer_fetched_twice_is_delivered_once(saver, workdir):
    inbox = Inbox()
    inbox.on_delivered = lambda uids: None  # the confirmation never sticks: every fetch returns u1 again
    inbox.steers = [("u1", "first"), ("u1", "first"), ("u3", "second")]
    model = ScriptedChatModel(script=[[("list_files", {})], [("list_files", {})], "done"])
    graph = build_agent(snapshot(), model=model, workdir=workdir, checkpointer=saver,
                        steering=SteeringMiddleware(inbox.fetch, inbox.on_delivered, inbox.claim))
    say(graph, "go", CFG)
    steers = steer_messages(messages(graph, CFG))
    assert [m.id for m in steers] == [steer_message_id("u1"), steer_message_id("u3")]
    assert model.model_calls == 3


def test_a_steer_claimed_before_a_crash_is_injected_once_by_the_retry(saver, workdir):
    inbox = Inbox()
    model = ScriptedChatModel(script=[arrives_after_first_model_call(inbox, "u1", "also x"), "done"])
    inbox.crash_on_claim = True
    graph = build_agent(snapshot(), model=model, workdir=workdir, checkpointer=saver, steering=inbox.middleware())
    with pytest.raises(Crash):
        say(graph, "go", CFG)
    assert inbox.claimed == ["u1"] and not steer_messages(messages(graph, CFG))

    # A Retry segment: a new worker, a new graph, continuing from the last checkpoint.
    inbox.crash_on_claim = False
    retry = build_agent(snapshot(), model=model, workdir=workdir, checkpointer=saver, steering=inbox.middleware())
    out = retry.invoke(None, CFG, durability="sync")
    assert [m.id for m in steer_messages(out["messages"])] == [steer_message_id("u1")]
    assert out["messages"][-1].content == "done"
    assert sum(isinstance(m, ToolMessage) for m in out["messages"]) == 1
    assert inbox.delivered == ["u1"]

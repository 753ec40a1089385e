"""Size budgets (docs/limits.md): what one object may carry, each refusal naming its field."""

from __future__ import annotations

import pytest

from sessionops.admission.agents import check_agent
from sessionops.admission.errors import Rejection, parse
from sessionops.admission.sessions import session_snapshot_on_create
from sessionops.api import limits
from sessionops.api.input import AgentInputSpec
from tests import factories

RESUME = {"sessionRef": {"name": "s"}, "kind": "Resume", "run": "r", "waitpointId": "w"}


def refusal(spec: dict) -> str:
    with pytest.raises(Rejection) as e:
        parse(AgentInputSpec, spec)
    return str(e.value)


def test_twenty_messages_of_32768_plain_characters_fit_the_input_budget() -> None:
    parse(AgentInputSpec, {"sessionRef": {"name": "s"}, "messages": [{"content": "x" * limits.MESSAGE_CHARS}] * 20})


@pytest.mark.parametrize(("spec", "expected"), [
    ({"sessionRef": {"name": "s"}, "messages": [{"content": "hi"}, {"content": " \n\t\u3000"}]},
     "spec.messages[1].content: must not be blank (whitespace only)"),
    ({"sessionRef": {"name": "s"}, "messages": [{"content": "é" * limits.MESSAGE_CHARS}] * 20},
     "spec.messages: Too long: 1310720 bytes as stored (the messages), more than the 655360 allowed"),
    ({"sessionRef": {"name": "s"}, "messages": [{"content": "<" * limits.MESSAGE_CHARS}] * 4},
     "spec.messages: Too long: 786432 bytes as stored (the messages)"),
    ({**RESUME, "answers": ["x" * 500_000]}, "spec.answers: Too long: an answer may have at most 32768 characters"),
    ({**RESUME, "answers": [["x" * 32_769]]}, "spec.answers: Too long: an answer may have at most 32768"),
    ({**RESUME, "answers": [["a"] * 65]}, "spec.answers: Too many: 65 options in one answer, more than the 64"),
    ({**RESUME, "answers": ["x" * 32_768] * 21}, "spec.answers: Too long: 688128 bytes as stored (the answers)"),
    ({**RESUME, "decisions": [{"callId": f"c{i}", "decision": "Reject", "message": "é" * 4096} for i in range(81)]},
     "spec.decisions: Too long: 663552 bytes as stored (the answers and decision messages)"),
], ids=["whitespace only", "multibyte messages", "escaped characters", "huge answer", "huge option",
        "too many options", "answers together", "decision messages"])
def test_input_content_over_its_budget_is_refused_naming_the_field(spec: dict, expected: str) -> None:
    assert refusal(spec).startswith(expected)


def create(context: dict, **agent_spec: object):
    agent = factories.agent(contextSchema=[{"name": "notes", "type": "string"}, {"name": "more", "type": "string"}],
                            **agent_spec)
    return session_snapshot_on_create({"agentRef": {"name": "helper"}, "context": context}, agent,
                                      factories.config())


def test_context_values_have_a_cap_each_and_together() -> None:
    assert create({"notes": "x" * limits.CONTEXT_VALUE_CHARS}).context["notes"]
    with pytest.raises(Rejection, match=r"^spec.context.notes: Too long: may have at most 32768 characters"):
        create({"notes": "x" * 300_000})
    with pytest.raises(Rejection, match=r"^spec.context: Too long: 65558 bytes as stored \(the context values\)"):
        create({"notes": "é" * 16_384, "more": "é" * 16_384})


def test_a_snapshot_over_its_budget_is_refused_naming_the_agent() -> None:
    big = {"systemPrompt": "x" * limits.SYSTEM_PROMPT_CHARS,
           "summarization": {"prompt": "é" * 8192},
           "skills": [f"skill-{'s' * 200}-{i}" for i in range(1500)]}
    with pytest.raises(Rejection, match=r'^spec.agentRef.name: agent "helper": Too long: \d+ bytes as stored \(the resolved configuration'):
        create({}, **big)


@pytest.mark.parametrize(("spec", "expected"), [
    ({"systemPrompt": "€" * limits.SYSTEM_PROMPT_CHARS}, "spec.systemPrompt: Too long: 196608 bytes as stored (its"),
    ({"systemPrompt": "p", "contextSchema": [{"name": "a", "type": "string", "default": "x" * 32_769}]},
     "spec.contextSchema[0].default: Too long"),
    ({"systemPrompt": "p", "contextSchema": [{"name": "a", "type": "string", "enum": ["ok", "x" * 32_769]}]},
     "spec.contextSchema[0].enum: Too long"),
    ({"systemPrompt": "p", "contextSchema": [{"name": f"f{i}", "type": "string", "default": "x" * 30_000}
                                             for i in range(3)]},
     "spec.contextSchema: Too long: 90025 bytes as stored (the defaults)"),
    ({"systemPrompt": "p", "contextSchema": [{"name": f"f{i}", "type": "string", "enum": ["x" * 30_000] * 10}
                                             for i in range(2)]},
     "spec: Too long: 600176 bytes as stored (the agent's spec)"),
], ids=["system prompt bytes", "default value", "enum value", "defaults together", "whole spec"])
def test_agent_content_over_its_budget_is_refused_naming_the_field(spec: dict, expected: str) -> None:
    with pytest.raises(Rejection) as e:
        check_agent(spec)
    assert str(e.value).startswith(expected)

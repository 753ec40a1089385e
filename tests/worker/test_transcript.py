"""The transcript projection (pure): order, deterministic ids, merge without loss or
doubling, redaction, truncation and the chunk bound."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from sessionops.agent.tools import question_id
from sessionops.api.transcript import CHUNK_BYTES_MAX, REDACTED, AgentTranscript, chunks, size
from sessionops.worker import transcript

SECRET = "sk-live-0123456789"


def _turn() -> list:
    return [
        HumanMessage("list and run", id="input:u1:0"),
        AIMessage("", id="ai-1", tool_calls=[{"name": "list_files", "args": {}, "id": "c1"},
                                             {"name": "run_shell", "args": {"command": "sh hello.sh"}, "id": "c2"}],
                  usage_metadata={"input_tokens": 10, "output_tokens": 3, "total_tokens": 13}),
        ToolMessage("hello.sh", tool_call_id="c1", name="list_files", id="t1"),
        ToolMessage("hello", tool_call_id="c2", name="run_shell", id="t2"),
        HumanMessage("also greet", id="steer:u2"),
        AIMessage("done: hello", id="ai-2", usage_metadata={"input_tokens": 20, "output_tokens": 4,
                                                             "total_tokens": 24}),
    ]


def test_steps_follow_the_thread_in_order_with_deterministic_ids() -> None:
    steps = transcript.project(_turn(), final=True, result_max=100)
    assert [(s["id"], s["kind"]) for s in steps] == [
        ("user:input:u1:0", "UserMessage"), ("assistant:ai-1", "AssistantMessage"),
        ("call:c1", "ToolCall"), ("call:c2", "ToolCall"), ("result:c1", "ToolResult"),
        ("result:c2", "ToolResult"), ("steer:u2", "Steer"), ("assistant:ai-2", "FinalAnswer")]
    assert steps[1]["usage"] == {"inputTokens": 10, "outputTokens": 3}
    assert steps[3]["args"] == {"command": "sh hello.sh"}
    assert steps[-1]["text"] == "done: hello"


def test_a_decision_follows_its_call_and_names_who_decided() -> None:
    waitpoint = {"id": "w1", "kind": "Approval", "calls": [{"callId": "k2", "toolCallId": "c2", "tool": "run_shell"}]}
    resume = {"spec": {"decisions": [{"callId": "k2", "decision": "Reject", "message": "no"}],
                       "submittedBy": {"username": "bob"}}}
    steps = transcript.project(_turn(), decisions=transcript.decision_steps(waitpoint, resume), result_max=100)
    ids = [s["id"] for s in steps]
    assert ids.index("decision:c2") == ids.index("call:c2") + 1
    decision = steps[ids.index("decision:c2")]
    assert (decision["status"], decision["decidedBy"], decision["text"]) == ("Reject", "bob", "no")


def test_answers_follow_their_question() -> None:
    ask = AIMessage("", id="ai-q", tool_calls=[{"name": "ask_user", "id": "q1", "args": {
        "questions": [{"question": "color?"}, {"question": "size?"}]}}])
    waitpoint = {"id": "w2", "kind": "Question", "questions": [
        {"questionId": question_id("q1", 0), "question": "color?"},
        {"questionId": question_id("q1", 1), "question": "size?"}]}
    resume = {"spec": {"answers": ["red", ["s", "m"]], "submittedBy": {"username": "carol"}}}
    steps = transcript.project([ask], answers=transcript.answer_steps(waitpoint, resume), result_max=100)
    assert [s["kind"] for s in steps] == ["AssistantMessage", "Question", "Answer", "Answer"]
    assert steps[2]["text"] == "color? -> red" and steps[3]["text"] == "size? -> s, m"
    assert steps[3]["decidedBy"] == "carol"


def test_cancelled_calls_are_marked_cancelled() -> None:
    messages = [AIMessage("", id="a", tool_calls=[{"name": "run_shell", "args": {"command": "x"}, "id": "c9"}]),
                ToolMessage("cancelled", tool_call_id="c9", name="run_shell", id="cancel:a:c9", status="error")]
    assert transcript.project(messages, result_max=100)[-1]["status"] == "cancelled"


def test_a_retried_segment_neither_loses_nor_doubles_a_step() -> None:
    turn = _turn()
    first = transcript.merge([], transcript.project(turn[:3], result_max=100), segment="r-1", at="t1")
    # The worker died; the retry projects the whole thread again (same ids).
    second = transcript.merge(first, transcript.project(turn, final=True, result_max=100), segment="r-2", at="t2")
    ids = [s["id"] for s in second]
    assert len(ids) == len(set(ids)) == 8
    assert ids == [s["id"] for s in transcript.project(turn, final=True, result_max=100)]
    by_id = {s["id"]: s for s in second}
    assert (by_id["call:c1"]["segment"], by_id["call:c1"]["at"]) == ("r-1", "t1")
    assert (by_id["result:c2"]["segment"], by_id["result:c2"]["at"]) == ("r-2", "t2")


def test_steps_folded_away_by_summarization_stay_published() -> None:
    turn = _turn()
    first = transcript.merge([], transcript.project(turn, result_max=100), segment="r-1", at="t1")
    later = transcript.merge(first, transcript.project(turn[4:], result_max=100), segment="r-2", at="t2")
    assert [s["id"] for s in later] == [s["id"] for s in first]


def test_known_secret_values_are_redacted_everywhere() -> None:
    messages = [HumanMessage(f"my key is {SECRET}", id="input:u:0"),
                AIMessage(f"using {SECRET}", id="a", tool_calls=[
                    {"name": "run_shell", "args": {"command": f"curl -H 'k: {SECRET}'", "env": [SECRET]}, "id": "c"}]),
                ToolMessage(f"echo {SECRET}", tool_call_id="c", name="run_shell", id="t")]
    steps = transcript.project(messages, redactor=transcript.Redactor([SECRET, "", "ab"]), result_max=100)
    text = json.dumps(steps)
    assert SECRET not in text
    assert text.count(REDACTED) == 5


def test_tool_results_are_cut_with_an_explicit_marker() -> None:
    messages = [AIMessage("", id="a", tool_calls=[{"name": "read_file", "args": {"path": "big"}, "id": "c"}]),
                ToolMessage("x" * 20_000, tool_call_id="c", name="read_file", id="t")]
    result = transcript.project(messages, result_max=16 * 1024)[-1]
    assert result["truncated"] is True
    assert result["text"].startswith("x" * 16 * 1024)
    assert result["text"].endswith(f"[... truncated: {20_000 - 16 * 1024} more characters ...]")


def test_a_200_step_turn_with_16k_results_fits_in_bounded_chunks_and_reads_back() -> None:
    messages: list = [HumanMessage("go", id="input:u:0")]
    for i in range(200):
        messages.append(AIMessage("", id=f"a{i}", tool_calls=[{"name": "read_file", "args": {"path": f"f{i}"},
                                                                "id": f"c{i}"}]))
        messages.append(ToolMessage("y" * 16 * 1024, tool_call_id=f"c{i}", name="read_file", id=f"t{i}"))
    messages.append(AIMessage("all read", id="end"))
    steps = transcript.merge([], transcript.project(messages, final=True, result_max=16 * 1024),
                             segment="r-1", at="t")
    parts = chunks(steps)
    assert len(parts) > 10
    for index, part in enumerate(parts):
        body = AgentTranscript.model_validate({"metadata": {"name": f"r-t{index}"},
                                               "spec": {"run": "r", "session": "s", "index": index, "steps": part}})
        assert size(body.dump()) < CHUNK_BYTES_MAX - 2048
    assert [s for part in parts for s in part] == steps
    assert chunks(steps) == parts  # deterministic: a rewrite changes only what changed

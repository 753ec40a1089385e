"""A long turn's transcript through the API: bounded chunks that read back whole."""

from __future__ import annotations

import json

import kubernetes

from sessionops.api.transcript import CHUNK_BYTES_MAX, TOOL_RESULT_MAX
from sessionops.cli.client import Kube
from sessionops.cli.transcript import read
from tests.worker.harness import NS, Stack

RESULT = 17 * 1024


def test_a_long_turn_of_large_parallel_results_keeps_every_chunk_bounded_and_reads_back(stack: Stack) -> None:
    # The checkpoint keeps each result whole (no summarization, no token cap); the transcript cuts it.
    stack.session("s1", stack.snapshot("hundred-reads", approval="AlwaysTrust", summarization={
        "thresholdMessages": 10_000, "keepMessages": 20, "toolResultTokenLimit": 1_000_000}))
    for i in range(10):
        for j in range(10):
            (stack.workdir("s1") / f"big-{i}-{j}.txt").write_text(f"{i}{j}" + "z" * (RESULT - 2))
    stack.message("s1-i1", "s1", "Read them all.")
    stack.turn("s1-t1", "s1", ["s1-i1"])

    run, execution = stack.segment("s1-t1", timeout=240)

    assert execution.exit_code == 0 and run["status"]["phase"] == "Succeeded", run["status"]
    chunks = sorted(stack.kube.list_transcripts(NS, "s1-t1"), key=lambda c: c["spec"]["index"])
    assert len(chunks) > 1
    for chunk in chunks:  # as stored by the API server, metadata included
        assert len(json.dumps(chunk, separators=(",", ":")).encode()) <= CHUNK_BYTES_MAX
    steps = [s for c in chunks for s in c["spec"]["steps"]]
    kinds = [s["kind"] for s in steps]
    assert len(steps) == 212 and len({s["id"] for s in steps}) == 212
    assert kinds.count("ToolCall") == kinds.count("ToolResult") == 100 and kinds[-1] == "FinalAnswer"
    results = [s for s in steps if s["kind"] == "ToolResult"]
    assert all(s["truncated"] and s["text"].endswith(f"[... truncated: {RESULT - TOOL_RESULT_MAX} more characters ...]")
               for s in results)
    assert {s["text"][:2] for s in results} == {f"{i}{j}" for i in range(10) for j in range(10)}
    # The plugin reads the whole turn back (one list of every chunk), as stored.
    assert read(Kube(kubernetes.client.CustomObjectsApi(stack.kube.api_client), NS), run) == steps
    # The checkpoint keeps the full history.
    whole = [m for m in stack.thread("s1").values["messages"] if m.type == "tool"]
    assert len(whole) == 100 and all(len(m.content) == RESULT for m in whole)

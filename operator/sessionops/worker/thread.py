"""The session's thread in the checkpointer: run config, "has this turn started?", and
closing what an earlier turn left open.

Checkpoints written by a segment carry ``sessionops_run`` / ``sessionops_segment`` in
their metadata (langgraph copies string entries of ``config["metadata"]``), so whether
a turn has reached the thread is a metadata query, independent of summarization.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from sessionops.cancellation.cleanup import CleanupReport, cleanup_thread, missing_results

RUN_KEY = "sessionops_run"
SEGMENT_KEY = "sessionops_segment"
SUPERSTEPS_PER_MODEL_CALL = 8
"""Graph steps one model round may take (limit and steering hooks, summarization,
model, tools): the recursion limit follows maxExecutionSteps instead of langgraph's 25."""


def run_config(thread_id: str, run: str, segment: str, max_steps: int) -> dict[str, Any]:
    return {
        "configurable": {"thread_id": thread_id},
        "metadata": {RUN_KEY: run, SEGMENT_KEY: segment},
        "recursion_limit": SUPERSTEPS_PER_MODEL_CALL * (max_steps + 2),
    }


def turn_started(saver: PostgresSaver, thread_id: str, run: str) -> bool:
    """True when any checkpoint of the thread was written by a segment of this run."""
    config = {"configurable": {"thread_id": thread_id}}
    return next(iter(saver.list(config, filter={RUN_KEY: run}, limit=1)), None) is not None


def open_leftovers(state: StateSnapshot) -> bool:
    """An earlier turn left tasks, interrupts or unanswered tool calls (it failed or was lost)."""
    messages: list[BaseMessage] = (state.values or {}).get("messages", [])
    return bool(state.next or state.tasks or missing_results(messages)[1])


def close_leftovers(graph: CompiledStateGraph, thread_id: str) -> CleanupReport | None:
    """Before a new turn: pair every tool call of an ended turn with an error result and clear
    its pending tasks, exactly as a cancellation does (``sessionops.cancellation``), so a
    strict provider accepts the history. Safe to repeat: each step checks the checkpoint."""
    config = {"configurable": {"thread_id": thread_id}}
    if not open_leftovers(graph.get_state(config)):
        return None
    return cleanup_thread(graph, config)

"""The three guarded commits that clean a cancelled thread (ARCHITECTURE.md 5, step 3).

1. ``MergeCompletedTasks``: tasks of the interrupted step pend -> ``update_state(None,
   as_node=END)`` merges the writes of the tasks that completed (their results and
   business state) and clears the waiting ones.
2. ``AddCancellationResults``: every tool call of the current (last) AI message without
   a ToolMessage after it gets ``ToolMessage(status="error", id="cancel:<ai id>:<call id>")``,
   all in one update as the ``tools`` node.
3. ``ClearTasks``: the tools update (and step 1's merge) triggers the next model round
   -> ``update_state(None, as_node=END)`` clears it.

Each step is guarded by a check of the current checkpoint, so a retry after a crash at
any point skips what is done and finishes with the same state. Completion is read from
the pending tasks (1, 3) and from the tool_call_ids after the current AI message (2),
never from result message ids. The order matters: step 2 before step 1 would commit a
checkpoint without the completed tasks' pending writes, losing their results.

Guard of step 1, precisely: pending tasks other than a fresh model round. Step 1's own
merge can trigger the model round (``AgentNodes.LOOP_ENTRY``); that task is step 3's to
clear, so a retry after commit 1 does not commit step 1 again.

``plan`` is the pure decision (checkpoint in, next commit out); ``cleanup_thread`` and
``acleanup_thread`` are the loops that commit it through the state API.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph import END
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from sessionops.agent.builder import AgentNodes

STEP_MERGE = "MergeCompletedTasks"
STEP_CANCEL_RESULTS = "AddCancellationResults"
STEP_CLEAR = "ClearTasks"
STEPS = (STEP_MERGE, STEP_CANCEL_RESULTS, STEP_CLEAR)
"""Step names, in order, as reported in ``status.cancellation.completedSteps``."""
STEP_VERIFY = "Verify"

CANCEL_CONTENT = "cancelled by the user"


@dataclass
class CleanupReport:
    committed: list[str] = field(default_factory=list)
    """Steps this call committed, in order (each is one checkpoint)."""
    skipped: list[str] = field(default_factory=list)
    """Steps found already done (or never needed) on the current checkpoint."""
    cancelled_calls: list[str] = field(default_factory=list)
    """tool_call_ids that received a cancellation result in this call."""
    checkpoint_id: str | None = None
    """The thread's checkpoint after cleanup."""
    closed_calls: list[str] = field(default_factory=list)
    """tool_call_ids the thread holds a cancellation result for, whichever call (this one or an
    earlier, crashed one) committed it: read from the clean checkpoint, so a retry sees them too."""

    @property
    def commits(self) -> int:
        return len(self.committed)


class CleanupError(RuntimeError):
    """A step failed or the end state is not clean; ``step`` names it for the run's condition."""

    def __init__(self, step: str, message: str) -> None:
        self.step = step
        self.message = message
        super().__init__(f"{step}: {message}")


def cancel_message_id(ai_message_id: str | None, tool_call_id: str) -> str:
    return f"cancel:{ai_message_id}:{tool_call_id}"


def cancelled_call_ids(messages: Sequence[BaseMessage]) -> list[str]:
    """tool_call_ids answered by a cancellation result (``cancel:`` ids), in order. Pure."""
    return [m.tool_call_id for m in messages
            if isinstance(m, ToolMessage) and (m.id or "").startswith("cancel:")]


def current_ai_message(messages: Sequence[BaseMessage]) -> tuple[int, AIMessage] | None:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], AIMessage):
            return i, messages[i]  # type: ignore[return-value]
    return None


def missing_results(messages: Sequence[BaseMessage]) -> tuple[AIMessage | None, list[dict[str, Any]]]:
    """The current AI message and its tool calls that have no ToolMessage after it. Pure."""
    found = current_ai_message(messages)
    if found is None:
        return None, []
    index, ai = found
    answered = {m.tool_call_id for m in messages[index + 1:] if isinstance(m, ToolMessage)}
    return ai, [dict(c) for c in ai.tool_calls if c["id"] not in answered]


def pairing_errors(messages: Sequence[BaseMessage]) -> list[str]:
    """Violations of "every tool call answered exactly once, right after its AI message". Pure."""
    errors: list[str] = []
    owner: dict[str, int] = {}
    answered: dict[str, int] = {}
    open_calls: dict[str, int] = {}
    for i, m in enumerate(messages):
        if isinstance(m, ToolMessage):
            tid = m.tool_call_id
            if tid in answered:
                errors.append(f"messages[{i}]: second result for tool call {tid} (first: messages[{answered[tid]}])")
            elif tid not in owner:
                errors.append(f"messages[{i}]: result for unknown tool call {tid}")
            elif tid not in open_calls:
                errors.append(f"messages[{i}]: result for {tid} does not directly follow its AI message")
            else:
                answered[tid] = i
                del open_calls[tid]
            continue
        if isinstance(m, AIMessage | HumanMessage) and open_calls:
            errors.append(f"messages[{i}]: tool calls without results before it: {', '.join(open_calls)}")
            open_calls.clear()
        if isinstance(m, AIMessage):
            for call in m.tool_calls:
                owner[call["id"]] = i
                open_calls[call["id"]] = i
    if open_calls:
        errors.append(f"tool calls without results: {', '.join(open_calls)}")
    return errors


def _needs_merge(state: StateSnapshot) -> bool:
    return any(t.name != AgentNodes.LOOP_ENTRY or t.interrupts for t in state.tasks)


@dataclass(frozen=True)
class Commit:
    """One step to commit: ``update_state(config, values, as_node=as_node)``."""

    step: str
    values: Any
    as_node: str
    cancelled_calls: tuple[str, ...] = ()


def plan(state: StateSnapshot) -> Commit | None:
    """The next step the thread's current checkpoint still needs (None: clean). Pure.

    Each guard reads the checkpoint, so after a crash the plan resumes where the commits
    stopped: tasks other than a fresh model round -> 1; calls of the current AI message
    without a result after it -> 2; any task left -> 3.
    """
    if _needs_merge(state):
        return Commit(STEP_MERGE, None, END)
    ai, missing = missing_results(state.values.get("messages", []) if state.values else [])
    if missing:
        ai_id = ai.id if ai is not None else None
        cancels = [ToolMessage(content=CANCEL_CONTENT, status="error", tool_call_id=c["id"], name=c["name"],
                               id=cancel_message_id(ai_id, c["id"])) for c in missing]
        return Commit(STEP_CANCEL_RESULTS, {"messages": cancels}, AgentNodes.TOOLS, tuple(c["id"] for c in missing))
    if state.tasks:
        return Commit(STEP_CLEAR, None, END)
    return None


def _thread_config(config: dict[str, Any], step: str) -> dict[str, Any]:
    # Always the thread's latest checkpoint (a checkpoint_id would fork an old one); the
    # metadata tags the checkpoint each step commits, for audit.
    conf = config["configurable"]
    return {"configurable": {"thread_id": conf["thread_id"], "checkpoint_ns": conf.get("checkpoint_ns", "")},
            "metadata": {"sessionops_cleanup_step": step}}


def _check_order(report: CleanupReport, commit: Commit) -> None:
    # The plan only moves forward; a step planned again means its commit did not take.
    if report.committed and STEPS.index(commit.step) <= STEPS.index(report.committed[-1]):
        raise CleanupError(commit.step, f"still needed after {report.committed[-1]} was committed")


def _record(report: CleanupReport, commit: Commit) -> None:
    report.committed.append(commit.step)
    report.cancelled_calls.extend(commit.cancelled_calls)


def _finish(report: CleanupReport, state: StateSnapshot) -> CleanupReport:
    _verify(state)
    report.skipped = [s for s in STEPS if s not in report.committed]
    report.checkpoint_id = (state.config or {}).get("configurable", {}).get("checkpoint_id")
    report.closed_calls = cancelled_call_ids(state.values.get("messages", []) if state.values else [])
    return report


def _failed(commit: Commit, error: Exception) -> CleanupError:
    return CleanupError(commit.step, f"{type(error).__name__}: {error}")


def cleanup_thread(graph: CompiledStateGraph, config: dict[str, Any]) -> CleanupReport:
    """Leaves the thread with every tool call paired once, ``next == ()``, no interrupts.

    ``graph`` is the checkpoint-only graph (``checkpoint_graph``); ``config`` names the
    thread (``{"configurable": {"thread_id": ...}}``). Repeating it is safe: every step
    first checks the current checkpoint, and a clean thread costs no commit at all.
    Raises ``CleanupError(step, message)``; the thread is then as the last commit left it.
    """
    report = CleanupReport()
    state = graph.get_state(_thread_config(config, STEP_VERIFY))
    while (commit := plan(state)) is not None:
        _check_order(report, commit)
        try:
            graph.update_state(_thread_config(config, commit.step), commit.values, as_node=commit.as_node)
        except Exception as error:  # reported with the step it failed in; nothing is swallowed
            raise _failed(commit, error) from error
        _record(report, commit)
        state = graph.get_state(_thread_config(config, STEP_VERIFY))
    return _finish(report, state)


async def acleanup_thread(graph: CompiledStateGraph, config: dict[str, Any]) -> CleanupReport:
    """``cleanup_thread`` for an async checkpointer (``AsyncPostgresSaver``)."""
    report = CleanupReport()
    state = await graph.aget_state(_thread_config(config, STEP_VERIFY))
    while (commit := plan(state)) is not None:
        _check_order(report, commit)
        try:
            await graph.aupdate_state(_thread_config(config, commit.step), commit.values, as_node=commit.as_node)
        except Exception as error:  # reported with the step it failed in; nothing is swallowed
            raise _failed(commit, error) from error
        _record(report, commit)
        state = await graph.aget_state(_thread_config(config, STEP_VERIFY))
    return _finish(report, state)


def _verify(state: StateSnapshot) -> None:
    problems = pairing_errors(state.values.get("messages", []) if state.values else [])
    if state.next or state.tasks:
        problems.append(f"tasks still pending: {[t.name for t in state.tasks]}")
    if state.interrupts:
        problems.append(f"interrupts still pending: {[i.id for i in state.interrupts]}")
    if problems:
        raise CleanupError(STEP_VERIFY, "; ".join(problems))

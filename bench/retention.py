"""Checkpoint rows and bytes per thread over many turns, with and without retention (prints JSON).

Each turn is a real agent turn (real ``create_agent`` graph, real PostgresSaver,
``durability="sync"``): a user message, one tool call (``write_file``), its result and a
final answer. After each turn the thread is pruned to ``--keep`` checkpoints, as the worker
does at the end of every segment (``checkpoints.prune``); the same turns run on a second
thread that is never pruned. Reported at a few turn counts: rows of the three tables and
the bytes of the thread's blobs and checkpoints, plus the prune time. Target: rows and
bytes of the pruned thread stop growing with the turn count except for the message history
itself (the latest ``messages`` blob holds the conversation, which the snapshot's default
summarization keeps short).

    python bench/retention.py [--turns 100] [--keep 20]   # DATABASE_URL selects the server
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from sessionops.agent import build_agent
from sessionops.api.snapshot import ContextSnapshot
from sessionops.platform import checkpoints

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests import pgserver  # noqa: E402
from tests.stack import create_database, drop_database  # noqa: E402

SNAPSHOT = ContextSnapshot(system_prompt="bench", model="bench", approval_mode="AlwaysTrust")
REPORT_AT = (1, 10, 25, 50, 100, 200, 500)


class OneToolModel(BaseChatModel):
    """Answers a user message with one write_file call, and the tool result with a short text."""

    @property
    def _llm_type(self) -> str:
        return "bench"

    def bind_tools(self, tools: Any, **kwargs: Any) -> OneToolModel:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        turn = next(str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage)).split()[-1]
        if isinstance(messages[-1], ToolMessage):
            message = AIMessage(content=f"Turn {turn} done: notes saved.", id=f"ai-{turn}-b")
        else:
            message = AIMessage(content="", id=f"ai-{turn}-a", tool_calls=[
                {"name": "write_file", "args": {"path": f"notes-{turn}.txt", "content": "x" * 200},
                 "id": f"call_{turn}"}])
        return ChatResult(generations=[ChatGeneration(message=message)])


def footprint(dsn: str, thread_id: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        def one(sql: str) -> int:
            return int(conn.execute(sql, (thread_id,)).fetchone()[0] or 0)
        return {
            "checkpoints": one("SELECT count(*) FROM checkpoints WHERE thread_id = %s"),
            "blobs": one("SELECT count(*) FROM checkpoint_blobs WHERE thread_id = %s"),
            "writes": one("SELECT count(*) FROM checkpoint_writes WHERE thread_id = %s"),
            "bytes": one("SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_blobs WHERE thread_id = %s")
            + one("SELECT coalesce(sum(pg_column_size(checkpoint) + pg_column_size(metadata)), 0) "
                  "FROM checkpoints WHERE thread_id = %s")
            + one("SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_writes WHERE thread_id = %s"),
        }


def run(dsn: str, turns: int, keep: int) -> dict[str, Any]:
    pruned, kept_all = "pruned", "unpruned"
    rows: list[dict[str, Any]] = []
    prune_ms: list[float] = []
    with tempfile.TemporaryDirectory() as workdir, checkpoints.saver(dsn) as saver:
        graph = build_agent(SNAPSHOT, model=OneToolModel(), workdir=Path(workdir), checkpointer=saver)
        for turn in range(1, turns + 1):
            for thread_id in (pruned, kept_all):
                config = {"configurable": {"thread_id": thread_id}}
                out = graph.invoke({"messages": [HumanMessage(f"turn {turn}")]}, config, durability="sync")
                assert out["messages"][-1].content == f"Turn {turn} done: notes saved.", out["messages"][-1]
            started = time.perf_counter()
            checkpoints.prune(dsn, pruned, keep)
            prune_ms.append((time.perf_counter() - started) * 1000)
            if turn in REPORT_AT or turn == turns:
                rows.append({"turns": turn, "pruned": footprint(dsn, pruned), "unpruned": footprint(dsn, kept_all)})
        messages = len(graph.get_state({"configurable": {"thread_id": pruned}}).values["messages"])
    return {"by_turns": rows, "messages_in_pruned_thread": messages,
            "prune_ms": {"median": round(statistics.median(prune_ms), 1), "max": round(max(prune_ms), 1)}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--keep", type=int, default=20, help="checkpointRetention")
    args = parser.parse_args()
    name, dsn = create_database()
    try:
        checkpoints.setup(dsn)
        result = run(dsn, args.turns, args.keep)
    finally:
        drop_database(name)
    last = result["by_turns"][-1]["pruned"]
    ok = last["checkpoints"] <= args.keep
    print(json.dumps({"benchmark": "retention", "turns": args.turns, "keep": args.keep, **result, "ok": ok},
                     indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    with pgserver.database_url():
        sys.exit(main())

"""Cancellation cost against the number of parallel tool calls (prints JSON).

For each count N a real agent turn (real ``create_agent`` graph, real PostgresSaver,
``durability="sync"``) stops with N parallel calls: N-1 writes completed and one call
waiting for approval. The checkpoint-only graph then cleans the thread; we count the
checkpoints it commits (``put``) and the pending-write batches (``put_writes``), and time
the whole ``cleanup_thread`` (reads included). Targets: at most 3 commits always, and 64
calls in at most 250 ms.

    python bench/cancellation.py [--runs 5]      # DATABASE_URL selects the server
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.postgres import PostgresSaver

from sessionops.agent import build_agent
from sessionops.api.snapshot import ContextSnapshot
from sessionops.cancellation import checkpoint_graph, cleanup_thread
from sessionops.platform import checkpoints

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests import pgserver  # noqa: E402
from tests.stack import create_database, drop_database  # noqa: E402

COUNTS = (1, 2, 4, 8, 16, 32, 64)
MAX_COMMITS = 3
MAX_MS_AT_64 = 250.0
SNAPSHOT = ContextSnapshot(system_prompt="bench", model="bench", approval_mode="Default")


class ParallelCallsModel(BaseChatModel):
    """First answer: N-1 write_file calls and one run_shell call (which waits for approval)."""

    count: int

    @property
    def _llm_type(self) -> str:
        return "bench"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ParallelCallsModel:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        calls = [{"name": "write_file", "args": {"path": f"f{i}.txt", "content": "x"}, "id": f"call_{i}"}
                 for i in range(self.count - 1)]
        calls.append({"name": "run_shell", "args": {"command": "true"}, "id": f"call_{self.count - 1}"})
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="", tool_calls=calls, id="ai-0"))])


class CountingSaver(PostgresSaver):
    puts = 0
    put_writes_calls = 0

    def put(self, *args: Any, **kwargs: Any) -> Any:
        self.puts += 1
        return super().put(*args, **kwargs)

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        self.put_writes_calls += 1
        return super().put_writes(*args, **kwargs)


def measure(dsn: str, count: int, run: int) -> dict[str, Any]:
    config = {"configurable": {"thread_id": f"bench-{count}-{run}"}}
    with tempfile.TemporaryDirectory() as workdir, checkpoints.saver(dsn) as saver:
        graph = build_agent(SNAPSHOT, model=ParallelCallsModel(count=count), workdir=Path(workdir),
                            checkpointer=saver)
        out = graph.invoke({"messages": [HumanMessage("go")]}, config, durability="sync")
        assert len(out["__interrupt__"]) == 1
    with checkpoints.connect(dsn) as conn:
        saver = CountingSaver(conn)
        cleaner = checkpoint_graph(SNAPSHOT, saver)
        started = time.perf_counter()
        report = cleanup_thread(cleaner, config)
        elapsed_ms = (time.perf_counter() - started) * 1000
        assert saver.puts == report.commits
        return {"commits": report.commits, "put_writes": saver.put_writes_calls, "ms": elapsed_ms}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="cleanups measured per call count")
    args = parser.parse_args()
    name, dsn = create_database()
    try:
        checkpoints.setup(dsn)
        with psycopg.connect(dsn) as conn:
            server = conn.execute("SHOW server_version").fetchone()[0]
        measure(dsn, 2, -1)  # warm-up: imports, connections, plans
        results = []
        for count in COUNTS:
            runs = [measure(dsn, count, run) for run in range(args.runs)]
            times = sorted(r["ms"] for r in runs)
            results.append({
                "parallel_calls": count,
                "commits": max(r["commits"] for r in runs),
                "put_writes": max(r["put_writes"] for r in runs),
                "latency_ms": {"median": round(statistics.median(times), 1), "max": round(times[-1], 1)},
            })
    finally:
        drop_database(name)
    at_64 = next(r for r in results if r["parallel_calls"] == 64)
    ok = all(r["commits"] <= MAX_COMMITS for r in results) and at_64["latency_ms"]["median"] <= MAX_MS_AT_64
    print(json.dumps({
        "benchmark": "cancellation", "runs_per_count": args.runs, "postgres": server,
        "langgraph": version("langgraph"), "langgraph_checkpoint_postgres": version("langgraph-checkpoint-postgres"),
        "targets": {"max_commits": MAX_COMMITS, "max_median_ms_at_64_calls": MAX_MS_AT_64},
        "results": results, "ok": ok,
    }, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    with pgserver.database_url():
        sys.exit(main())

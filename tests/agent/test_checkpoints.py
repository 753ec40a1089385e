"""Checkpointer helpers against real PostgreSQL: set-up, thread deletion, retention."""

from __future__ import annotations

import psycopg
import pytest
from langchain_core.messages import AIMessage

from sessionops.agent import build_agent
from sessionops.platform import checkpoints
from tests.agent.harness import say, snapshot, thread
from tests.agent.pg import create_database, drop_database, server_url
from tests.agent.scripted import ScriptedChatModel


def rows(dsn: str, table: str, thread_id: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute(f"SELECT count(*) FROM {table} WHERE thread_id = %s", (thread_id,)).fetchone()[0]


def conversation(saver, workdir, thread_id: str, turns: int = 3):
    model = ScriptedChatModel(script=[[("list_files", {})], "a", [("list_files", {})], "b", "c", "d"])
    graph = build_agent(snapshot(), model=model, workdir=workdir, checkpointer=saver)
    for i in range(turns):
        say(graph, f"turn {i}", thread(thread_id))
    return graph, model


def test_setup_creates_the_schema_once_and_can_be_repeated():
    name = create_database()
    try:
        dsn = server_url(name)
        checkpoints.setup(dsn)
        checkpoints.setup(dsn)
        with psycopg.connect(dsn) as conn:
            tables = {r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()}
        assert {"checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations"} <= tables
    finally:
        drop_database(name)


def test_deleting_a_thread_removes_only_its_rows(pg_dsn, workdir):
    with checkpoints.saver(pg_dsn) as saver:
        conversation(saver, workdir, "keep", turns=1)
        conversation(saver, workdir, "drop", turns=1)
    checkpoints.delete_thread(pg_dsn, "drop")
    checkpoints.delete_thread(pg_dsn, "drop")
    for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
        assert rows(pg_dsn, table, "drop") == 0
    assert rows(pg_dsn, "checkpoints", "keep") > 0


def test_prune_keeps_the_latest_checkpoints_and_the_thread_goes_on(pg_dsn, workdir):
    with checkpoints.saver(pg_dsn) as saver:
        graph, model = conversation(saver, workdir, "t1", turns=2)
        conversation(saver, workdir, "other", turns=1)
        before = graph.get_state(thread("t1")).values
        total = rows(pg_dsn, "checkpoints", "t1")
        other = rows(pg_dsn, "checkpoints", "other"), rows(pg_dsn, "checkpoint_blobs", "other")
        blobs = rows(pg_dsn, "checkpoint_blobs", "t1")

        assert checkpoints.prune(pg_dsn, "t1", keep=3) == total - 3
        assert rows(pg_dsn, "checkpoints", "t1") == 3
        assert rows(pg_dsn, "checkpoint_blobs", "t1") < blobs
        assert (rows(pg_dsn, "checkpoints", "other"), rows(pg_dsn, "checkpoint_blobs", "other")) == other
        assert checkpoints.prune(pg_dsn, "t1", keep=3) == 0

        # The kept state is whole (every blob it names survived) and the thread continues.
        assert graph.get_state(thread("t1")).values == before
        out = say(graph, "one more", thread("t1"))
        assert isinstance(out["messages"][-1], AIMessage) and len(out["messages"]) == len(before["messages"]) + 2


async def test_async_helpers_prune_and_delete(pg_dsn, workdir):
    with checkpoints.saver(pg_dsn) as saver:
        conversation(saver, workdir, "t2", turns=1)
    assert await checkpoints.aprune(pg_dsn, "t2", keep=1) > 0
    assert rows(pg_dsn, "checkpoints", "t2") == 1
    await checkpoints.adelete_thread(pg_dsn, "t2")
    assert rows(pg_dsn, "checkpoints", "t2") == 0


def test_prune_refuses_to_keep_nothing(pg_dsn):
    with pytest.raises(ValueError, match="at least 1"):
        checkpoints.prune(pg_dsn, "t", keep=0)

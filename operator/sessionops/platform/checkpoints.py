"""The PostgreSQL checkpointer: connections, schema set-up, thread deletion, retention.

The saver's tables (langgraph-checkpoint-postgres 3.x): ``checkpoints`` (one row per
checkpoint, ``checkpoint_id`` sorts by time, ``checkpoint.channel_versions`` names the
blob version of each channel), ``checkpoint_blobs`` (channel values by version, shared
by consecutive checkpoints), ``checkpoint_writes`` (pending writes of tasks, by
checkpoint) and ``checkpoint_migrations``. They live in one schema per worker namespace
(``checkpoint_scope``), chosen by the DSN's ``search_path``. Workers never run ``setup()``:
the operator does, once per schema.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row

DatabaseError = psycopg.Error
"""Any failure of the database (connection, query, transaction): what callers outside the
platform catch instead of importing the driver."""

CONNECTION_KWARGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
"""What the savers require: autocommit (each write is durable on its own), no prepared
statements (poolers such as PgBouncer), rows as dicts."""


def connect(dsn: str) -> psycopg.Connection:
    return psycopg.Connection.connect(dsn, **CONNECTION_KWARGS)


async def aconnect(dsn: str) -> psycopg.AsyncConnection:
    return await psycopg.AsyncConnection.connect(dsn, **CONNECTION_KWARGS)


@contextmanager
def saver(dsn: str) -> Iterator[PostgresSaver]:
    """A ``PostgresSaver`` on its own connection (closed on exit)."""
    with connect(dsn) as conn:
        yield PostgresSaver(conn)


@asynccontextmanager
async def async_saver(dsn: str) -> AsyncIterator[AsyncPostgresSaver]:
    async with await aconnect(dsn) as conn:
        yield AsyncPostgresSaver(conn)


def setup(dsn: str) -> None:
    """Creates or migrates the saver's tables. Repeating is safe: migrations are versioned."""
    with saver(dsn) as s:
        s.setup()


async def asetup(dsn: str) -> None:
    async with async_saver(dsn) as s:
        await s.setup()


def delete_thread(dsn: str, thread_id: str) -> None:
    """Deletes every checkpoint, blob and write of the thread. Repeating is safe (no rows, no-op)."""
    with saver(dsn) as s:
        s.delete_thread(thread_id)


async def adelete_thread(dsn: str, thread_id: str) -> None:
    async with async_saver(dsn) as s:
        await s.adelete_thread(thread_id)


# Retention runs in one REPEATABLE READ transaction: a worker saving meanwhile is
# neither seen nor deleted (its new rows are invisible to the snapshot), and a blob is
# deleted only when a deleted checkpoint used it and no visible checkpoint does (a new
# checkpoint's unchanged channels share the latest kept checkpoint's versions, and its
# changed ones are new versions no deleted checkpoint used).
_PRUNE_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
_PRUNE_KEPT = """
SELECT checkpoint_ns, array_agg(checkpoint_id) AS kept FROM (
    SELECT checkpoint_ns, checkpoint_id,
           row_number() OVER (PARTITION BY checkpoint_ns ORDER BY checkpoint_id DESC) AS rank
    FROM checkpoints WHERE thread_id = %s
) AS ranked
WHERE rank <= %s
GROUP BY checkpoint_ns
"""
_PRUNE_CHECKPOINTS = """
DELETE FROM checkpoints
WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id <> ALL(%s)
RETURNING checkpoint_id, checkpoint -> 'channel_versions' AS versions
"""
_PRUNE_WRITES = """
DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = ANY(%s)
"""
_PRUNE_PARENTS = """
UPDATE checkpoints SET parent_checkpoint_id = NULL
WHERE thread_id = %s AND checkpoint_ns = %s AND parent_checkpoint_id = ANY(%s)
"""
_PRUNE_REFERENCED = """
SELECT DISTINCT v.key AS channel, v.value AS version
FROM checkpoints c CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') AS v
WHERE c.thread_id = %s AND c.checkpoint_ns = %s
"""
_PRUNE_BLOBS = """
DELETE FROM checkpoint_blobs WHERE thread_id = %s AND checkpoint_ns = %s AND channel = %s AND version = ANY(%s)
"""

_Statements = Generator[tuple[str, Sequence[Any], bool], list[dict[str, Any]], int]


def _prune_statements(thread_id: str, keep: int) -> _Statements:
    """The retention transaction as statements; returns how many checkpoints it deletes."""
    yield _PRUNE_SNAPSHOT, (), False
    deleted_total = 0
    for row in (yield _PRUNE_KEPT, (thread_id, keep), True):
        ns, kept = row["checkpoint_ns"], row["kept"]
        deleted = yield _PRUNE_CHECKPOINTS, (thread_id, ns, kept), True
        if not deleted:
            continue
        deleted_ids = [r["checkpoint_id"] for r in deleted]
        deleted_total += len(deleted_ids)
        yield _PRUNE_WRITES, (thread_id, ns, deleted_ids), False
        yield _PRUNE_PARENTS, (thread_id, ns, deleted_ids), False
        referenced = {(r["channel"], r["version"]) for r in (yield _PRUNE_REFERENCED, (thread_id, ns), True)}
        garbage: dict[str, set[str]] = {}
        for r in deleted:
            for channel, version in (r["versions"] or {}).items():
                if (channel, str(version)) not in referenced:
                    garbage.setdefault(channel, set()).add(str(version))
        for channel, versions in sorted(garbage.items()):
            yield _PRUNE_BLOBS, (thread_id, ns, channel, sorted(versions)), False
    return deleted_total


def prune(dsn: str, thread_id: str, keep: int) -> int:
    """Keeps the latest ``keep`` checkpoints of each namespace of the thread; returns how many
    it deleted. Repeating is safe: a second run finds nothing beyond ``keep``. A concurrent
    prune of the same thread may fail with a serialization error; retry it."""
    if keep < 1:
        raise ValueError("keep must be at least 1: the latest checkpoint is the thread's state")
    statements = _prune_statements(str(thread_id), keep)
    with connect(dsn) as conn, conn.transaction(), conn.cursor() as cur:
        try:
            sql, params, fetch = next(statements)
            while True:
                cur.execute(sql, params, prepare=False)
                sql, params, fetch = statements.send(cur.fetchall() if fetch else [])
        except StopIteration as done:
            return done.value


async def aprune(dsn: str, thread_id: str, keep: int) -> int:
    if keep < 1:
        raise ValueError("keep must be at least 1: the latest checkpoint is the thread's state")
    statements = _prune_statements(str(thread_id), keep)
    async with await aconnect(dsn) as conn, conn.transaction(), conn.cursor() as cur:
        try:
            sql, params, fetch = next(statements)
            while True:
                await cur.execute(sql, params, prepare=False)
                sql, params, fetch = statements.send(await cur.fetchall() if fetch else [])
        except StopIteration as done:
            return done.value

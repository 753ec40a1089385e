"""A worker's database credential opens only its own namespace's checkpoints (real PostgreSQL,
password authentication for the worker roles: tests/pgserver.py); the operator's admin
credential still reaches every namespace for cancellation cleanup and session deletion."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from sessionops.agent import build_agent
from sessionops.cancellation import CANCEL_CONTENT, checkpoint_graph
from sessionops.cancellation.reconcile import clean_thread
from sessionops.platform import checkpoint_scope, checkpoints
from tests.agent.harness import say, thread
from tests.agent.pg import create_database, drop_database, server_url
from tests.agent.scripted import ScriptedChatModel
from tests.cancellation.test_cleanup import SNAP, parallel_calls, waiting_run

pytestmark = pytest.mark.integration


@pytest.fixture
def db() -> Iterator[str]:
    """An empty database: nothing but what provisioning creates."""
    name = create_database()
    try:
        yield server_url(name)
    finally:
        drop_database(name)


def provision(admin: str, namespace: str) -> tuple[checkpoint_scope.Scope, str]:
    scope = checkpoint_scope.scope_of(namespace, checkpoint_scope.database_of(admin))
    password = secrets.token_urlsafe(24)
    checkpoint_scope.provision(admin, scope, password=password)
    return scope, checkpoint_scope.role_dsn(admin, scope, password)


def put(dsn: str, thread_id: str, text: str, workdir: Path) -> None:
    """A turn of ``thread_id`` checkpointed through ``dsn`` (as a worker writes it)."""
    with checkpoints.saver(dsn) as saver:
        graph = build_agent(SNAP, model=ScriptedChatModel(script=[text]), workdir=workdir, checkpointer=saver)
        say(graph, "hello", thread(thread_id))


def messages(dsn: str, thread_id: str) -> list[str]:
    with checkpoints.saver(dsn) as saver:
        state = checkpoint_graph(SNAP, saver).get_state(thread(thread_id))
    return [str(m.content) for m in (state.values or {}).get("messages", [])]


def test_a_worker_credential_for_a_cannot_read_write_or_list_b_while_the_admin_reaches_both(
        db: str, workdir: Path) -> None:
    scope_a, worker_a = provision(db, "team-a")
    scope_b, worker_b = provision(db, "team-b")
    assert scope_a.schema != scope_b.schema and scope_a.role != scope_b.role
    put(worker_a, "thread-a", "secret plan of team a", workdir)
    put(worker_b, "thread-b", "secret plan of team b", workdir)
    assert messages(worker_a, "thread-a") == ["hello", "secret plan of team a"]

    # The saver of A's worker sees only A's schema: B's thread does not exist there.
    assert messages(worker_a, "thread-b") == []
    with checkpoints.saver(worker_a) as saver:
        assert {c.config["configurable"]["thread_id"] for c in saver.list(None)} == {"thread-a"}

    # Naming B's schema outright: no read, no write, no listing, no creating.
    qualified = f'"{scope_b.schema}".checkpoints'
    refused = [
        f"SELECT * FROM {qualified}",
        f"INSERT INTO {qualified} (thread_id, checkpoint_ns, checkpoint_id, checkpoint, metadata) "
        "VALUES ('x', '', 'x', '{}', '{}')",
        f"DELETE FROM {qualified}",
        f"SELECT count(*) FROM \"{scope_b.schema}\".checkpoint_blobs",
        f'CREATE TABLE "{scope_b.schema}".planted (x int)',
        f'CREATE TABLE "{scope_a.schema}".planted (x int)',  # not even in its own schema (DML only)
        "CREATE TABLE public.planted (x int)",
        "CREATE SCHEMA planted",
        f"SET ROLE {scope_b.role}",
    ]
    with psycopg.connect(worker_a, autocommit=True) as conn:
        for statement in refused:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        # information_schema lists only what the role may use: B's tables are invisible.
        listed = conn.execute("SELECT table_schema FROM information_schema.tables "
                              "WHERE table_name = 'checkpoints'").fetchall()
        assert listed == [(scope_a.schema,)]

    # B's credential with A's password, or A's role with B's password: refused at login.
    a_info, b_info = conninfo_to_dict(worker_a), conninfo_to_dict(worker_b)
    for user, password in ((scope_b.role, a_info["password"]), (scope_a.role, b_info["password"])):
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(make_conninfo(**{**a_info, "user": user, "password": password})).close()

    # The admin path (the operator's scoped admin DSN) reaches both namespaces.
    admin_a, admin_b = checkpoint_scope.scoped(db, scope_a.schema), checkpoint_scope.scoped(db, scope_b.schema)
    assert messages(admin_a, "thread-a") == ["hello", "secret plan of team a"]
    assert messages(admin_b, "thread-b") == ["hello", "secret plan of team b"]


def test_cancellation_cleanup_and_session_deletion_reach_each_namespace_with_the_admin_credential(
        db: str, workdir: Path) -> None:
    scope_a, worker_a = provision(db, "team-a")
    scope_b, worker_b = provision(db, "team-b")
    for worker in (worker_a, worker_b):  # the same thread id in both namespaces, both waiting
        with checkpoints.saver(worker) as saver:
            waiting_run(saver, workdir, parallel_calls(2), config=thread("t1"))
    admin_a, admin_b = checkpoint_scope.scoped(db, scope_a.schema), checkpoint_scope.scoped(db, scope_b.schema)
    assert clean_thread(admin_a, SNAP.dump(), "t1").commits == 3
    assert messages(worker_a, "t1")[-1] == CANCEL_CONTENT
    with checkpoints.saver(worker_b) as saver:  # B's thread is as it was
        assert checkpoint_graph(SNAP, saver).get_state(thread("t1")).interrupts
    assert clean_thread(admin_b, SNAP.dump(), "t1").commits == 3
    # Session deletion in B deletes B's thread only.
    checkpoints.delete_thread(admin_b, "t1")
    assert messages(worker_b, "t1") == []
    assert messages(worker_a, "t1")[-1] == CANCEL_CONTENT


def test_provisioning_is_idempotent_and_keeps_the_password_unless_told(db: str, workdir: Path) -> None:
    started = time.perf_counter()
    scope, worker = provision(db, "team-a")
    first = time.perf_counter() - started
    put(worker, "t", "kept", workdir)
    started = time.perf_counter()
    checkpoint_scope.provision(db, scope, password=None)  # a second operator pass
    again = time.perf_counter() - started
    assert messages(worker, "t") == ["hello", "kept"] and checkpoint_scope.authenticates(worker)
    rotated = checkpoint_scope.role_dsn(db, scope, "another-password")
    checkpoint_scope.provision(db, scope, password="another-password")
    assert not checkpoint_scope.authenticates(worker) and checkpoint_scope.authenticates(rotated)
    assert messages(rotated, "t") == ["hello", "kept"]
    print(f"provisioning a namespace took {first * 1000:.0f} ms, again {again * 1000:.0f} ms")


def test_names_fit_postgresql_identifiers_and_differ_per_database() -> None:
    long_ns = "n" * 63
    scope = checkpoint_scope.scope_of(long_ns, "db1")
    assert len(scope.schema) <= 63 and len(scope.role) <= 63
    assert scope.role.startswith(checkpoint_scope.role_prefix("db1"))
    assert checkpoint_scope.scope_of("team-a", "db1").schema == "sessionops_team_a"
    assert checkpoint_scope.scope_of("team-a", "db1").role != checkpoint_scope.scope_of("team-a", "db2").role
    assert checkpoint_scope.scope_of(long_ns, "db1") != checkpoint_scope.scope_of(long_ns[:-1] + "m", "db1")

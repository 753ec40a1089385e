"""Real PostgreSQL for graph tests: one database per test, cloned from a set-up template.

The server is ``DATABASE_URL`` (the user's, or the run's embedded one: ``tests/conftest.py``). A template
database with the saver's schema is created once per session; each test gets
``CREATE DATABASE t_<uuid> TEMPLATE ...`` (a file copy: ~40 ms, no migrations) and
drops it afterwards. Import the fixtures into a ``conftest.py`` to use them.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from sessionops.platform import checkpoint_scope, checkpoints
from tests.stack import admin_dsn


def server_url(dbname: str) -> str:
    params = conninfo_to_dict(admin_dsn())
    params["dbname"] = dbname
    return make_conninfo(**params)


def _admin(sql: str) -> None:
    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        conn.execute(sql)


def create_database(template: str | None = None) -> str:
    name = f"t_{uuid.uuid4().hex[:16]}"
    _admin(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    return name


def drop_database(name: str) -> None:
    _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    drop_roles(name)


def drop_roles(database: str) -> None:
    """The per-namespace roles of ``database`` (roles outlive a dropped database: they are the server's)."""
    with psycopg.connect(server_url("postgres"), autocommit=True) as conn:
        for row in conn.execute("SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s)",
                                (checkpoint_scope.role_prefix(database),)).fetchall():
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(row[0])))


def provision_namespace(dsn: str, namespace: str) -> tuple[str, str]:
    """As the operator: the namespace's schema, tables and role in ``dsn``'s database.
    Returns (the role's DSN as workers get it, the admin DSN on that schema)."""
    scope = checkpoint_scope.scope_of(namespace, checkpoint_scope.database_of(dsn))
    password = secrets.token_urlsafe(24)
    checkpoint_scope.provision(dsn, scope, password=password)
    return checkpoint_scope.role_dsn(dsn, scope, password), checkpoint_scope.scoped(dsn, scope.schema)


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    name = create_database()
    try:
        checkpoints.setup(server_url(name))
        yield name
    finally:
        drop_database(name)


@pytest.fixture
def pg_dsn(pg_template: str) -> Iterator[str]:
    """A fresh database with the checkpointer schema, dropped after the test."""
    name = create_database(template=pg_template)
    try:
        yield server_url(name)
    finally:
        drop_database(name)


@pytest.fixture
def saver(pg_dsn: str) -> Iterator[checkpoints.PostgresSaver]:
    with checkpoints.saver(pg_dsn) as s:
        yield s

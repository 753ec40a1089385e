"""One checkpoint schema and one database role per worker namespace (PostgreSQL side).

A worker's DSN opens only its namespace's schema: the role has ``USAGE`` on that schema
and DML on its tables, nothing else (no ``CREATE`` anywhere, no other schema, ``PUBLIC``
rights revoked). The operator keeps the admin DSN: it creates schemas, roles and the
saver's tables, and reaches every schema for cancellation cleanup and session deletion
through ``scoped(admin_dsn, schema)``.

Names (both at most 63 bytes, PostgreSQL's identifier limit):

- schema ``sessionops_<namespace>`` (``-`` -> ``_``), per database;
- role ``sessionops_<db hash>_<namespace>``: roles are global to a PostgreSQL server, so
  the database's name is part of it (two installations on one server never share a role).

Longer names are cut and end in a hash of the whole, so they stay unique.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from sessionops.platform import checkpoints

PREFIX = "sessionops_"
_MAX_IDENT = 63
_UNSAFE = re.compile(r"[^a-z0-9_]")


@dataclasses.dataclass(frozen=True)
class Scope:
    namespace: str
    schema: str
    role: str


def _digest(text: str, n: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def _ident(name: str) -> str:
    """A lower-case identifier of at most 63 bytes; a cut name ends in a hash of the whole."""
    safe = _UNSAFE.sub("_", name.lower())
    if len(safe) <= _MAX_IDENT:
        return safe
    return f"{safe[:_MAX_IDENT - 9]}_{_digest(name)}"


def database_of(dsn: str) -> str:
    """The database ``dsn`` names (PostgreSQL's default: the user's name)."""
    info = conninfo_to_dict(dsn)
    return info.get("dbname") or info.get("user") or "postgres"


def role_prefix(database: str) -> str:
    """What every role of ``database`` starts with (to find them when the database goes)."""
    return f"{PREFIX}{_digest(database)}_"


def scope_of(namespace: str, database: str) -> Scope:
    """Pure: the schema and role of a worker namespace in ``database``."""
    return Scope(namespace, _ident(PREFIX + namespace), _ident(role_prefix(database) + namespace))


def scoped(dsn: str, schema: str) -> str:
    """``dsn`` whose sessions see only ``schema`` (``search_path``): the saver's unqualified
    table names then resolve there. Other connection options of ``dsn`` are kept."""
    info = conninfo_to_dict(dsn)
    options = re.sub(r"-c\s*search_path=\S+", "", info.get("options") or "").strip()
    info["options"] = f"{options} -c search_path={schema}".strip()
    return make_conninfo(**info)


def role_dsn(admin_dsn: str, scope: Scope, password: str) -> str:
    """The worker's DSN: the admin DSN's host, port, database and TLS settings, the namespace's
    role and password, and its schema as the only search path."""
    info = conninfo_to_dict(admin_dsn)
    info.update(user=scope.role, password=password)
    return scoped(make_conninfo(**info), scope.schema)


def user_of(dsn: str) -> str | None:
    try:
        return conninfo_to_dict(dsn).get("user")
    except psycopg.ProgrammingError:  # not a DSN at all
        return None


def authenticates(dsn: str) -> bool:
    """Whether ``dsn`` logs in (its password is current). Any other failure is raised."""
    try:
        with psycopg.connect(dsn, connect_timeout=10):
            return True
    except psycopg.OperationalError as e:
        if "authentication failed" in str(e) or "password" in str(e):
            return False
        raise


def _exists(conn: psycopg.Connection, query: str, name: str) -> bool:
    return conn.execute(query, (name,)).fetchone() is not None


def provision(admin_dsn: str, scope: Scope, *, password: str | None, connection_limit: int = -1,
              manage_role: bool = True) -> None:
    """Creates (or completes) the namespace's schema, the saver's tables in it, and its role
    with exactly DML on those tables. ``password``: set it (new role or rotation); None keeps
    the role's current one. ``manage_role=False``: the role is pre-provisioned by a DBA; only
    the schema's tables and the table grants are the operator's.

    Repeating is safe: every statement checks or is idempotent (IF NOT EXISTS, GRANT/REVOKE,
    ALTER to the same values), and the saver's migrations are versioned."""
    schema, role = sql.Identifier(scope.schema), sql.Identifier(scope.role)
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        database = sql.Identifier(conn.info.dbname)
        if not _exists(conn, "SELECT 1 FROM pg_namespace WHERE nspname = %s", scope.schema):
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
        # A schema created by the admin gives PUBLIC nothing; revoking says so explicitly and
        # undoes any grant a DBA's default privileges may have added.
        conn.execute(sql.SQL("REVOKE ALL ON SCHEMA {} FROM PUBLIC").format(schema))
        if manage_role:
            limit = sql.Literal(connection_limit)
            attributes = sql.SQL("LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS "
                                 "CONNECTION LIMIT {}").format(limit)
            if not _exists(conn, "SELECT 1 FROM pg_roles WHERE rolname = %s", scope.role):
                conn.execute(sql.SQL("CREATE ROLE {} {}").format(role, attributes))
            else:
                conn.execute(sql.SQL("ALTER ROLE {} {}").format(role, attributes))
            if password is not None:
                conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(role, sql.Literal(password)))
            conn.execute(sql.SQL("ALTER ROLE {} IN DATABASE {} SET search_path = {}").format(role, database, schema))
            conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(database, role))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, role))
    checkpoints.setup(scoped(admin_dsn, scope.schema))
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA {} FROM PUBLIC").format(schema))
        conn.execute(sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {} TO {}")
                     .format(schema, role))


def revoke_public_create(admin_dsn: str) -> bool:
    """``REVOKE CREATE ON SCHEMA public FROM PUBLIC`` (PostgreSQL before 15 grants it): no worker
    role may create objects outside its schema. Needs ownership of ``public``; False when the
    admin credential lacks it (the DBA then does it once, docs/database.md)."""
    try:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        return True
    except psycopg.errors.InsufficientPrivilege:
        return False

"""The operator's side of a namespace's database credential (real PostgreSQL, Secrets in memory):
written once, kept while it logs in, rotated when it does not, never over a Secret not ours."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from sessionops.api.config import OperatorConfig
from sessionops.execution.credentials import CredentialError, NamespaceCredentials
from sessionops.platform import checkpoint_scope
from tests.agent.pg import create_database, drop_database, server_url

pytestmark = pytest.mark.integration

CONFIG = OperatorConfig.model_validate({"defaults": {"model": "m"}, "models": [
    {"name": "m", "provider": "replay", "model": "m"}]})
NAME = CONFIG.worker.database_secret.name


class Secrets:
    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes = 0

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.stored.get((namespace, name))

    async def put_secret(self, namespace: str, body: dict[str, Any]) -> None:
        self.writes += 1
        self.stored[(namespace, body["metadata"]["name"])] = body

    def dsn(self, namespace: str) -> str:
        return base64.b64decode(self.stored[(namespace, NAME)]["data"]["dsn"]).decode()


@pytest.fixture
def db() -> Iterator[str]:
    name = create_database()
    try:
        yield server_url(name)
    finally:
        drop_database(name)


async def test_written_once_kept_while_it_logs_in_rotated_when_it_does_not(db: str) -> None:
    kube, creds = Secrets(), NamespaceCredentials(db)
    await creds.ensure(kube, CONFIG, "team-a")  # type: ignore[arg-type]
    first = kube.dsn("team-a")
    scope = creds.scope("team-a")
    assert checkpoint_scope.user_of(first) == scope.role and checkpoint_scope.authenticates(first)
    assert kube.stored[("team-a", NAME)]["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "sessionops"
    await creds.ensure(kube, CONFIG, "team-a")  # type: ignore[arg-type]  # cached: nothing at all
    creds.forget("team-a")
    await creds.ensure(kube, CONFIG, "team-a")  # type: ignore[arg-type]  # rechecked: still logs in
    assert (kube.writes, kube.dsn("team-a"), creds.provisioned) == (1, first, 2)

    with psycopg.connect(db, autocommit=True) as conn:  # a DBA resets the role's password
        conn.execute(psycopg.sql.SQL("ALTER ROLE {} PASSWORD 'reset'").format(psycopg.sql.Identifier(scope.role)))
    assert not checkpoint_scope.authenticates(first)
    creds.forget("team-a")
    await creds.ensure(kube, CONFIG, "team-a")  # type: ignore[arg-type]
    assert kube.writes == 2 and kube.dsn("team-a") != first and checkpoint_scope.authenticates(kube.dsn("team-a"))


async def test_a_secret_of_that_name_not_written_by_the_operator_is_never_overwritten(db: str) -> None:
    kube, creds = Secrets(), NamespaceCredentials(db)
    kube.stored[("team-a", NAME)] = {"metadata": {"name": NAME, "labels": {}},
                                     "data": {"dsn": base64.b64encode(db.encode()).decode()}}
    with pytest.raises(CredentialError, match=f"Secret {NAME} exists and was not written by the operator"):
        await creds.ensure(kube, CONFIG, "team-a")  # type: ignore[arg-type]
    assert kube.writes == 0 and kube.dsn("team-a") == db
    # Until the retry delay passes, the failure is reported from memory (no SQL per scan pass) ...
    del kube.stored[("team-a", NAME)]
    with pytest.raises(CredentialError, match="was not written by the operator"):
        await creds.ensure(kube, CONFIG, "team-a")  # type: ignore[arg-type]
    # ... and once it is retried, the repaired namespace gets its credential.
    creds.forget("team-a")
    await creds.ensure(kube, CONFIG, "team-a")  # type: ignore[arg-type]
    assert kube.writes == 1 and checkpoint_scope.user_of(kube.dsn("team-a")) == creds.scope("team-a").role


async def test_a_secret_holding_another_user_is_replaced_by_the_namespace_role(db: str) -> None:
    """Ours by label, but with the admin's DSN (an old install copied it): replaced, never kept."""
    kube, creds = Secrets(), NamespaceCredentials(db)
    kube.stored[("team-a", NAME)] = {"metadata": {"name": NAME, "labels": {"app.kubernetes.io/managed-by": "sessionops"}},
                                     "data": {"dsn": base64.b64encode(db.encode()).decode()}}
    await creds.ensure(kube, CONFIG, "team-a")  # type: ignore[arg-type]
    assert checkpoint_scope.user_of(kube.dsn("team-a")) == creds.scope("team-a").role


async def test_a_provisioning_failure_names_the_schema_role_and_namespace() -> None:
    creds = NamespaceCredentials("host=127.0.0.1 port=1 user=nobody dbname=none connect_timeout=2")
    with pytest.raises(CredentialError) as raised:
        await creds.ensure(Secrets(), CONFIG, "team-a")  # type: ignore[arg-type]
    assert "sessionops_team_a" in str(raised.value) and "namespace team-a" in str(raised.value)

"""The namespace's database credential: its schema, its role and the Secret worker pods mount.

Before the first Job of a worker namespace (and again after ``RECHECK_SECONDS``) the operator,
with the admin DSN, makes sure of the namespace's schema, tables and role
(``checkpoint_scope.provision``) and of the Secret ``config.worker.databaseSecret`` holding
that role's DSN. The password is random and changes only when needed: the Secret is missing,
is not ours (another user in its DSN), or its password no longer logs in. Between checks a
segment costs nothing here (a dict look-up).

Safe to repeat: provisioning is idempotent, and the Secret is written only when it would
not work as it is.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
import time
from typing import Any

from sessionops.api.config import OperatorConfig
from sessionops.platform import checkpoint_scope
from sessionops.platform.kube import Kube
from sessionops.platform.locks import lock

logger = logging.getLogger(__name__)

RECHECK_SECONDS = 300.0
"""How long a namespace's credential counts as checked: a Secret deleted by hand or a role
dropped by a DBA is repaired within this time."""
FAILED_RETRY_SECONDS = 10.0
"""A failed check is reported again from memory for this long: the recovery scan visits every
pending run of the namespace every few seconds, and each would otherwise repeat the SQL."""
MANAGED_BY = "sessionops"
ROLE_ANNOTATION = "sessionops.dev/database-role"


class CredentialError(RuntimeError):
    """The namespace's credential could not be made (the message says which step and why)."""


class NamespaceCredentials:
    """Per operator process: which namespaces were checked, and when."""

    def __init__(self, admin_dsn: str, *, recheck_seconds: float = RECHECK_SECONDS) -> None:
        self.admin_dsn = admin_dsn
        self.database = checkpoint_scope.database_of(admin_dsn)
        self.recheck_seconds = recheck_seconds
        self._checked: dict[str, float] = {}
        self._failed: dict[str, tuple[float, CredentialError]] = {}
        self.provisioned = 0
        """How many full checks ran (for tests and benchmarks)."""

    def scope(self, namespace: str) -> checkpoint_scope.Scope:
        return checkpoint_scope.scope_of(namespace, self.database)

    def admin_dsn_for(self, namespace: str) -> str:
        """The admin DSN seeing only the namespace's schema: cleanup and deletion use it."""
        return checkpoint_scope.scoped(self.admin_dsn, self.scope(namespace).schema)

    def forget(self, namespace: str) -> None:
        self._checked.pop(namespace, None)
        self._failed.pop(namespace, None)

    async def ensure(self, kube: Kube, config: OperatorConfig, namespace: str) -> None:
        if time.monotonic() - self._checked.get(namespace, -1e18) < self.recheck_seconds:
            return
        async with lock("credentials", namespace, ""):
            if time.monotonic() - self._checked.get(namespace, -1e18) < self.recheck_seconds:
                return
            failed = self._failed.get(namespace)
            if failed is not None and time.monotonic() - failed[0] < FAILED_RETRY_SECONDS:
                raise failed[1]
            try:
                await self._ensure(kube, config, namespace)
            except CredentialError as e:
                self._failed[namespace] = (time.monotonic(), e)
                raise
            self._failed.pop(namespace, None)
            self._checked[namespace] = time.monotonic()
            self.provisioned += 1

    async def _ensure(self, kube: Kube, config: OperatorConfig, namespace: str) -> None:
        scope = self.scope(namespace)
        ref = config.worker.database_secret
        manage = config.worker.manage_database_roles
        limit = config.worker.database_connection_limit
        if not manage:
            await self._provision(scope, None, limit, manage=False)
            return
        stored = await kube.get_secret(namespace, ref.name)
        labels = ((stored or {}).get("metadata") or {}).get("labels") or {}
        if stored is not None and labels.get("app.kubernetes.io/managed-by") != MANAGED_BY:
            raise CredentialError(f"namespace {namespace}: Secret {ref.name} exists and was not written by the "
                                  "operator (label app.kubernetes.io/managed-by=sessionops); it is never "
                                  "overwritten: delete it, or set worker.databaseSecret to another name")
        current = _secret_dsn(stored, ref.key)
        if current is not None and checkpoint_scope.user_of(current) == scope.role:
            # The role first (its password untouched): the login check needs it.
            await self._provision(scope, None, limit, manage=True)
            if await asyncio.to_thread(checkpoint_scope.authenticates, current):
                return
        password = secrets.token_urlsafe(32)
        await self._provision(scope, password, limit, manage=True)
        dsn = checkpoint_scope.role_dsn(self.admin_dsn, scope, password)
        await kube.put_secret(namespace, _secret_body(namespace, ref.name, ref.key, dsn, scope.role))
        logger.info("namespace %s: database role %s has a new password in Secret %s", namespace, scope.role,
                    ref.name)

    async def _provision(self, scope: checkpoint_scope.Scope, password: str | None, limit: int, *,
                         manage: bool) -> None:
        try:
            await asyncio.to_thread(checkpoint_scope.provision, self.admin_dsn, scope, password=password,
                                    connection_limit=limit, manage_role=manage)
        except Exception as e:  # psycopg's messages name the statement's object, never a password
            raise CredentialError(f"database schema {scope.schema} / role {scope.role} for namespace "
                                  f"{scope.namespace}: {type(e).__name__}: {str(e).strip()}") from e


def _secret_dsn(secret: dict[str, Any] | None, key: str) -> str | None:
    raw = ((secret or {}).get("data") or {}).get(key)
    if not raw:
        return None
    try:
        return base64.b64decode(raw).decode()
    except ValueError:
        return None


def _secret_body(namespace: str, name: str, key: str, dsn: str, role: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": MANAGED_BY,
                                    "app.kubernetes.io/component": "worker-database"},
                         "annotations": {ROLE_ANNOTATION: role}},
            "data": {key: base64.b64encode(dsn.encode()).decode()}}

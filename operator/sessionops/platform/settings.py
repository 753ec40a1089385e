"""Operator settings from the environment: each field says its unit, default and why."""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class Settings:
    namespace: str = "sessionops-system"
    """The operator's own namespace (``SESSIONOPS_NAMESPACE``): where its ConfigMap lives."""

    configmap: str = "sessionops-config"
    """Name of the configuration ConfigMap (``SESSIONOPS_CONFIGMAP``), key ``config.yaml``."""

    database_url: str = "postgresql://postgres@127.0.0.1:5432/postgres"
    """The admin PostgreSQL DSN (``DATABASE_URL``): creates each worker namespace's schema, tables and
    role (``execution.credentials``) and reaches every schema for cleanup and deletion. Never
    given to workers."""

    webhook_addr: str = "0.0.0.0"
    """Listen address of the admission webhook server (``SESSIONOPS_WEBHOOK_ADDR``)."""

    webhook_port: int = 9443
    """Port of the admission webhook server, TLS (``SESSIONOPS_WEBHOOK_PORT``)."""

    webhook_host: str | None = None
    """Hostname put into a self-signed certificate (``SESSIONOPS_WEBHOOK_HOST``)."""

    cert_file: str | None = "/certs/tls.crt"
    """Serving certificate (``SESSIONOPS_CERT_FILE``; empty: self-signed with cryptography)."""

    key_file: str | None = "/certs/tls.key"
    """Serving key (``SESSIONOPS_KEY_FILE``)."""

    peering: str | None = "sessionops"
    """kopf peering name (``SESSIONOPS_PEERING``; empty disables): one active reconciler."""

    scan_seconds: float = 5.0
    """Seconds between recovery scans (``SESSIONOPS_SCAN_SECONDS``): bounds how late a start
    timeout or a retried cleanup step is noticed, and (two scans) how late a session out of step
    with its inputs (a missed event) is repaired. Sessions are checked in the watch-fed cache:
    no request unless one is out of step. A run that only an event can change (its pod runs, or
    it waits for an answer) is passed over once every 12 scans (``manager.scans``)."""

    metrics_port: int = 8080
    """Port of /metrics and /healthz (``SESSIONOPS_METRICS_PORT``; 0 disables)."""

    service_account: str = "sessionops"
    """The operator's own ServiceAccount in ``namespace`` (``SESSIONOPS_SERVICE_ACCOUNT``; the chart
    renders it): the identity the status webhook trusts as the operator's."""

    status_break_glass_group: str = "sessionops.dev:status-break-glass"
    """Members of this group may write any status, with a warning (``SESSIONOPS_STATUS_BREAK_GLASS_GROUP``;
    empty disables): a cluster admin's explicit ``--as-group`` for repairs. docs/security.md."""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)

        def opt(key: str, default: str | None) -> str | None:
            value = env.get(key, default)
            return value or None

        return cls(
            namespace=env.get("SESSIONOPS_NAMESPACE", cls.namespace),
            configmap=env.get("SESSIONOPS_CONFIGMAP", cls.configmap),
            database_url=env.get("DATABASE_URL", cls.database_url),
            webhook_addr=env.get("SESSIONOPS_WEBHOOK_ADDR", cls.webhook_addr),
            webhook_port=int(env.get("SESSIONOPS_WEBHOOK_PORT", cls.webhook_port)),
            webhook_host=opt("SESSIONOPS_WEBHOOK_HOST", None),
            cert_file=opt("SESSIONOPS_CERT_FILE", cls.cert_file),
            key_file=opt("SESSIONOPS_KEY_FILE", cls.key_file),
            peering=opt("SESSIONOPS_PEERING", cls.peering),
            scan_seconds=float(env.get("SESSIONOPS_SCAN_SECONDS", cls.scan_seconds)),
            metrics_port=int(env.get("SESSIONOPS_METRICS_PORT", cls.metrics_port)),
            service_account=env.get("SESSIONOPS_SERVICE_ACCOUNT", cls.service_account),
            status_break_glass_group=env.get("SESSIONOPS_STATUS_BREAK_GLASS_GROUP", cls.status_break_glass_group),
        )

"""Per-namespace database credentials: what provisioning costs, and what it adds per segment (prints JSON).

``NamespaceCredentials.ensure`` as the operator calls it before creating a segment's Job, on a
real PostgreSQL (password authentication for the worker roles: tests/pgserver.py) and an
in-memory stand-in for the Secret API (its cost is one GET, plus one PUT when the Secret is
written). Reported, over ``--namespaces`` fresh namespaces:

- ``first_ms``: a namespace's first Job (schema, saver tables, role, grants, Secret);
- ``recheck_ms``: after ``RECHECK_SECONDS`` (provisioning repeated, the stored password
  checked by logging in, nothing written);
- ``cached_us``: every other segment (a dict look-up);
- ``connect_ms``: a worker's connection as its namespace role vs the admin (scram-sha-256
  vs trust on the embedded server: the login itself is the only per-segment database cost).

    python bench/credentials.py [--namespaces 10]   # DATABASE_URL selects the server
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from sessionops.api.config import OperatorConfig
from sessionops.execution.credentials import NamespaceCredentials

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests import pgserver  # noqa: E402
from tests.stack import create_database, drop_database  # noqa: E402

CONFIG = OperatorConfig.model_validate({"defaults": {"model": "m"}, "models": [
    {"name": "m", "provider": "replay", "model": "m"}]})


class Secrets:
    """The two Secret calls the operator makes, in memory."""

    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes = 0

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.stored.get((namespace, name))

    async def put_secret(self, namespace: str, body: dict[str, Any]) -> None:
        self.writes += 1
        self.stored[(namespace, body["metadata"]["name"])] = body


def _ms(samples: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(samples) * 1000, 2), "max": round(max(samples) * 1000, 2)}


async def measure(dsn: str, namespaces: int) -> dict[str, Any]:
    kube = Secrets()
    creds = NamespaceCredentials(dsn)
    first, recheck, cached = [], [], []
    for i in range(namespaces):
        ns = f"bench-{i}"
        started = time.perf_counter()
        await creds.ensure(kube, CONFIG, ns)  # type: ignore[arg-type]
        first.append(time.perf_counter() - started)
        for _ in range(100):
            started = time.perf_counter()
            await creds.ensure(kube, CONFIG, ns)  # type: ignore[arg-type]
            cached.append(time.perf_counter() - started)
        writes = kube.writes
        creds.forget(ns)
        started = time.perf_counter()
        await creds.ensure(kube, CONFIG, ns)  # type: ignore[arg-type]
        recheck.append(time.perf_counter() - started)
        assert kube.writes == writes, "a recheck of a working credential must not rotate it"
    import base64
    worker_dsn = base64.b64decode(kube.stored[("bench-0", CONFIG.worker.database_secret.name)]["data"]["dsn"]).decode()
    role_login, admin_login = [], []
    for _ in range(20):
        for target, samples in ((worker_dsn, role_login), (dsn, admin_login)):
            started = time.perf_counter()
            psycopg.connect(target).close()
            samples.append(time.perf_counter() - started)
    return {"first_ms": _ms(first), "recheck_ms": _ms(recheck),
            "cached_us": round(statistics.median(cached) * 1e6, 2),
            "connect_ms": {"namespace_role": _ms(role_login), "admin": _ms(admin_login)},
            "secret_writes": kube.writes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--namespaces", type=int, default=10)
    args = parser.parse_args()
    name, dsn = create_database()
    try:
        result = asyncio.run(measure(dsn, args.namespaces))
    finally:
        drop_database(name)
    ok = result["secret_writes"] == args.namespaces
    print(json.dumps({"benchmark": "credentials", "namespaces": args.namespaces, **result, "ok": ok}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    with pgserver.database_url():
        sys.exit(main())

"""The worker and the cancellation cleanup find the same Lease.

"Cleanup never races a live writer" rests on the cleanup seeing the Lease the worker holds:
if the two derived different names, the cleanup would read no holder and rewrite a thread a
worker is still writing. Here the worker's own ``SessionLease`` takes a Lease in a store, and
the cancellation controller's own ``observe`` reads that store: it must see the worker.
"""

from __future__ import annotations

import datetime
from typing import Any

from sessionops.cancellation.reconcile import observe
from sessionops.worker.lease import SessionLease

NOW = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.UTC)


class Leases:
    """What both sides need of the API server: Leases by (namespace, name); no Job, no pod."""

    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}

    # The worker's (synchronous) side.
    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.stored.get((namespace, name))

    def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.stored[(namespace, body["metadata"]["name"])] = body
        return body

    def replace_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.create_lease(namespace, body)


class OperatorSide:
    """The cancellation controller's (asynchronous) reads, over the same store."""

    def __init__(self, leases: Leases) -> None:
        self.leases = leases

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.leases.get_lease(namespace, name)

    async def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    async def running_pods(self, namespace: str, job: str) -> int:
        return 0


def _run(session: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "team-a", "name": f"{session}-t1"},
            "spec": {"sessionRef": {"name": session}}, "status": {"segments": []}}


async def test_cleanup_sees_the_lease_the_worker_holds() -> None:
    leases = Leases()
    worker = SessionLease(leases, "team-a", "s1", "pod:s1-t1-1", 30, clock=lambda: NOW)  # type: ignore[arg-type]
    assert worker.try_acquire()
    execution = await observe(OperatorSide(leases), _run("s1"))  # type: ignore[arg-type]
    assert execution.lease_holder == "pod:s1-t1-1"
    assert execution.lease_expires_at == NOW + datetime.timedelta(seconds=30)


async def test_another_sessions_lease_is_not_seen() -> None:
    leases = Leases()
    assert SessionLease(leases, "team-a", "s1", "pod:s1-t1-1", 30, clock=lambda: NOW).try_acquire()  # type: ignore[arg-type]
    execution = await observe(OperatorSide(leases), _run("s2"))  # type: ignore[arg-type]
    assert execution.lease_holder is None

"""The session Lease against the test cluster: acquire, renew, take over, release."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessionops.platform.kube import load_api_client
from sessionops.platform.worker_kube import WorkerKube
from sessionops.worker.lease import LeaseLost, LeaseUnavailable, SessionLease, worker_identity
from testcluster.podrunner.threaded import threaded_cluster

NS = "team-a"


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[WorkerKube]:
    with threaded_cluster(tmp_path / "kubeconfig", bookmark_interval=0.2, strict=True):
        client = WorkerKube(load_api_client(str(tmp_path / "kubeconfig")))
        client.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
        yield client
        client.close()


def pod(kube: WorkerKube, name: str, phase: str) -> None:
    kube.request("POST", f"/api/v1/namespaces/{NS}/pods", body={"metadata": {"name": name}, "spec": {
        "containers": [{"name": "c", "image": "worker"}]}})
    kube.request("PATCH", f"/api/v1/namespaces/{NS}/pods/{name}/status", body={"status": {"phase": phase}},
                 content_type="application/merge-patch+json")


def test_one_holder_at_a_time_and_release_frees_it(kube: WorkerKube) -> None:
    first = SessionLease(kube, NS, "s1", "host:a:1", 30)
    second = SessionLease(kube, NS, "s1", "host:b:2", 30)
    first.acquire(1)
    with pytest.raises(LeaseUnavailable):
        second.acquire(0.3)
    first.release()
    second.acquire(1)
    spec = kube.get_lease(NS, "sessionops-s1")["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("host:b:2", 30, 1)


def test_renewing_a_lease_someone_took_over_reports_it_lost(kube: WorkerKube) -> None:
    mine = SessionLease(kube, NS, "s1", "host:a:1", 30)
    mine.acquire(1)
    lease = kube.get_lease(NS, "sessionops-s1")
    kube.replace_lease(NS, {**lease, "spec": {**lease["spec"], "holderIdentity": "host:thief:9"}})
    with pytest.raises(LeaseLost):
        mine.renew()
    mine.release()  # not ours any more: left alone
    assert kube.get_lease(NS, "sessionops-s1")["spec"]["holderIdentity"] == "host:thief:9"


def test_a_lease_of_an_ended_pod_is_taken_over_at_once(kube: WorkerKube) -> None:
    pod(kube, "old-worker", "Failed")
    pod(kube, "new-worker", "Running")
    SessionLease(kube, NS, "s1", "pod:old-worker", 30).acquire(1)

    assert worker_identity(kube, NS, "new-worker", 7) == "pod:new-worker"
    assert worker_identity(kube, NS, "laptop", 7) == "host:laptop:7"
    SessionLease(kube, NS, "s1", "pod:new-worker", 30).acquire(0.5)
    assert kube.get_lease(NS, "sessionops-s1")["spec"]["holderIdentity"] == "pod:new-worker"


def test_a_live_pods_lease_is_respected(kube: WorkerKube) -> None:
    pod(kube, "busy-worker", "Running")
    SessionLease(kube, NS, "s1", "pod:busy-worker", 30).acquire(1)
    with pytest.raises(LeaseUnavailable):
        SessionLease(kube, NS, "s1", "pod:other", 30).acquire(0.3)


def test_the_renewer_extends_the_lease(kube: WorkerKube) -> None:
    lease = SessionLease(kube, NS, "s1", "host:a:1", 3)
    lease.acquire(1)
    before = kube.get_lease(NS, "sessionops-s1")["spec"]["renewTime"]
    lost: list[LeaseLost] = []
    lease.start_renewing(lost.append)
    try:
        deadline = time.monotonic() + 5
        while kube.get_lease(NS, "sessionops-s1")["spec"]["renewTime"] == before:
            assert time.monotonic() < deadline, "not renewed"
            time.sleep(0.05)
    finally:
        lease.release()
    assert lost == [] and not kube.get_lease(NS, "sessionops-s1")["spec"].get("holderIdentity")

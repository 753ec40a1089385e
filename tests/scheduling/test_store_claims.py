"""A claim decided from memory never starts a second turn because a watch lags.

The hazard (issue 17): the pass that claims input 1 creates run 1 and marks input 1 Consumed.
If the next pass saw input 1 Consumed (or its session's status) before the runs watch delivered
run 1, it would find no active turn and claim input 2. The store takes the operator's own write
responses, so the next pass sees run 1 whatever the watches delivered. Here no watch delivers
anything at all (the store is primed once, as kopf's initial listing does, and then only our
writes reach it), against the test cluster's real API.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from sessionops.api.names import SESSION_LABEL
from sessionops.api.snapshot import ContextSnapshot
from sessionops.manager import main
from sessionops.manager.main import decision_store, drop_ghosts, prime_store
from sessionops.platform.kube import Kube, load_api_client
from sessionops.scheduling.reconcile import reconcile_session
from testcluster import FaithfulCluster
from testcluster.client import ApiClient
from tests.stack import ROOT

NS = "team-a"
API = "/apis/sessionops.dev/v1alpha1/namespaces/team-a"
SNAPSHOT = ContextSnapshot.model_validate({"systemPrompt": "p", "model": "replay/hello",
                                           "approvalMode": "Default"}).model_dump(by_alias=True, mode="json")


def follow_up(name: str, sequence: int) -> dict[str, Any]:
    return {"apiVersion": "sessionops.dev/v1alpha1", "kind": "AgentInput",
            "metadata": {"name": name, "labels": {SESSION_LABEL: "s"}},
            "spec": {"sessionRef": {"name": "s"}, "messages": [{"content": name}], "delivery": "FollowUp",
                     "sequence": sequence, "contextSnapshot": SNAPSHOT}}


@pytest.fixture
async def kube(cluster: FaithfulCluster, api: ApiClient) -> Any:
    for crd in sorted((ROOT / "crds").glob("*.yaml")):
        await api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(crd.read_text()))
    await api.post("/api/v1/namespaces", {"metadata": {"name": NS}})
    await api.post(f"{API}/agentsessions", {"apiVersion": "sessionops.dev/v1alpha1", "kind": "AgentSession",
                                            "metadata": {"name": "s"},
                                            "spec": {"agentRef": {"name": "a"}, "contextSnapshot": SNAPSHOT}})
    for i, name in enumerate(("i1", "i2"), start=1):
        await api.post(f"{API}/agentinputs", follow_up(name, i))
    kube = Kube(load_api_client(str(cluster.kubeconfig)), store=decision_store())
    await prime_store(kube)  # as at a start; from here on no watch event reaches the store
    yield kube
    await kube.aclose()


async def runs(kube: Kube) -> list[str]:
    return sorted(r["metadata"]["name"] for r in await kube.list("agentruns", NS))


async def test_the_next_pass_sees_our_own_run_before_its_watch_event(kube: Kube) -> None:
    first = await reconcile_session(kube, NS, "s")
    assert first is not None and first.create_run is not None and first.create_run.inputs == ["i1"]
    # A late watch event: input 1 as created (Pending), older than our Consumed write.
    stale = await kube.list("agentinputs", NS)
    kube.store.see("agentinputs", {**stale[0], "metadata": {**stale[0]["metadata"], "resourceVersion": "1"},
                                   "status": {}})
    second = await reconcile_session(kube, NS, "s")
    assert second is not None and second.create_run is None  # run 1 is active: input 2 waits
    assert await runs(kube) == ["s-t1"]
    assert second.status["queue"]["pending"] == 1 and second.status["activeRun"] == "s-t1"


async def test_without_our_own_writes_the_second_pass_would_claim_input_2(kube: Kube,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The hazard is real: the same passes with a store that takes no write responses start
    a second turn (this is what the test above guards)."""
    monkeypatch.setattr(Kube, "_keep", lambda self, plural, obj: obj)
    await reconcile_session(kube, NS, "s")
    consumed = [i for i in await kube.list("agentinputs", NS) if i["metadata"]["name"] == "i1"]
    kube.store.see("agentinputs", consumed[0])  # the inputs watch delivered; the runs watch did not
    await reconcile_session(kube, NS, "s")
    assert await runs(kube) == ["s-t1", "s-t2"]


async def test_priming_lists_every_kept_kind_and_a_ghost_is_dropped(kube: Kube, api: ApiClient) -> None:
    assert sorted(i["metadata"]["name"] for i in kube.store.list("agentinputs", NS, f"{SESSION_LABEL}=s")) == \
        ["i1", "i2"]
    assert kube.store.get("agentsessions", NS, "s") is not None
    # Deleted after the priming list, before kopf's own: no DELETED event will ever say so.
    await api.delete(f"{API}/agentinputs/i2")
    kube.store.see("agentinputs", (await kube.get("agentinputs", NS, "i1")), confirmed=True)  # kopf listed i1
    kube.store.see("agentsessions", kube.store.get("agentsessions", NS, "s"), confirmed=True)
    assert await drop_ghosts(kube, settle_seconds=0.1) == 1
    assert [i["metadata"]["name"] for i in kube.store.list("agentinputs", NS, f"{SESSION_LABEL}=s")] == ["i1"]


async def test_many_unconfirmed_objects_are_checked_by_one_listing_not_one_read_each(
        kube: Kube, api: ApiClient, cluster: FaithfulCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow initial listing by kopf leaves thousands unconfirmed: a read each was 13,000 GETs
    over 10,000 sessions and 50,000 inputs."""
    monkeypatch.setattr(main, "GHOST_READS", 0)
    await api.delete(f"{API}/agentinputs/i2")
    since = len(cluster.served)
    assert await drop_ghosts(kube, settle_seconds=0.1) == 1  # nothing confirmed: every kind is checked
    assert [i["metadata"]["name"] for i in kube.store.list("agentinputs", NS, f"{SESSION_LABEL}=s")] == ["i1"]
    assert kube.store.get("agentsessions", NS, "s") is not None
    reads = [r.path for r in cluster.served[since:] if r.method == "GET"]
    assert reads and all(not r.rstrip("/").endswith(("/i1", "/i2", "/s")) for r in reads), reads

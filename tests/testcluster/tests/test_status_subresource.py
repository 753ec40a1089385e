"""The test API server sends status-subresource writes to the webhooks registered for ``<resource>/status``,
and only to them, as kube-apiserver does; the CRD's transition rules (``oldSelf``) run on status writes
once an old value exists. sessionops's status webhook and CEL rules (issue 12) rely on both."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from samples import CRS, GROUP, cr, crd
from test_admission import SERVICE, SERVICE_DNS, WebhookServer, webhook
from testcluster.certs import make_ca_and_server_cert


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_ca_and_server_cert([SERVICE_DNS], ["127.0.0.1"], directory=str(tmp_path_factory.mktemp("certs")))


@pytest.fixture
async def server(bundle):
    srv = WebhookServer(bundle)
    await srv.start()
    yield srv
    await srv.stop()


def status_crd() -> dict[str, Any]:
    result = crd()
    schema = result["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["status"] = {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"n": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "!has(oldSelf.n) || (has(self.n) && self.n >= oldSelf.n)",
                                      "message": "n never decreases", "fieldPath": ".n"}]}
    return result


def hooks(bundle: Any, status_path: str) -> dict[str, Any]:
    rule = {"apiGroups": [GROUP], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "hooks"},
            "webhooks": [webhook("main.example", "/allow", bundle, rules=[{**rule, "resources": ["agentsessions"]}]),
                         webhook("status.example", status_path, bundle,
                                 rules=[{**rule, "operations": ["UPDATE"], "resources": ["agentsessions/status"]}])]}


async def setup(cluster: Any, api: Any, server: WebhookServer, bundle: Any, status_path: str) -> None:
    cluster.service_endpoints[SERVICE] = ("127.0.0.1", server.port)
    assert (await api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", status_crd())).status == 201
    reply = await api.post("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                           hooks(bundle, status_path))
    assert reply.status == 201, reply.body


def called(server: WebhookServer) -> list[tuple[str, str | None]]:
    return [(r["path"], review["request"].get("subResource"))
            for r, review in zip(server.requests, server.reviews, strict=True)]


async def test_status_writes_reach_only_the_status_webhook(cluster, api, server, bundle):
    await setup(cluster, api, server, bundle, "/deny-409")
    assert (await api.post(CRS, cr("s1"))).status == 201
    assert (await api.patch(f"{CRS}/s1", {"spec": {"model": "m2"}})).status == 200
    assert called(server) == [("/allow", None), ("/allow", None)]
    server.requests.clear()
    server.reviews.clear()
    # Status through the main resource: the API server drops it; no status webhook is called.
    reply = await api.patch(f"{CRS}/s1", {"status": {"n": 1}})
    assert reply.status == 200 and "status" not in reply.body
    # Status through the subresource: the status webhook (and only it) decides.
    reply = await api.patch(f"{CRS}/s1/status", {"status": {"n": 1}})
    assert reply.status == 409 and 'admission webhook "status.example" denied the request' in reply.body["message"]
    assert called(server)[-1] == ("/deny-409", "status")
    assert ("/allow", "status") not in called(server)
    request = server.reviews[-1]["request"]
    assert request["operation"] == "UPDATE" and request["resource"]["resource"] == "agentsessions"
    assert request["object"]["status"] == {"n": 1} and "status" not in request["oldObject"]
    assert request["object"]["spec"] == request["oldObject"]["spec"] == {"model": "m2"}
    # A PUT of the status subresource goes the same way.
    current = (await api.get(f"{CRS}/s1")).body
    reply = await api.put(f"{CRS}/s1/status", {**copy.deepcopy(current), "status": {"n": 2}})
    assert reply.status == 409 and called(server)[-1] == ("/deny-409", "status")


async def test_transition_rules_run_on_status_writes_once_an_old_value_exists(cluster, api, server, bundle):
    await setup(cluster, api, server, bundle, "/allow")
    assert (await api.post(CRS, cr("s1"))).status == 201
    assert (await api.patch(f"{CRS}/s1/status", {"status": {"n": 5}})).status == 200  # no old n: the rule skips
    reply = await api.patch(f"{CRS}/s1/status", {"status": {"n": 3}})
    assert reply.status == 422 and "status.n: Invalid value" in reply.body["message"] \
        and "n never decreases" in reply.body["message"], reply.body
    # Schema validation (with CEL) comes before validating webhooks: the refused write never reached them.
    assert called(server)[-1] == ("/allow", "status") and server.reviews[-1]["request"]["object"]["status"] == {"n": 5}
    assert (await api.patch(f"{CRS}/s1/status", {"status": {"n": 6}})).status == 200
    assert (await api.get(f"{CRS}/s1")).body["status"] == {"n": 6}

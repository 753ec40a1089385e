"""The operator's requests on the event loop (``platform.http``) behave as the official client's
did: same credentials and CA, JSON in and out, the client's ``ApiException`` subclass by status
with the API server's Status body; the official thread path stays for what aiohttp cannot do."""

from __future__ import annotations

import ssl
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException, NotFoundException

from sessionops.platform.errors import status_message
from sessionops.platform.http import ApiHttp, ssl_context
from sessionops.platform.kube import Kube, load_api_client
from testcluster import FaithfulCluster

NS = "team-a"


@pytest.fixture
async def kube(cluster: FaithfulCluster) -> Any:
    kube = Kube(load_api_client(str(cluster.kubeconfig)))
    assert kube.http is not None  # CA data and a bearer token, as kubeconfigs and pods have
    await kube.raw("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    yield kube
    await kube.aclose()


async def test_reads_writes_and_errors_match_the_thread_path(kube: Kube, cluster: FaithfulCluster) -> None:
    body = {"metadata": {"name": "c", "labels": {"app": "a"}}, "data": {"k": "v"}}
    created = await kube.raw("POST", f"/api/v1/namespaces/{NS}/configmaps", body)
    patched = await kube.raw("PATCH", f"/api/v1/namespaces/{NS}/configmaps/c", {"data": {"k": "w"}},
                             content_type="application/merge-patch+json")
    assert patched["data"] == {"k": "w"} and patched["metadata"]["uid"] == created["metadata"]["uid"]
    listed = await kube.raw("GET", f"/api/v1/namespaces/{NS}/configmaps", query=[("labelSelector", "app=a")])
    assert [c["metadata"]["name"] for c in listed["items"]] == ["c"]
    # The same request through the official client's own path gives the same answer.
    threaded = await kube.call(kube._json, "GET", f"/api/v1/namespaces/{NS}/configmaps/c")
    assert threaded["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]

    with pytest.raises(NotFoundException) as missing:
        await kube.raw("GET", f"/api/v1/namespaces/{NS}/configmaps/nope")
    assert missing.value.status == 404 and "nope" in status_message(missing.value.body)
    with pytest.raises(ApiException) as exists:
        await kube.raw("POST", f"/api/v1/namespaces/{NS}/configmaps", body)
    assert exists.value.status == 409 and exists.value.reason == "Conflict"


async def test_requests_carry_the_clients_credentials(kube: Kube, cluster: FaithfulCluster) -> None:
    before = len(cluster.served)
    await kube.raw("GET", f"/api/v1/namespaces/{NS}")
    (served,) = cluster.served[before:]
    assert served.user and served.user != "system:anonymous" and served.status == 200
    kube.api_client.configuration.api_key = {"authorization": "Bearer wrong"}
    with pytest.raises(ApiException) as refused:
        await kube.raw("GET", f"/api/v1/namespaces/{NS}")
    assert refused.value.status == 401


def test_a_socks_proxy_keeps_the_official_clients_path() -> None:
    configuration = kubernetes.client.Configuration()
    configuration.host = "https://api.example:6443"
    configuration.proxy = "socks5://proxy.example:1080"
    assert not ApiHttp.supports(configuration)  # Kube then sets ``http`` to None (its thread path)
    configuration.proxy = "http://proxy.example:3128"
    assert ApiHttp.supports(configuration)
    assert ApiHttp(configuration)._proxy == "http://proxy.example:3128"
    configuration.no_proxy = "api.example"
    assert ApiHttp(configuration)._proxy is None


def test_the_ssl_context_follows_the_configuration(tmp_path: Any) -> None:
    configuration = kubernetes.client.Configuration()
    configuration.verify_ssl = False
    assert ssl_context(configuration) is False
    configuration.verify_ssl = True
    context = ssl_context(configuration)
    assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    configuration.assert_hostname = False
    context = ssl_context(configuration)
    assert isinstance(context, ssl.SSLContext) and not context.check_hostname

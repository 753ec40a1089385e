"""The operator's Kubernetes adapter. With the worker's (``worker_kube``) and the kubectl
plugin's client (``sessionops.cli.client``) it is the only code that talks to the API server
(the ``clients`` import contract). Its JSON requests (``raw``: every read and write of the
reconciles, Jobs and Events) go out on the event loop (``platform.http``); the rest wraps the
official ``kubernetes`` client, whose calls run in a dedicated thread pool so that kopf's event
loop never blocks on I/O.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime
import functools
import json
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import kubernetes
from kubernetes.client.exceptions import ApiException

from sessionops import GROUP, VERSION
from sessionops.api.timestamps import iso
from sessionops.platform.errors import Conflict, Invalid, status_message
from sessionops.platform.http import ApiHttp
from sessionops.platform.store import Store

T = TypeVar("T")


def load_api_client(kubeconfig: str | None = None, pool_size: int = 32) -> kubernetes.client.ApiClient:
    """In-cluster credentials when present, else the kubeconfig (``KUBECONFIG`` or default)."""
    configuration = kubernetes.client.Configuration()
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    else:
        kubernetes.config.load_kube_config(config_file=kubeconfig or os.environ.get("KUBECONFIG"),
                                           client_configuration=configuration)
    # The default pool of 4 connections serializes concurrent admissions.
    configuration.connection_pool_maxsize = pool_size
    throttle_credential_refresh(configuration)
    return kubernetes.client.ApiClient(configuration)


REFRESH_SECONDS = 10.0
"""How often the client's credential hook may run (see ``throttle_credential_refresh``)."""


def throttle_credential_refresh(configuration: kubernetes.client.Configuration,
                                clock: Callable[[], float] = time.monotonic) -> None:
    """The loaders install a hook that runs before every request: the kubeconfig one re-applies
    the whole config (its host setter re-reads the proxy environment), about 4 ms of CPU per
    request, a third of a reconcile's. A token is re-read when it expires, which a loader
    learns at most every ``REFRESH_SECONDS`` now (kubelet rotates projected tokens long
    before they expire, so a request never goes out with an expired one)."""
    hook = configuration.refresh_api_key_hook
    if hook is None:
        return
    last = [-REFRESH_SECONDS]

    def throttled(config: kubernetes.client.Configuration) -> None:
        if clock() - last[0] >= REFRESH_SECONDS:
            last[0] = clock()
            hook(config)
            # The kubeconfig loader's hook re-installs itself on every run: keep ours in front.
            config.refresh_api_key_hook = throttled

    configuration.refresh_api_key_hook = throttled


MERGE_PATCH = "application/merge-patch+json"


def _path(namespace: str, plural: str, name: str = "", subresource: str = "") -> str:
    """The path of our group's namespaced objects."""
    return "/".join(p for p in (f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{plural}", name, subresource) if p)


async def _or_none(call: Awaitable[T]) -> T | None:
    """404 means "not there": None instead of an exception."""
    try:
        return await call
    except ApiException as e:
        if e.status == 404:
            return None
        raise


class Kube:
    """Async facade over the synchronous official client."""

    def __init__(self, api_client: kubernetes.client.ApiClient, workers: int = 32,
                 store: Store | None = None) -> None:
        self.api_client = api_client
        self.store = store
        """Watch-fed copies (``cached_get``/``cached_list``); None: every read goes to the API server."""
        self.custom = kubernetes.client.CustomObjectsApi(api_client)
        self.core = kubernetes.client.CoreV1Api(api_client)
        self.batch = kubernetes.client.BatchV1Api(api_client)
        self.coordination = kubernetes.client.CoordinationV1Api(api_client)
        self.authz = kubernetes.client.AuthorizationV1Api(api_client)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kube")
        configuration = api_client.configuration
        self.http = ApiHttp(configuration, connections=configuration.connection_pool_maxsize or workers,
                            user_agent=api_client.user_agent) if ApiHttp.supports(configuration) else None
        """The hot path's requests on the event loop (``platform.http``); None: the client's thread path."""

    def _json(self, method: str, path: str, body: Any = None, query: list[tuple[str, str]] | None = None,
              content_type: str = "application/json") -> Any:
        """One request with a JSON body and answer, through the client's auth, TLS and pool but
        without its typed layer (argument validation and model round trips cost more CPU per
        request than the HTTP exchange: this is the reconciles' hot path). Blocking: use ``raw``."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self.api_client.param_serialize(method=method, resource_path=path, query_params=query or [],
                                                  header_params=headers, body=body, auth_settings=["BearerToken"])
        response = self.api_client.call_api(*request)
        data = response.read()
        if not 200 <= response.status <= 299:
            raise ApiException.from_response(http_resp=response, body=data.decode("utf-8", "replace"), data=None)
        return json.loads(data)

    async def raw(self, method: str, path: str, body: Any = None, query: list[tuple[str, str]] | None = None,
                  content_type: str = "application/json") -> Any:
        if self.http is not None:
            return await self.http.request(method, path, body, query, content_type)
        return await self.call(self._json, method, path, body, query, content_type)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.api_client.close()

    async def aclose(self) -> None:
        """``close`` and the event loop's HTTP session."""
        if self.http is not None:
            await self.http.close()
        self.close()

    def _keep(self, plural: str, obj: dict[str, Any] | None) -> dict[str, Any] | None:
        """A read or write response is the newest version we know: the store takes it."""
        if obj is not None and self.store is not None:
            self.store.see(plural, obj)
        return obj

    # Reads from memory: what the reconciles decide on (``platform.store``). The objects are
    # shared: read them, never change them. Kinds the store does not keep are read fresh.
    async def cached_get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        if self.store is not None and self.store.tracks(plural):
            return self.store.get(plural, namespace, name)
        return await self.fresh_get(plural, namespace, name)

    async def fresh_get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A fresh read of any kind the store may keep (our group's, Jobs, pods)."""
        if plural == "jobs":
            return await self.get_job(namespace, name)
        if plural == "pods":
            return await self.get_pod(namespace, name)
        return await self.get(plural, namespace, name)

    async def cached_list(self, plural: str, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        if self.store is not None and self.store.answers(plural, label_selector):
            return self.store.list(plural, namespace, label_selector)
        if plural == "pods":
            return await self.pods(namespace, label_selector)
        return await self.list(plural, namespace, label_selector)

    # Custom resources of our group: fresh reads (each caller says why it needs one).
    async def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self._keep(plural, await _or_none(self.raw("GET", _path(namespace, plural, name))))

    async def list(self, plural: str, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        query = [("labelSelector", label_selector)] if label_selector else None
        result = await self.raw("GET", _path(namespace, plural), query=query)
        return result.get("items", [])

    async def create(self, plural: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._keep(plural, await self.raw("POST", _path(namespace, plural), body))  # type: ignore[return-value]
        except ApiException as e:
            if e.status == 409:
                raise Conflict(str(e.reason)) from e
            raise

    async def patch_status(self, plural: str, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Merge-patch the status; a ``metadata.resourceVersion`` in body makes it a compare-and-swap."""
        try:
            return self._keep(plural, await self.raw("PATCH", _path(namespace, plural, name, "status"), body,  # type: ignore[return-value]
                                                     content_type=MERGE_PATCH))
        except ApiException as e:
            if e.status == 409:
                raise Conflict(str(e.reason)) from e
            raise

    async def patch(self, plural: str, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._keep(plural, await self.raw("PATCH", _path(namespace, plural, name), body,  # type: ignore[return-value]
                                                 content_type=MERGE_PATCH))

    async def access_review(self, spec: dict[str, Any]) -> tuple[bool, str]:
        """(allowed, reason) of a SubjectAccessReview with this spec."""
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        review = await self.call(self.authz.create_subject_access_review, body)
        status = review.status
        return bool(status.allowed) and not status.denied, status.reason or ""

    async def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._keep("jobs", await _or_none(self.raw("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")))

    async def create_job(self, namespace: str, body: dict[str, Any]) -> None:
        """AlreadyExists is success: Job names are deterministic per segment. A Job the API
        server refuses as invalid raises ``Invalid`` with the server's message."""
        try:
            # Into the store: the next pass must see the Job before its watch event does.
            self._keep("jobs", await self.raw("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", body))
        except ApiException as e:
            if e.status == 422:
                raise Invalid(status_message(e.body) or str(e.reason)) from e
            if e.status != 409:
                raise

    async def delete_job(self, namespace: str, name: str) -> None:
        """Foreground: the Job goes only after its pods are gone. 404 means done."""
        try:
            await self.call(self.batch.delete_namespaced_job, name, namespace, propagation_policy="Foreground")
        except ApiException as e:
            if e.status != 404:
                raise

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        pod = await _or_none(self.call(self.core.read_namespaced_pod, name, namespace))
        return None if pod is None else self.api_client.sanitize_for_serialization(pod)

    async def pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        pods = await self.call(self.core.list_namespaced_pod, namespace, label_selector=label_selector)
        return [self.api_client.sanitize_for_serialization(p) for p in pods.items]

    async def failed_mounts(self, namespace: str, pod: str) -> list[dict[str, Any]]:
        """The kubelet's ``FailedMount`` Events of a pod (why its volumes cannot be set up)."""
        events = await self.call(self.core.list_namespaced_event, namespace,
                                 field_selector=f"involvedObject.name={pod},reason=FailedMount")
        return [self.api_client.sanitize_for_serialization(e) for e in events.items]

    async def running_pods(self, namespace: str, job: str) -> int:
        """Pods of the Job that may still write (not Succeeded/Failed)."""
        pods = await self.call(self.core.list_namespaced_pod, namespace, label_selector=f"job-name={job}")
        return sum(1 for p in pods.items if (p.status and p.status.phase) not in ("Succeeded", "Failed"))

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        lease = await _or_none(self.call(self.coordination.read_namespaced_lease, name, namespace))
        return None if lease is None else self.api_client.sanitize_for_serialization(lease)

    async def get_configmap(self, namespace: str, name: str) -> dict[str, Any] | None:
        cm = await _or_none(self.call(self.core.read_namespaced_config_map, name, namespace))
        return None if cm is None else self.api_client.sanitize_for_serialization(cm)

    async def configmaps(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        cms = await self.call(self.core.list_namespaced_config_map, namespace, label_selector=label_selector)
        return [self.api_client.sanitize_for_serialization(cm) for cm in cms.items]

    async def secret_exists(self, namespace: str, name: str) -> bool:
        """Whether the Secret exists; its data is read by the client library but never kept."""
        return await _or_none(self.call(self.core.read_namespaced_secret, name, namespace)) is not None

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Secret as a dict (``data`` base64-encoded), or None. Only the operator's own
        credential Secrets are read this way (``execution.credentials``)."""
        secret = await _or_none(self.call(self.core.read_namespaced_secret, name, namespace))
        return None if secret is None else self.api_client.sanitize_for_serialization(secret)

    async def put_secret(self, namespace: str, body: dict[str, Any]) -> None:
        """Create, or replace when it exists (the body is the whole desired Secret)."""
        try:
            await self.call(self.core.create_namespaced_secret, namespace, body)
        except ApiException as e:
            if e.status != 409:
                raise
            await self.call(self.core.replace_namespaced_secret, body["metadata"]["name"], namespace, body)

    async def create_peering(self, name: str) -> None:
        """kopf waits for its ClusterKopfPeering object but never creates it. Safe to repeat: 409 means done."""
        body = {"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": name}}
        try:
            await self.call(self.custom.create_cluster_custom_object, "kopf.dev", "v1", "clusterkopfpeerings", body)
        except ApiException as e:
            if e.status != 409:
                raise

    async def list_agents(self, namespace: str | None = None) -> list[dict[str, Any]]:
        if namespace is None:
            result = await self.call(self.custom.list_cluster_custom_object, GROUP, VERSION, "agents")
        else:
            result = await self.call(self.custom.list_namespaced_custom_object, GROUP, VERSION, namespace, "agents")
        return result.get("items", [])

    async def post_event(self, involved: dict[str, Any], *, type_: str, reason: str, message: str,
                         component: str = "sessionops") -> None:
        """Best effort: an Event is a notice, never a reason to fail the caller."""
        meta = involved.get("metadata", {})
        namespace = meta.get("namespace") or "default"
        ts = iso(datetime.datetime.now(datetime.UTC))
        body = {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": f"{meta.get('name', 'sessionops')}."},
                "involvedObject": {"apiVersion": involved.get("apiVersion"), "kind": involved.get("kind"),
                                   "name": meta.get("name"), "namespace": namespace, "uid": meta.get("uid"),
                                   "resourceVersion": meta.get("resourceVersion")},
                "type": type_, "reason": reason, "message": message[:1024], "firstTimestamp": ts,
                "lastTimestamp": ts, "count": 1, "source": {"component": component},
                "reportingComponent": component}
        # Events are advisory; losing one must not fail reconciliation or admission.
        with contextlib.suppress(ApiException):
            await self.raw("POST", f"/api/v1/namespaces/{namespace}/events", body)

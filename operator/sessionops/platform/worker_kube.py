"""The worker's Kubernetes adapter (official synchronous client): plain dicts in and out.

Writes are compare-and-swaps (``metadata.resourceVersion`` in a merge patch, or a
replace carrying it): a write decided on a stale read fails with ``Conflict`` and the
caller re-reads. Run status writes never overwrite a cancel: the cancellation
controller owns a run from the moment ``spec.cancel`` is set.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

from sessionops import GROUP, VERSION
from sessionops.api.input import InputPhase
from sessionops.api.names import RUN_LABEL, SESSION_LABEL
from sessionops.platform.errors import Conflict, status_message
from sessionops.platform.kube import load_api_client
from sessionops.views import InputView, RunView

logger = logging.getLogger(__name__)

SKILL_LABEL = "sessionops.dev/skill"
CAS_ATTEMPTS = 8
"""Re-reads of a run before a status write gives up: other writers (the operator's
segment bookkeeping) touch the run rarely, so a few attempts always suffice."""
CUSTOM = f"/apis/{GROUP}/{VERSION}"
LEASES = "/apis/coordination.k8s.io/v1"
REQUEST_TIMEOUT = (5.0, 30.0)
"""(connect, read) seconds per API call: a hung API server becomes an error, not a hang."""


class WorkerKube:
    """Plain-dict requests through the official client's ``ApiClient`` (configuration,
    credentials, TLS, retries, ``ApiException``). The generated API classes are not used:
    importing them costs the worker up to a second of start-up (``CoreV1Api`` alone)."""

    def __init__(self, api_client: kubernetes.client.ApiClient) -> None:
        self.api_client = api_client

    @classmethod
    def connect(cls) -> WorkerKube:
        """In-cluster credentials in a pod, else ``KUBECONFIG``. Pool: the access reviews asked
        together (``worker.access.CONCURRENT_REVIEWS``) beside the Lease renewer and the transcript
        publisher; more at once would open connections urllib3 then discards with a warning."""
        return cls(load_api_client(pool_size=8))

    def close(self) -> None:
        self.api_client.close()

    def request(self, method: str, path: str, *, body: Any = None, query: dict[str, str] | None = None,
                content_type: str = "application/json") -> dict[str, Any]:
        """One API call; non-2xx raises ``ApiException`` (409: ``Conflict``)."""
        params = self.api_client.param_serialize(
            method=method, resource_path=path, query_params=list((query or {}).items()),
            header_params={"Accept": "application/json", "Content-Type": content_type}, body=body,
            auth_settings=["BearerToken"])
        response = self.api_client.call_api(*params, _request_timeout=REQUEST_TIMEOUT)
        response.read()
        text = response.data.decode("utf-8") if response.data else ""
        if not 200 <= response.status <= 299:
            try:
                ApiException.from_response(http_resp=response, body=text, data=None)
            except ApiException as e:
                if e.status == 409:
                    raise Conflict(status_message(text) or str(e.reason)) from e
                raise
        return json.loads(text) if text else {}

    def read(self, path: str) -> dict[str, Any] | None:
        """GET an object; None when it does not exist."""
        try:
            return self.request("GET", path)
        except ApiException as e:
            if e.status == 404:  # absence is an answer the callers decide on
                return None
            raise

    # Our custom resources.
    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.read(f"{CUSTOM}/namespaces/{namespace}/{plural}/{name}")

    def create(self, plural: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST through admission; ``Conflict`` when the name exists."""
        return self.request("POST", f"{CUSTOM}/namespaces/{namespace}/{plural}", body=body)

    def list_inputs(self, namespace: str, session: str) -> list[dict[str, Any]]:
        result = self.request("GET", f"{CUSTOM}/namespaces/{namespace}/agentinputs",
                              query={"labelSelector": f"{SESSION_LABEL}={session}"})
        return list(result.get("items") or [])

    def patch_status(self, plural: str, obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        """Merge-patch ``status`` under ``obj``'s resourceVersion (a CAS; ``Conflict`` when stale).
        Repeating it is safe: the values are absolute."""
        meta = obj["metadata"]
        body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": status}
        return self.request("PATCH", f"{CUSTOM}/namespaces/{meta['namespace']}/{plural}/{meta['name']}/status",
                            body=body, content_type="application/merge-patch+json")

    def update_run_status(self, namespace: str, name: str,
                          change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> dict[str, Any] | None:
        """Re-read the run, let ``change(run)`` compute a status merge patch, write it as a CAS.

        Returns the written run, or None when nothing was written: the run is gone, is
        cancelled (the cancellation controller owns it), already has a verdict, or
        ``change`` returned None. Safe to repeat: every attempt starts from a fresh read.
        """
        for _ in range(CAS_ATTEMPTS):
            run = self.get("agentruns", namespace, name)
            if run is None or not RunView(run).writable_by_worker:
                return None
            patch = change(run)
            if patch is None:
                return None
            try:
                return self.patch_status("agentruns", run, patch)
            except Conflict:
                continue  # someone wrote the run since our read: decide again on a fresh one
        raise Conflict(f"agentruns {name}: still conflicting after {CAS_ATTEMPTS} attempts")

    def claim_input(self, inp: dict[str, Any], run: str) -> bool:
        """Mark a pending input Consumed by ``run`` (CAS). False when someone else got it first.
        Safe to repeat: an input already consumed by this run counts as claimed."""
        for _ in range(CAS_ATTEMPTS):
            seen = InputView(inp)
            if seen.phase == InputPhase.CONSUMED.value and seen.consumed_by == run:
                return True
            if not seen.pending:
                return False
            try:
                self.patch_status("agentinputs", inp, {"phase": InputPhase.CONSUMED.value, "run": run})
                return True
            except Conflict:
                fresh = self.get("agentinputs", inp["metadata"]["namespace"], inp["metadata"]["name"])
                if fresh is None:
                    return False
                inp = fresh
        return False

    def list_transcripts(self, namespace: str, run: str) -> list[dict[str, Any]]:
        """The run's transcript chunks (any order)."""
        result = self.request("GET", f"{CUSTOM}/namespaces/{namespace}/agenttranscripts",
                              query={"labelSelector": f"{RUN_LABEL}={run}"})
        return list(result.get("items") or [])

    def put_transcript(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create the chunk, or replace it (under its current resourceVersion when ours is
        stale: one writer per thread holds the Lease, so a newer version is a dead try's).
        Safe to repeat: the body is the chunk's whole content, computed from the thread."""
        path = f"{CUSTOM}/namespaces/{namespace}/agenttranscripts"
        name = body["metadata"]["name"]
        try:
            if (body.get("metadata") or {}).get("resourceVersion") is None:
                return self.request("POST", path, body=body)
            return self.request("PUT", f"{path}/{name}", body=body)
        except Conflict:
            current = self.read(f"{path}/{name}")
            if current is None:
                raise
            fresh = {**body, "metadata": {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}
            return self.request("PUT", f"{path}/{name}", body=fresh)

    def skills(self, namespace: str) -> dict[str, str]:
        """Skill ConfigMaps of the namespace: name -> text (its data values, by key order)."""
        result = self.request("GET", f"/api/v1/namespaces/{namespace}/configmaps", query={"labelSelector": SKILL_LABEL})
        skills: dict[str, str] = {}
        for cm in result.get("items") or []:
            data = cm.get("data") or {}
            skills[cm["metadata"]["name"]] = "\n\n".join(data[k] for k in sorted(data))
        return skills

    def secret_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """A Secret's decoded data (UTF-8); None when it does not exist. Never log the values."""
        secret = self.read(f"/api/v1/namespaces/{namespace}/secrets/{name}")
        if secret is None:
            return None
        return {k: base64.b64decode(v).decode("utf-8") for k, v in (secret.get("data") or {}).items()}

    # Authorization.
    def access_review(self, spec: dict[str, Any]) -> tuple[bool, str]:
        """(allowed, reason) of a SubjectAccessReview with this spec."""
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        review = self.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body)
        status = review.get("status") or {}
        return bool(status.get("allowed")) and not status.get("denied"), status.get("reason") or ""

    # The session Lease.
    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.read(f"{LEASES}/namespaces/{namespace}/leases/{name}")

    def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", f"{LEASES}/namespaces/{namespace}/leases", body=body)

    def replace_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """A PUT carrying the read resourceVersion: a CAS (``Conflict`` when stale)."""
        return self.request("PUT", f"{LEASES}/namespaces/{namespace}/leases/{body['metadata']['name']}", body=body)

    def pod_phase(self, namespace: str, name: str) -> str | None:
        """The pod's phase, ``"Gone"`` when it does not exist, None when we may not read pods."""
        try:
            pod = self.read(f"/api/v1/namespaces/{namespace}/pods/{name}")
        except ApiException as e:
            if e.status == 403:  # no RBAC for pods: callers fall back to Lease expiry
                return None
            raise
        if pod is None:
            return "Gone"
        return (pod.get("status") or {}).get("phase") or "Pending"

"""The pod runner's API client: plain dicts in and out, through the official client's ``ApiClient``.

The runner plays the kubelet and the Job controller with the kubeconfig it was given; the
generated API classes are used only for its two watches (``runner.py``).
"""

from __future__ import annotations

import json
import os
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

REQUEST_TIMEOUT = (5.0, 30.0)
"""(connect, read) seconds per API call: a hung API server becomes an error, not a hang."""


class Conflict(Exception):
    """409: the object changed since it was read (or the name exists)."""


def api_client(kubeconfig: str | os.PathLike[str], pool_size: int = 16) -> kubernetes.client.ApiClient:
    """An ``ApiClient`` for ``kubeconfig``; ``pool_size`` connections, as the runner's threads share it."""
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = pool_size
    return kubernetes.client.ApiClient(configuration)


def _status_message(body: str) -> str:
    """The ``message`` of a Kubernetes Status body, or ''."""
    try:
        return str((json.loads(body or "") or {}).get("message") or "")
    except (ValueError, AttributeError):
        return ""


class Kube:
    """``request(method, path, body=...)`` -> the response's JSON; non-2xx raises ``ApiException``
    (409: ``Conflict``)."""

    def __init__(self, client: kubernetes.client.ApiClient) -> None:
        self.api_client = client

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | os.PathLike[str]) -> Kube:
        return cls(api_client(kubeconfig))

    def close(self) -> None:
        self.api_client.close()

    def request(self, method: str, path: str, *, body: Any = None, query: dict[str, str] | None = None,
                content_type: str = "application/json") -> dict[str, Any]:
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
                    raise Conflict(_status_message(text) or str(e.reason)) from e
                raise
        return json.loads(text) if text else {}

    def read(self, path: str) -> dict[str, Any] | None:
        """GET an object; None when it does not exist."""
        try:
            return self.request("GET", path)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

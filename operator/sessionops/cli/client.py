"""Connecting like kubectl: ``--kubeconfig``, ``--context``, ``-n/--namespace``.

The kubeconfig is ``--kubeconfig``, else ``$KUBECONFIG`` (several files separated by
``os.pathsep`` are merged, as kubectl does), else ``~/.kube/config``; inside a pod without
one, the in-cluster service account. The namespace is ``-n``, else the context's
namespace, else ``default``. All calls go through the official client's CustomObjectsApi.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessionops import GROUP, VERSION
from sessionops.api.names import SESSION_LABEL
from sessionops.cli.errors import EXIT_USER, CliError

SESSIONS, INPUTS, RUNS = "agentsessions", "agentinputs", "agentruns"
SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
# (connect, read) seconds: a plugin call should fail fast instead of hanging.
REQUEST_TIMEOUT = (10, 60)


def kubeconfig_path(explicit: str | os.PathLike[str] | None = None) -> str:
    """``--kubeconfig``, else ``$KUBECONFIG`` (may list several files), else ``~/.kube/config``."""
    if explicit:
        return str(Path(explicit).expanduser())
    env = os.environ.get("KUBECONFIG", "").strip()
    if env:
        return os.pathsep.join(str(Path(p).expanduser()) for p in env.split(os.pathsep) if p)
    return str(Path("~/.kube/config").expanduser())


def context_namespace(config_file: str, context: str | None) -> str | None:
    """The namespace the kubeconfig's (current or named) context selects, if any."""
    from kubernetes import config

    contexts, current = config.list_kube_config_contexts(config_file)
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    if context and chosen is None:
        names = ", ".join(sorted(c.get("name", "") for c in contexts)) or "none"
        raise CliError(f'kubeconfig: context "{context}" not found (contexts: {names})', EXIT_USER)
    return ((chosen or {}).get("context") or {}).get("namespace") or None


@dataclass
class Kube:
    """The sessionops resources in one namespace."""

    api: Any  # kubernetes.client.CustomObjectsApi
    namespace: str
    namespace_explicit: bool = False

    def get(self, plural: str, name: str) -> dict[str, Any]:
        return self.api.get_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name,
                                                     _request_timeout=REQUEST_TIMEOUT)

    def find(self, plural: str, name: str) -> dict[str, Any] | None:
        """``get``, with None for 404."""
        from kubernetes.client.exceptions import ApiException

        try:
            return self.get(plural, name)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def list(self, plural: str, session: str | None = None) -> list[dict[str, Any]]:
        selector = f"{SESSION_LABEL}={session}" if session else ""
        result = self.api.list_namespaced_custom_object(GROUP, VERSION, self.namespace, plural,
                                                        label_selector=selector, _request_timeout=REQUEST_TIMEOUT)
        return list(result.get("items") or [])

    def create(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.api.create_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, body,
                                                        _request_timeout=REQUEST_TIMEOUT)

    def merge_patch(self, plural: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        # A dict body is sent as application/merge-patch+json by the official client.
        return self.api.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name, patch,
                                                       _request_timeout=REQUEST_TIMEOUT)


def connect(kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None,
            namespace: str | None = None) -> Kube:
    """A Kube for the chosen cluster and namespace; kubeconfig problems are CliErrors."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    path = kubeconfig_path(kubeconfig)
    files = [p for p in path.split(os.pathsep) if p]
    in_cluster = (not kubeconfig and not any(Path(p).exists() for p in files)
                  and bool(os.environ.get("KUBERNETES_SERVICE_HOST")))
    try:
        if in_cluster:
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
            api_client = client.ApiClient(configuration)
            default_ns = SA_NAMESPACE.read_text().strip() if SA_NAMESPACE.exists() else None
        else:
            missing = [p for p in files if not Path(p).exists()]
            if missing and len(missing) == len(files):
                raise CliError(f"kubeconfig: {', '.join(missing)} not found (use --kubeconfig or $KUBECONFIG)")
            default_ns = context_namespace(path, context)  # also checks that --context exists
            api_client = config.new_client_from_config(config_file=path, context=context, persist_config=False)
    except ConfigException as e:
        raise CliError(f"kubeconfig: {e}") from None
    return Kube(api=client.CustomObjectsApi(api_client), namespace=namespace or default_ns or "default",
                namespace_explicit=bool(namespace))

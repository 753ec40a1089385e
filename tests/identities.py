"""People and grants for tests against the test cluster, the way a cluster administrator sets them up.

``chart_rbac(namespaces)`` renders the chart's own RBAC (the operator's and the workers' Roles,
ClusterRoles and bindings, the ServiceAccounts, and the roles aggregated into ``view`` / ``edit``
/ ``admin``) with the real ``helm template``, for test stacks that do not install the whole chart.
``role_binding`` is what ``kubectl create rolebinding`` writes.
"""

from __future__ import annotations

import copy
import functools
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
HELM = ROOT / ".tools" / "bin" / "helm"
RBAC_TEMPLATES = ("templates/rbac.yaml", "templates/worker-rbac.yaml", "templates/user-rbac.yaml")
RBAC_GROUP = "rbac.authorization.k8s.io"
PLURALS = {"ServiceAccount": ("v1", "serviceaccounts"), "Role": (f"{RBAC_GROUP}/v1", "roles"),
           "RoleBinding": (f"{RBAC_GROUP}/v1", "rolebindings"),
           "ClusterRole": (f"{RBAC_GROUP}/v1", "clusterroles"),
           "ClusterRoleBinding": (f"{RBAC_GROUP}/v1", "clusterrolebindings")}


def chart_rbac(namespaces: list[str], release_namespace: str = "sessionops-system",
               secret_names: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The chart's RBAC objects for these worker namespaces (``helm template``: no cluster needed);
    ``secret_names`` is ``worker.rbac.secretNames``, the Secrets workers may read (MCP headers)."""
    return copy.deepcopy(_render(tuple(namespaces), release_namespace, tuple(secret_names)))


@functools.cache
def _render(namespaces: tuple[str, ...], release_namespace: str, secret_names: tuple[str, ...]) -> list[dict[str, Any]]:
    args = [str(HELM), "template", "sessionops", str(ROOT / "charts" / "sessionops"), "-n", release_namespace,
            "--set", "postgresql.enabled=false", "--set", "externalDatabase.existingSecret=sessionops-database"]
    for i, ns in enumerate(namespaces):
        args += ["--set", f"workerNamespaces[{i}]={ns}"]
    for i, name in enumerate(secret_names):
        args += ["--set", f"worker.rbac.secretNames[{i}]={name}"]
    for template in RBAC_TEMPLATES:
        args += ["--show-only", template]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def api_path(doc: dict[str, Any]) -> str:
    """Where ``doc`` is created (a collection URL)."""
    version, plural = PLURALS[doc["kind"]]
    prefix = f"/api/{version}" if "/" not in version else f"/apis/{version}"
    namespace = doc["metadata"].get("namespace")
    return f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"


def role_binding(name: str, namespace: str, cluster_role: str, *, users: list[str] = (),
                 groups: list[str] = ()) -> dict[str, Any]:
    subjects = [{"apiGroup": RBAC_GROUP, "kind": "User", "name": u} for u in users]
    subjects += [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups]
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": cluster_role},
            "subjects": subjects}


def role(name: str, namespace: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role", "metadata": {"name": name, "namespace": namespace},
            "rules": rules}


def binding_to_role(name: str, namespace: str, role_name: str, *, users: list[str]) -> dict[str, Any]:
    body = role_binding(name, namespace, role_name, users=users)
    body["roleRef"]["kind"] = "Role"
    return body

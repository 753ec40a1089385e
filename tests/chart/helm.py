"""Rendering the chart offline with the real Helm 3 and Helm 4 binaries.

Nothing here needs a cluster: ``helm template`` and ``helm install --dry-run=client``
render the chart; ``lookup`` returns nothing, so certificates and passwords are freshly
generated on each render (the tests mask them when comparing renders).
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "sessionops"
TOOLS = ROOT / ".tools" / "bin"
RELEASE = "sessionops"
NAMESPACE = "sessionops-system"
DEFAULT_WORKER_NAMESPACES = ["default"]
"""The chart's default workerNamespaces: never the release namespace unless told to."""

# The Helm binaries the chart must work with: `make tools` installs both.
HELMS = {"helm4": TOOLS / "helm", "helm3": TOOLS / "helm3"}
EXPECTED_MAJOR = {"helm4": "v4.", "helm3": "v3."}

# Value sets rendered by every test that takes the `values_name` parameter.
VALUE_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "external-db": {
        "postgresql": {"enabled": False},
        "externalDatabase": {"existingSecret": "sessionops-dsn", "existingSecretKey": "dsn"},
    },
    "cert-manager": {"webhook": {"certManager": {"enabled": True}}},
    "cert-manager-issuer": {
        "webhook": {"certManager": {"enabled": True,
                                    "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}},
    },
    "replay": {
        "replay": {"enabled": True, "scenarios": {"extra": {"responses": [{"content": "extra answer"}]}}},
        "config": {"defaults": {"model": "replay/hello"}},
    },
    "service-monitor": {
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}},
        "workerNamespaces": ["team-a", "team-b"],
        "operator": {"replicas": 3},
        "image": {"tag": "1.2.3", "digest": "sha256:" + "a" * 64},
    },
    "minimal": {
        "networkPolicy": {"enabled": False},
        "operator": {"replicas": 1, "podDisruptionBudget": {"enabled": False}},
        "peering": {"createCRD": False},
        "postgresql": {"persistence": {"enabled": False}},
    },
}


def helm_path(name: str) -> Path:
    path = HELMS[name]
    if not (path.is_file() and os.access(path, os.X_OK)):
        message = f"{path} is missing: run `make tools`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@functools.cache
def helm_version(name: str) -> str:
    out = subprocess.run([str(HELMS[name]), "version", "--short"], capture_output=True, text=True, timeout=30)
    return out.stdout.strip()


def run_helm(name: str, *args: str, values: dict[str, Any] | None = None,
             tmp_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a Helm binary with an optional values file, isolated from the user's kubeconfig."""
    helm = helm_path(name)
    cmd = [str(helm), *args]
    if values is not None:
        assert tmp_dir is not None
        tmp_dir.mkdir(parents=True, exist_ok=True)
        values_file = tmp_dir / f"values-{abs(hash(yaml.safe_dump(values)))}.yaml"
        values_file.write_text(yaml.safe_dump(values))
        cmd += ["--values", str(values_file)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "HELM_"))}
    env["KUBECONFIG"] = str((tmp_dir or Path("/nonexistent")) / "no-kubeconfig")
    if tmp_dir is not None:
        for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
            env[var] = str(tmp_dir / var.lower())
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)


@dataclass
class Rendered:
    """One render of the chart: its manifests, by kind and name."""

    docs: list[dict[str, Any]]
    text: str
    values: dict[str, Any] = field(default_factory=dict)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [d for d in self.of_kind(kind) if name is None or d["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name or ''}, found {[d['metadata']['name'] for d in found]}"
        return found[0]

    def find(self, kind: str, suffix: str) -> dict[str, Any]:
        found = [d for d in self.of_kind(kind) if d["metadata"]["name"].endswith(suffix)]
        assert len(found) == 1, f"expected one {kind} *{suffix}, found {[d['metadata']['name'] for d in found]}"
        return found[0]


def parse_docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


class Renderer:
    def __init__(self, tmp_dir: Path) -> None:
        self.tmp_dir = tmp_dir
        self._cache: dict[tuple[str, str, tuple[str, ...]], Rendered] = {}

    def template(self, helm: str, values_name: str, *extra: str) -> Rendered:
        key = (helm, values_name, extra)
        if key not in self._cache:
            values = VALUE_SETS[values_name]
            out = run_helm(helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, *extra,
                           values=values, tmp_dir=self.tmp_dir)
            assert out.returncode == 0, f"{helm} template ({values_name}) failed:\n{out.stderr}"
            self._cache[key] = Rendered(parse_docs(out.stdout), out.stdout, values)
        return self._cache[key]

    def template_values(self, helm: str, values: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
        return run_helm(helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, *extra,
                        values=values, tmp_dir=self.tmp_dir)


def iter_pod_specs(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for d in docs:
        if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield f"{d['kind']}/{d['metadata']['name']}", d["spec"]["template"]["spec"]

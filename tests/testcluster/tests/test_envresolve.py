"""The container environment, resolved as the kubelet does."""

from __future__ import annotations

import base64

import pytest

from testcluster.podrunner.envresolve import EnvResolutionError, expand, resolve_env

POD = {"metadata": {"name": "run-1-abcde", "namespace": "team-a", "uid": "pod-uid",
                    "labels": {"app": "worker"}},
       "spec": {"nodeName": "podrunner", "serviceAccountName": "sessionops-worker"},
       "status": {"podIP": "127.0.0.1"}}
SECRETS = {("team-a", "db"): {"data": {"url": base64.b64encode(b"postgresql://db/x").decode()}},
           ("team-a", "keys"): {"data": {"A": base64.b64encode(b"1").decode(), "B": base64.b64encode(b"2").decode()}}}
CONFIGMAPS = {("team-a", "settings"): {"data": {"level": "debug"}}}


def resolve(container: dict) -> dict[str, str]:
    return resolve_env(container, POD, secrets=lambda ns, n: SECRETS.get((ns, n)),
                       configmaps=lambda ns, n: CONFIGMAPS.get((ns, n)))


def test_values_references_and_field_refs_resolve_in_order() -> None:
    env = resolve({"env": [
        {"name": "BASE", "value": "/work"},
        {"name": "SUB", "value": "$(BASE)/sub and $(UNKNOWN) and $$(BASE)"},
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "SA", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
    ]})
    assert env == {"BASE": "/work", "SUB": "/work/sub and $(UNKNOWN) and $(BASE)", "NS": "team-a",
                   "POD": "run-1-abcde", "APP": "worker", "SA": "sessionops-worker"}


def test_secret_and_configmap_keys_are_read_from_the_pods_namespace() -> None:
    env = resolve({"env": [
        {"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {"name": "db", "key": "url"}}},
        {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "level"}}},
        {"name": "OPTIONAL", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k", "optional": True}}},
    ], "envFrom": [{"secretRef": {"name": "keys"}, "prefix": "K_"}]})
    assert env == {"K_A": "1", "K_B": "2", "DATABASE_URL": "postgresql://db/x", "LEVEL": "debug"}


def test_resource_field_refs_use_the_container_resources() -> None:
    env = resolve({"resources": {"limits": {"memory": "512Mi", "cpu": "1500m"}}, "env": [
        {"name": "MEM_MB", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
        {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
    ]})
    assert env == {"MEM_MB": "512", "CPUS": "2"}


@pytest.mark.parametrize("var, message", [
    ({"name": "X", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k"}}}, 'secret "absent" not found'),
    ({"name": "X", "valueFrom": {"secretKeyRef": {"name": "db", "key": "nope"}}}, "couldn't find key nope"),
    ({"name": "X", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k"}}}, 'configmap "absent"'),
])
def test_a_missing_required_reference_keeps_the_container_from_starting(var: dict, message: str) -> None:
    with pytest.raises(EnvResolutionError, match=message) as raised:
        resolve({"env": [var]})
    assert raised.value.reason == "CreateContainerConfigError"


def test_expand_leaves_unterminated_references_alone() -> None:
    assert expand("$(A", {"A": "x"}) == "$(A"

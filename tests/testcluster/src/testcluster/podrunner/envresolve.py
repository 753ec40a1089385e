"""A container's environment as the kubelet resolves it (pure, with lookups passed in).

Supported: ``value`` with ``$(VAR)`` expansion of earlier variables (``$$`` escapes),
``valueFrom.fieldRef`` (metadata.name/namespace/uid, metadata.labels['k'],
metadata.annotations['k'], spec.nodeName, spec.serviceAccountName, status.podIP,
status.hostIP), ``valueFrom.secretKeyRef`` / ``configMapKeyRef`` (with ``optional``),
``valueFrom.resourceFieldRef`` (limits/requests of cpu and memory, with ``divisor``),
and ``envFrom`` (``configMapRef`` / ``secretRef`` with ``prefix`` and ``optional``).
A missing non-optional reference is an ``EnvResolutionError``: the kubelet's
``CreateContainerConfigError`` (the container does not start).
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

Lookup = Callable[[str, str], dict[str, Any] | None]
"""(namespace, name) -> the object (Secret or ConfigMap) or None when absent."""

_FIELD_INDEX = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")
_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
             "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1, "k": 10**3, "M": 10**6,
             "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")


class EnvResolutionError(ValueError):
    """The container cannot start: ``reason`` is the kubelet's waiting reason."""

    reason = "CreateContainerConfigError"


def quantity(value: str | int | float) -> Decimal:
    """A Kubernetes resource quantity (``512Mi``, ``250m``, ``1.5``) as a number."""
    m = _QUANTITY.match(str(value).strip())
    if not m or m.group(2) not in _SUFFIXES:
        raise EnvResolutionError(f"invalid quantity {value!r}")
    return Decimal(m.group(1)) * Decimal(_SUFFIXES[m.group(2)])


def expand(value: str, env: Mapping[str, str]) -> str:
    """``$(VAR)`` -> its earlier value (unknown references stay as written); ``$$`` -> ``$``."""
    out, i = [], 0
    while i < len(value):
        if value.startswith("$$", i):
            out.append("$")
            i += 2
        elif value.startswith("$(", i) and (end := value.find(")", i)) != -1:
            name = value[i + 2:end]
            out.append(env.get(name, value[i:end + 1]))
            i = end + 1
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def _field(pod: Mapping[str, Any], path: str) -> str:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    simple = {"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
              "metadata.uid": meta.get("uid"), "spec.nodeName": spec.get("nodeName"),
              "spec.serviceAccountName": spec.get("serviceAccountName"), "status.podIP": status.get("podIP"),
              "status.hostIP": status.get("hostIP")}
    if path in simple:
        return str(simple[path] or "")
    if m := _FIELD_INDEX.match(path):
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    raise EnvResolutionError(f"unsupported fieldRef {path!r}")


def _resource(container: Mapping[str, Any], ref: Mapping[str, Any]) -> str:
    kind, _, name = str(ref.get("resource", "")).partition(".")
    resources = container.get("resources") or {}
    raw = (resources.get(kind) or {}).get(name)
    if raw is None and kind == "requests":
        raw = (resources.get("limits") or {}).get(name)
    if raw is None:
        return "0"  # the kubelet reports node allocatable; "unbounded" is the honest answer here
    divisor = quantity(ref.get("divisor") or "1")
    return str(math.ceil(quantity(raw) / divisor))


def _key(kind: str, lookup: Lookup, namespace: str, ref: Mapping[str, Any], decode: bool) -> str | None:
    obj = lookup(namespace, ref.get("name", ""))
    optional = bool(ref.get("optional"))
    if obj is None:
        if optional:
            return None
        raise EnvResolutionError(f'{kind} "{ref.get("name")}" not found')
    data = obj.get("data") or {}
    if ref.get("key") not in data:
        if not decode and ref.get("key") in (obj.get("binaryData") or {}):
            return base64.b64decode(obj["binaryData"][ref["key"]]).decode()
        if optional:
            return None
        raise EnvResolutionError(f'couldn\'t find key {ref.get("key")} in {kind} {namespace}/{ref.get("name")}')
    value = data[ref["key"]]
    return base64.b64decode(value).decode() if decode else str(value)


def resolve_env(container: Mapping[str, Any], pod: Mapping[str, Any], *, secrets: Lookup,
                configmaps: Lookup) -> dict[str, str]:
    """The container's environment, in the kubelet's order: envFrom first, then env."""
    namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix") or ""
        if "configMapRef" in source:
            ref, lookup, decode, kind = source["configMapRef"], configmaps, False, "configmap"
        elif "secretRef" in source:
            ref, lookup, decode, kind = source["secretRef"], secrets, True, "secret"
        else:
            raise EnvResolutionError(f"unsupported envFrom source {sorted(source)}")
        obj = lookup(namespace, ref.get("name", ""))
        if obj is None:
            if ref.get("optional"):
                continue
            raise EnvResolutionError(f'{kind} "{ref.get("name")}" not found')
        for key, value in (obj.get("data") or {}).items():
            env[prefix + key] = base64.b64decode(value).decode() if decode else str(value)
    for var in container.get("env") or []:
        name = var["name"]
        if "valueFrom" not in var:
            env[name] = expand(str(var.get("value", "")), env)
            continue
        source = var["valueFrom"]
        value: str | None
        if "fieldRef" in source:
            value = _field(pod, source["fieldRef"].get("fieldPath", ""))
        elif "secretKeyRef" in source:
            value = _key("secret", secrets, namespace, source["secretKeyRef"], decode=True)
        elif "configMapKeyRef" in source:
            value = _key("configmap", configmaps, namespace, source["configMapKeyRef"], decode=False)
        elif "resourceFieldRef" in source:
            value = _resource(container, source["resourceFieldRef"])
        else:
            raise EnvResolutionError(f"env {name}: unsupported valueFrom {sorted(source)}")
        if value is not None:
            env[name] = value
    return env

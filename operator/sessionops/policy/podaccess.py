"""What an Agent's pod-shaping fields would give its author, as SubjectAccessReviews (pure).

The operator creates worker Jobs with its own rights, so an Agent's ``spec.worker`` must not
let its author do through the operator what the author could not do directly. Whoever sets
these fields must be allowed what a Pod with them would need:

==================================================  =======================================
field                                               the author must be allowed
==================================================  =======================================
any of ``spec.worker`` (image, resources,           ``create pods`` in the namespace
serviceAccountName, nodeSelector, tolerations, env)
``env[i].valueFrom.secretKeyRef``                   ``get secrets <name>``
``env[i].valueFrom.configMapKeyRef``                ``get configmaps <name>``
``serviceAccountName`` other than the worker's      ``impersonate serviceaccounts <name>``
``mcpServers[i].headersFrom.secretName``            ``get secrets <name>`` (the worker reads it)
==================================================  =======================================

The ServiceAccount rule is stricter than a plain API server, where ``create pods`` alone lets a
user run a pod as any ServiceAccount of the namespace: a worker runs as that account with the
operator's hands, past any policy engine that restricts who may use which account in a pod,
and ``impersonate serviceaccounts`` is the one RBAC verb that says "may act as this account"
(the built-in ``edit`` role has it, so ordinary namespace editors are not hindered).

Two more rules need no review: ``spec.worker.image`` and ``toolsImage`` must match the operator config's
``worker.allowedImages`` (glob patterns, default: the configured worker and tools images), and ``env`` may
not set what the worker's own behaviour depends on (``ENV_RESERVED``).

Admission checks these for the requester and records them (``AUTHOR_ANNOTATION``); before each
Job the operator checks them again for the recorded author against the current RBAC and the
current allow-list.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
from collections.abc import Mapping
from typing import Any

from sessionops.api.agent import AgentSpec, WorkerSettings
from sessionops.api.config import WorkerConfig
from sessionops.api.input import SubmittedBy
from sessionops.policy import authz

AUTHOR_ANNOTATION = "sessionops.dev/worker-settings-author"
"""Who last set the Agent's pod-shaping fields (JSON of ``SubmittedBy``); written by admission only."""

ENV_RESERVED_NAMES = frozenset({"DATABASE_URL", "HOME", "PATH", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                                "HOSTNAME"})
ENV_RESERVED_PREFIXES = ("SESSIONOPS_", "PYTHON", "LD_", "PG", "SSL_", "KUBERNETES_", "OPENAI_")
ENV_RESERVED_SUFFIXES = ("_PROXY",)
"""Names that steer the worker itself: its own settings (a later duplicate overrides the
operator's, e.g. the model endpoint that receives the model key), the interpreter and loader
(code from the writable workspace), libpq, TLS trust and proxies (traffic with credentials)."""


@dataclasses.dataclass(frozen=True)
class Need:
    """One permission a field requires of its author."""

    field: str
    verb: str
    resource: str
    name: str = ""
    group: str = ""

    def describe(self, namespace: str) -> str:
        what = {"secrets": "secret", "configmaps": "configmap", "serviceaccounts": "serviceaccount"}.get(
            self.resource, self.resource)
        target = f'{what} "{self.name}"' if self.name else self.resource
        return f'{self.verb} {target} in namespace "{namespace}"'

    def review_spec(self, subject: SubmittedBy, namespace: str) -> dict[str, Any]:
        return authz.review_spec(subject, namespace, self.verb, self.resource, self.name, group=self.group)

    def refusal(self, subject: SubmittedBy, namespace: str, reason: str = "") -> str:
        return f'user "{subject.username}" cannot {self.describe(namespace)}' + (f" ({reason})" if reason else "")


NOT_POD_SHAPING = frozenset({"commandTimeoutSeconds"})
"""Worker settings that only lower a bound the tools process enforces: no pod permission needed."""


def shapes_pod(worker: WorkerSettings | None) -> bool:
    """True when any pod-shaping field is set."""
    return worker is not None and any(v for k, v in worker.dump().items() if k not in NOT_POD_SHAPING)


def needs(spec: AgentSpec, config: WorkerConfig) -> list[Need]:
    """Every permission the Agent's fields require of whoever sets them, in field order."""
    out: list[Need] = []
    worker = spec.worker
    if shapes_pod(worker):
        assert worker is not None
        out.append(Need("spec.worker", "create", "pods"))
        account = worker.service_account_name
        if account and account != config.service_account_name:
            out.append(Need("spec.worker.serviceAccountName", "impersonate", "serviceaccounts", account))
        for i, var in enumerate(worker.env):
            source = var.get("valueFrom") if isinstance(var, dict) else None
            if not isinstance(source, dict):
                continue
            for key, resource in (("secretKeyRef", "secrets"), ("configMapKeyRef", "configmaps")):
                ref = source.get(key)
                if isinstance(ref, dict) and ref.get("name"):
                    out.append(Need(f"spec.worker.env[{i}].valueFrom.{key}", "get", resource, str(ref["name"])))
    for i, server in enumerate(spec.mcp_servers):
        if server.headers_from is not None:
            out.append(Need(f"spec.mcpServers[{i}].headersFrom.secretName", "get", "secrets",
                            server.headers_from.secret_name))
    return out


def image_allowed(image: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(image, p) for p in patterns)


def static_problems(worker: WorkerSettings | None, config: WorkerConfig) -> list[tuple[str, str]]:
    """(field, reason) for what needs no review: the image allow-list and reserved env names."""
    if worker is None:
        return []
    problems: list[tuple[str, str]] = []
    patterns = config.image_patterns()
    for field, image in (("spec.worker.image", worker.image), ("spec.worker.toolsImage", worker.tools_image)):
        if image and not image_allowed(image, patterns):
            problems.append((field, f"image {image!r} is not allowed by the operator "
                                    f"(worker.allowedImages: {', '.join(patterns)})"))
    for i, var in enumerate(worker.env):
        name = str(var.get("name", "")) if isinstance(var, dict) else ""
        if reserved_env(name):
            problems.append((f"spec.worker.env[{i}].name", f"{name!r} is reserved: it steers the worker itself "
                                                           "(sessionops settings, interpreter, TLS, proxies)"))
    return problems


def reserved_env(name: str) -> bool:
    upper = name.upper()
    return upper in ENV_RESERVED_NAMES or upper.startswith(ENV_RESERVED_PREFIXES) or \
        upper.endswith(ENV_RESERVED_SUFFIXES)


def author_of(annotations: Mapping[str, str] | None) -> SubmittedBy | None:
    raw = (annotations or {}).get(AUTHOR_ANNOTATION)
    if not raw:
        return None
    try:
        return SubmittedBy.model_validate(json.loads(raw))
    except ValueError:
        return None


def author_annotation(subject: SubmittedBy) -> str:
    return json.dumps(subject.dump(), sort_keys=True, separators=(",", ":"))


def authored_fields(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The fields whose author is recorded: a change to any of them makes the requester the author."""
    return {"worker": spec.get("worker"),
            "mcpHeaders": [((s or {}).get("headersFrom") or {}).get("secretName")
                           for s in spec.get("mcpServers") or [] if isinstance(s, dict)]}

"""Admission webhooks (kopf's webhook server). Paths: /sessionops-mutate, /sessionops-validate."""

from __future__ import annotations

import functools
import inspect
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import kopf

from sessionops import GROUP, VERSION
from sessionops.admission import (
    agents,
    authority,
    delegated,
    delegated_receipt,
    inputs,
    namespaces,
    receipt,
    sessions,
    status,
)
from sessionops.admission.errors import Rejection, parse
from sessionops.api.input import AgentInputSpec
from sessionops.api.names import INPUT_FINALIZER, SESSION_FINALIZER, SESSION_LABEL, owner_reference
from sessionops.api.session import AgentSessionSpec
from sessionops.manager.runtime import Runtime
from sessionops.platform import metrics
from sessionops.platform.configuration import ConfigError
from sessionops.policy import authz, egress, podaccess

MUTATE = "sessionops-mutate"
VALIDATE = "sessionops-validate"
logger = logging.getLogger(__name__)
STATUS = "sessionops-status"


def _deny(rejection: Rejection) -> kopf.AdmissionError:
    return kopf.AdmissionError(str(rejection), code=rejection.code)


def measured(kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Count each admission by outcome and time it (sessionops_admissions_total, _webhook_latency)."""
    is_async = inspect.iscoroutinefunction(fn)

    @functools.wraps(fn)
    async def wrapper(*args: Any, operation: str = "", **kwargs: Any) -> Any:
        started = time.perf_counter()
        outcome = "allowed"
        try:
            result = fn(*args, operation=operation, **kwargs)
            return await result if is_async else result
        except kopf.AdmissionError as e:
            outcome = f"denied_{e.code}"
            raise
        finally:
            metrics.ADMISSIONS.labels(kind=kind, operation=operation, outcome=outcome).inc()
            metrics.WEBHOOK_LATENCY.labels(kind=kind).observe(time.perf_counter() - started)
    return wrapper


def _submitted_by(userinfo: dict[str, Any]) -> dict[str, Any]:
    return authz.subject_of(userinfo).dump()


@kopf.on.mutate(GROUP, VERSION, "agentsessions", id=MUTATE, operations=["CREATE", "UPDATE"])
@functools.partial(measured, "AgentSession")
async def mutate_session(body: kopf.Body, old: Any, operation: str, patch: kopf.Patch, memo: Any,
                         warnings: list[str], userinfo: dict[str, Any], **_: Any) -> None:
    rt: Runtime = memo.runtime
    try:
        parse(AgentSessionSpec, {k: v for k, v in body.spec.items() if k != "contextSnapshot"})
        config = rt.config.current
        agent_name = (body.spec.get("agentRef") or {}).get("name", "")
        if operation == "CREATE":
            namespaces.check_served(body.metadata.namespace, config, rt.settings.namespace)
        if operation == "CREATE" and body.spec.get("delegation"):
            child = await delegated_receipt.admit_child(rt.kube, rt.config.current, body.metadata.namespace,
                                                        dict(body.spec), userinfo)
            snapshot = child.snapshot
            patch.metadata["labels"] = {**(body.metadata.labels or {}), **child.labels}
            patch.metadata["ownerReferences"] = child.owner_references(body.metadata.get("ownerReferences") or [])
        elif operation == "CREATE":
            agent = await rt.kube.get("agents", body.metadata.namespace, agent_name) if agent_name else None
            snapshot = sessions.session_snapshot_on_create(dict(body.spec), agent, config)
        else:
            snapshot = sessions.session_snapshot_on_update(dict(old), dict(body), config)
    except Rejection as r:
        raise _deny(r) from None
    except ConfigError as e:
        raise kopf.AdmissionError(f"sessionops has no valid configuration yet: {e}", code=503) from None
    if operation == "CREATE" and SESSION_FINALIZER not in (body.metadata.get("finalizers") or []):
        # kopf's finalizer, set at receipt: kopf's own finalizer patch on first sight would race
        # the first status write (a resourceVersion-tested JSON patch: HTTP 422, then a retry).
        patch.metadata["finalizers"] = [*(body.metadata.get("finalizers") or []), SESSION_FINALIZER]
    if snapshot is not None:
        wanted = snapshot.dump()
        if body.spec.get("contextSnapshot") != wanted:
            if operation == "CREATE" and body.spec.get("contextSnapshot") is not None:
                warnings.append("spec.contextSnapshot is server-owned: the value sent was replaced")
            patch.spec["contextSnapshot"] = wanted


@kopf.on.mutate(GROUP, VERSION, "agentinputs", id=MUTATE, operations=["CREATE", "UPDATE"])
@functools.partial(measured, "AgentInput")
async def mutate_input(body: kopf.Body, old: Any, operation: str, patch: kopf.Patch, memo: Any,
                       userinfo: dict[str, Any], dryrun: bool, warnings: list[str], **_: Any) -> None:
    rt: Runtime = memo.runtime
    if operation == "UPDATE":
        for key, value in inputs.carry_forward(dict(old.get("spec") or {}), dict(body.spec)).items():
            patch.spec[key] = value
        return
    if any(body.spec.get(k) is not None for k in inputs.SERVER_OWNED):
        warnings.append("spec.sequence, spec.contextSnapshot and spec.submittedBy are server-owned: "
                        "the values sent were replaced")
    try:
        parse(AgentInputSpec, {k: v for k, v in body.spec.items() if k not in inputs.SERVER_OWNED})
        namespaces.check_served(body.metadata.namespace, rt.config.current, rt.settings.namespace)
        on_behalf = await delegated_receipt.submitter(rt.kube, body.metadata.namespace, dict(body.metadata.labels or {}),
                                                       body.metadata.name or "", dict(body.spec), userinfo)
        allocated = await receipt.receive(rt.kube, rt.config.current, body.metadata.namespace, dict(body.spec),
                                          dry_run=dryrun)
    except Rejection as r:
        raise _deny(r) from None
    except ConfigError as e:
        raise kopf.AdmissionError(f"sessionops has no valid configuration yet: {e}", code=503) from None
    patch.spec["sequence"] = allocated.sequence
    patch.spec["contextSnapshot"] = allocated.receipt.snapshot.dump()
    patch.spec["submittedBy"] = on_behalf or _submitted_by(userinfo)
    if allocated.receipt.delivery is not None:
        patch.spec["delivery"] = allocated.receipt.delivery
    # Listed by session label; deleted with the session; a pending input's deletion
    # waits for the scheduler to take it out of the queue.
    patch.metadata["labels"] = {**(body.metadata.labels or {}), SESSION_LABEL: allocated.session["metadata"]["name"]}
    if INPUT_FINALIZER not in (body.metadata.get("finalizers") or []):
        patch.metadata["finalizers"] = [*(body.metadata.get("finalizers") or []), INPUT_FINALIZER]
    owners = [o for o in body.metadata.get("ownerReferences") or [] if o.get("kind") != "AgentSession"]
    # No blockOwnerDeletion: under OwnerReferencesPermissionEnforcement it would require every
    # sender to have update on agentsessions/finalizers; the input goes with its session anyway.
    patch.metadata["ownerReferences"] = [*owners, owner_reference(allocated.session, controller=False,
                                                                  block_owner_deletion=False)]


@kopf.on.validate(GROUP, VERSION, "agentinputs", id=VALIDATE, operations=["CREATE", "UPDATE"])
async def validate_input(body: kopf.Body, old: Any, operation: str, userinfo: dict[str, Any], memo: Any,
                         **_: Any) -> None:
    """Server-owned fields: present on CREATE (the mutating webhook ran), unchanged on UPDATE.
    ``submittedBy`` is the requester, or for a delegated input the parent run's submitter."""
    if operation == "CREATE":
        for key in inputs.SERVER_OWNED:
            if body.spec.get(key) is None:
                raise kopf.AdmissionError(f"spec.{key}: missing: the input was not admitted by the "
                                          "sessionops mutating webhook", code=422)
        try:
            on_behalf = await delegated_receipt.submitter(memo.runtime.kube, body.metadata.namespace,
                                                       dict(body.metadata.labels or {}), body.metadata.name or "",
                                                       dict(body.spec), userinfo)
        except Rejection as r:
            raise _deny(r) from None
        if on_behalf is not None:
            if body.spec.get("submittedBy") != on_behalf:
                raise kopf.AdmissionError("spec.submittedBy: must be the parent run's submitter", code=422)
        elif (body.spec.get("submittedBy") or {}).get("username") != userinfo.get("username"):
            raise kopf.AdmissionError("spec.submittedBy: must be the requesting user", code=422)
    else:
        for key in inputs.SERVER_OWNED:
            if body.spec.get(key) != (old.get("spec") or {}).get(key):
                raise kopf.AdmissionError(f"spec.{key}: server-owned and immutable", code=422)


@kopf.on.validate(GROUP, VERSION, "agentsessions", id=VALIDATE, operations=["CREATE", "UPDATE"])
def validate_session(body: kopf.Body, old: Any, operation: str, **_: Any) -> None:
    if body.spec.get("contextSnapshot") is None:
        raise kopf.AdmissionError("spec.contextSnapshot: missing: the session was not admitted by the "
                                  "sessionops mutating webhook", code=422)
    # Tree labels are set by admission for children only: a session that could set or change
    # them would escape its tree's bound and depth, or act inside another tree.
    old_labels = dict((old or {}).get("metadata", {}).get("labels") or {}) if operation == "UPDATE" else None
    if (problem := delegated.tree_label_problem(dict(body.metadata.labels or {}), old_labels,
                                                delegated=bool(body.spec.get("delegation")))):
        raise kopf.AdmissionError(problem, code=422)


@kopf.on.mutate(GROUP, VERSION, "agents", id=MUTATE, operations=["CREATE", "UPDATE"])
@functools.partial(measured, "Agent")
async def mutate_agent(body: kopf.Body, old: Any, operation: str, patch: kopf.Patch, userinfo: dict[str, Any],
                       **_: Any) -> None:
    """Records who set the pod-shaping fields (the identity re-checked before each Job); a
    client's own value is replaced, and an edit of other fields keeps the recorded author."""
    wanted = agents.recorded_author(dict(body.spec), dict((old or {}).get("spec") or {}) if old else None,
                                    dict((old or {}).get("metadata", {}).get("annotations") or {}),
                                    authz.subject_of(userinfo))
    if (body.metadata.annotations or {}).get(podaccess.AUTHOR_ANNOTATION) != wanted:
        patch.metadata["annotations"] = {podaccess.AUTHOR_ANNOTATION: wanted}


@kopf.on.validate(GROUP, VERSION, "agents", id=VALIDATE, operations=["CREATE", "UPDATE"])
@functools.partial(measured, "Agent")
async def validate_agent(body: kopf.Body, old: Any, operation: str, userinfo: dict[str, Any], memo: Any,
                         **_: Any) -> None:
    """The spec is valid; fields that changed are allowed to the requester: the image by the
    allow-list, what a pod with these settings needs by SubjectAccessReviews, MCP URLs by the
    egress policy."""
    rt: Runtime = memo.runtime
    spec = dict(body.spec)
    old_spec = dict((old or {}).get("spec") or {}) if operation == "UPDATE" else None
    requester = authz.subject_of(userinfo)
    try:
        parsed = agents.check_agent(spec)
        config = rt.config.current
        if old_spec is None or spec.get("mcpServers") != old_spec.get("mcpServers"):
            agents.check_mcp_urls(parsed, egress.Policy.of(config.mcp_egress, os.environ))
        annotations = dict(body.metadata.annotations or {})
        expected = agents.recorded_author(spec, old_spec, dict((old or {}).get("metadata", {}).get("annotations")
                                                              or {}), requester)
        if annotations.get(podaccess.AUTHOR_ANNOTATION) != expected:
            raise Rejection(f"metadata.annotations[{podaccess.AUTHOR_ANNOTATION}]",
                            "server-owned: set by the sessionops mutating webhook to who set the worker settings")
        if old_spec is None or podaccess.authored_fields(spec) != podaccess.authored_fields(old_spec):
            agents.check_static(parsed, config.worker)
            await authority.check_needs(rt.kube, podaccess.needs(parsed, config.worker), requester,
                                        body.metadata.namespace)
    except Rejection as r:
        raise _deny(r) from None
    except ConfigError as e:
        raise kopf.AdmissionError(f"sessionops has no valid configuration yet: {e}", code=503) from None


@kopf.on.validate(GROUP, VERSION, "agentruns", id=VALIDATE, operations=["UPDATE"])
def validate_run(body: kopf.Body, old: Any, userinfo: dict[str, Any], **_: Any) -> None:
    """Users may only request cancellation; the CRD's CEL rules say the same, this names the field."""
    before, after = dict(old.get("spec") or {}), dict(body.spec)
    for key in sorted(set(before) | set(after)):
        if key != "cancel" and before.get(key) != after.get(key):
            raise kopf.AdmissionError(f"spec.{key}: only spec.cancel may change on a run", code=422)


def _status_policy(rt: Runtime) -> status.Policy:
    return status.Policy(operator=status.operator_username(rt.settings.namespace, rt.settings.service_account),
                         break_glass_group=rt.settings.status_break_glass_group)


@kopf.on.validate(GROUP, VERSION, "agentsessions", id=STATUS, subresource="status", operations=["UPDATE"])
@kopf.on.validate(GROUP, VERSION, "agentinputs", id=STATUS, subresource="status", operations=["UPDATE"])
@kopf.on.validate(GROUP, VERSION, "agentruns", id=STATUS, subresource="status", operations=["UPDATE"])
@functools.partial(measured, "status")
async def validate_status(body: kopf.Body, old: Any, resource: kopf.Resource, userinfo: dict[str, Any], memo: Any,
                          warnings: list[str], **_: Any) -> None:
    """Status is the operator's record and, for its own run, the worker's (sessionops.admission.status)."""
    rt: Runtime = memo.runtime
    pod = None
    if (bound := status.bound_pod(userinfo)) is not None:
        pod = await rt.worker_pods.lookup(rt.kube.get_pod, *bound)
    try:
        warning = status.check(resource.plural, userinfo, dict(body), dict(old or {}), _status_policy(rt), pod)
    except Rejection as r:
        raise _deny(r) from None
    if warning:
        logger.warning(warning)
        warnings.append(warning)

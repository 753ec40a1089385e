"""The session controller's adapter: read, decide, apply. Each write is idempotent:
run names are deterministic (AlreadyExists means done), status patches set absolute
values, and finalizer removal is a no-op once removed."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from typing import Any

from sessionops import API_VERSION
from sessionops.api.config import OperatorConfig
from sessionops.api.names import (
    CLAIMED_AT_LABEL,
    INPUT_FINALIZER,
    SEQUENCE_LABEL,
    SESSION_FINALIZER,
    SESSION_LABEL,
    owner_reference,
)
from sessionops.api.timestamps import parse
from sessionops.delegation import reconcile as delegation
from sessionops.delegation.names import PARENT_RUN_LABEL, PARENT_SESSION_LABEL, TREE_LABEL, tree_root
from sessionops.platform import metrics
from sessionops.platform.errors import ApiException, Conflict
from sessionops.platform.kube import Kube
from sessionops.platform.locks import coalesced
from sessionops.scheduling import queue
from sessionops.views import InputView, SessionView

logger = logging.getLogger(__name__)

DEFAULT_TREE_BOUND = OperatorConfig.model_fields["delegation_concurrency"].default



def run_body(session: dict[str, Any], new: queue.NewRun) -> dict[str, Any]:
    # Runs carry their tree (counted against its bound) and, in a child, the delegating run.
    session_labels = session["metadata"].get("labels") or {}
    tree_labels = {k: session_labels[k] for k in (PARENT_RUN_LABEL, PARENT_SESSION_LABEL) if k in session_labels}
    return {
        "apiVersion": API_VERSION, "kind": "AgentRun",
        "metadata": {"name": new.name, "namespace": session["metadata"]["namespace"],
                     "labels": {SESSION_LABEL: session["metadata"]["name"], SEQUENCE_LABEL: str(new.head_sequence),
                                CLAIMED_AT_LABEL: str(new.claimed_at), TREE_LABEL: tree_root(session),
                                **tree_labels},
                     "ownerReferences": [owner_reference(session, controller=True, block_owner_deletion=True)]},
        "spec": {"sessionRef": {"name": session["metadata"]["name"]}, "inputs": new.inputs,
                 "contextSnapshot": new.snapshot, "cancel": False},
    }


def _same(current: Any, wanted: Any) -> bool:
    """Equal as stored: a merge patch's None removes a key, so None matches an absent key."""
    if isinstance(wanted, dict):
        current = current if isinstance(current, dict) else {}
        return all(_same(current.get(k), v) for k, v in wanted.items())
    return current == wanted


def _status_changed(current: dict[str, Any], wanted: dict[str, Any]) -> bool:
    # Skipping no-op writes matters twice: each write is an API call, and each one is also
    # a session event that would trigger another pass.
    return not _same(current, wanted)


async def reconcile_session(kube: Kube, namespace: str, name: str,
                            tree_bound: int = DEFAULT_TREE_BOUND) -> queue.Plan | None:
    return await coalesced("session", namespace, name, lambda: _reconcile(kube, namespace, name, tree_bound))


async def _reconcile(kube: Kube, namespace: str, name: str, tree_bound: int) -> queue.Plan | None:
    session = await kube.cached_get("agentsessions", namespace, name)
    if session is None:
        metrics.forget_session(namespace, name)  # its DELETED event may have come before this pass's write
        return None
    if TREE_LABEL not in (session["metadata"].get("labels") or {}):
        return await _pass(kube, session, None)
    # A child claims within its tree's bound.
    async with delegation.tree_slot(kube, namespace, tree_root(session), tree_bound) as held_back:
        return await _pass(kube, session, held_back)


async def _pass(kube: Kube, session: dict[str, Any], held_back: str | None) -> queue.Plan:
    namespace, name = session["metadata"]["namespace"], session["metadata"]["name"]
    selector = f"{SESSION_LABEL}={name}"
    inputs, runs = await asyncio.gather(kube.cached_list("agentinputs", namespace, selector),
                                        kube.cached_list("agentruns", namespace, selector))
    plan = queue.decide(session, inputs, runs, held_back, now=datetime.datetime.now(datetime.UTC))
    await apply(kube, session, inputs, plan)
    return plan


async def wake_held_back(kube: Kube, namespace: str, root: str, tree_bound: int) -> None:
    """A turn of the tree finished or started waiting: sessions held back by its bound may
    claim now. Each is an ordinary (idempotent) pass."""
    for session in await kube.cached_list("agentsessions", namespace, f"{TREE_LABEL}={root}"):
        if SessionView(session).held_back:
            await reconcile_session(kube, namespace, session["metadata"]["name"], tree_bound)


async def apply(kube: Kube, session: dict[str, Any], inputs: list[dict[str, Any]], plan: queue.Plan) -> None:
    namespace = session["metadata"]["namespace"]
    metrics.QUEUE_DEPTH.labels(namespace=namespace, session=session["metadata"]["name"]).set(
        plan.status["queue"]["pending"])
    if plan.create_run is not None:
        head = next((i for i in inputs if i["metadata"]["name"] == plan.create_run.inputs[0]), None)
        received = parse(head["metadata"].get("creationTimestamp")) if head is not None else None
        if received is not None:
            metrics.DISPATCH_LATENCY.observe(max(0.0, (datetime.datetime.now(datetime.UTC) - received).total_seconds()))
        # AlreadyExists: an earlier pass created it; the deterministic name makes this a no-op.
        with contextlib.suppress(Conflict):
            await kube.create("agentruns", namespace, run_body(session, plan.create_run))
    by_name = {i["metadata"]["name"]: i for i in inputs}
    for input_name, run in plan.consume.items():
        status: dict[str, Any] = {"phase": "Consumed"}
        if run is not None:
            status["run"] = run
        await _ignore_gone(kube.patch_status("agentinputs", namespace, input_name, {"status": status}))
    for input_name in plan.release:
        await drop_input_finalizer(kube, by_name[input_name])
    if _status_changed(SessionView(session).status, plan.status):
        await _ignore_gone(kube.patch_status("agentsessions", namespace, session["metadata"]["name"],
                                             {"status": plan.status}))


async def _ignore_gone(coro: Any) -> None:
    try:
        await coro
    except ApiException as e:
        if e.status != 404:  # deleted meanwhile: nothing left to update
            raise


async def release_orphan(kube: Kube, inp: dict[str, Any]) -> bool:
    """A deleting input whose session is gone has no queue to leave: drop our finalizer.
    Safe to repeat: once removed, the input is no longer ours to hold."""
    view = InputView(inp)
    if not view.deleting or INPUT_FINALIZER not in view.finalizers:
        return False
    if await kube.cached_get("agentsessions", view.namespace, view.session_name) is not None:
        return False
    # Fresh before letting go: dropping the finalizer of an input whose session does exist
    # (a store still filling after a restart) would lose a record its run may need.
    if await kube.get("agentsessions", view.namespace, view.session_name) is not None:
        return False  # the session's own pass decides (a consumed input may still be needed)
    await drop_input_finalizer(kube, inp)
    return True


async def drop_input_finalizer(kube: Kube, inp: dict[str, Any]) -> None:
    """Let a deleting input go. Safe to repeat: a gone input or a removed finalizer is done."""
    meta = inp["metadata"]
    finalizers = [f for f in meta.get("finalizers") or [] if f != INPUT_FINALIZER]
    await _ignore_gone(kube.patch("agentinputs", meta["namespace"], meta["name"],
                                  {"metadata": {"finalizers": finalizers}}))


async def ensure_session_finalizer(kube: Kube, session: dict[str, Any]) -> None:
    """Hold a session (admitted before the webhook set the finalizer) until its thread is
    deleted. Safe to repeat: a finalizer already present is left as it is."""
    meta = session["metadata"]
    finalizers = meta.get("finalizers") or []
    if SESSION_FINALIZER not in finalizers:
        await _ignore_gone(kube.patch("agentsessions", meta["namespace"], meta["name"],
                                      {"metadata": {"finalizers": [*finalizers, SESSION_FINALIZER]}}))


async def release_session(kube: Kube, session: dict[str, Any]) -> None:
    """Let a deleting session go (its thread is deleted). Safe to repeat: a gone session or a
    removed finalizer is done."""
    meta = session["metadata"]
    finalizers = [f for f in meta.get("finalizers") or [] if f != SESSION_FINALIZER]
    await _ignore_gone(kube.patch("agentsessions", meta["namespace"], meta["name"],
                                  {"metadata": {"finalizers": finalizers}}))

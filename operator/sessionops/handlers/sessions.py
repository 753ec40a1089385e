"""The session controller: every event of a session, its inputs or its runs reconciles
the session (level-triggered; event handlers keep no kopf bookkeeping on the object)."""

from __future__ import annotations

from typing import Any

import kopf

from sessionops import GROUP, VERSION, checkpoints, phases
from sessionops.api.run import TERMINAL_PHASES, RunPhase, WaitpointKind
from sessionops.delegation.names import PARENT_RUN_LABEL, TREE_LABEL
from sessionops.execution.reconcile import wake_held_runs
from sessionops.runtime import Runtime
from sessionops.scheduling.reconcile import reconcile_session, release_orphan, wake_held_back

FREES_A_SLOT = TERMINAL_PHASES | {RunPhase.WAITING.value}
"""Run phases that no longer count against the tree's bound."""


def _may_free_a_slot(run: dict[str, Any], *, deleted: bool) -> bool:
    """A child's turn ended or waits, or a parent started waiting on its children: a held-back
    sibling may claim now. Other runs never hold a tree back (no list call for them)."""
    labels = run.get("metadata", {}).get("labels") or {}
    status = run.get("status") or {}
    in_tree = PARENT_RUN_LABEL in labels or bool(status.get("children")) or \
        (status.get("waitpoint") or {}).get("kind") == WaitpointKind.DELEGATION.value
    return TREE_LABEL in labels and in_tree and (deleted or status.get("phase") in FREES_A_SLOT)


def _bound(memo: Any) -> int:
    return memo.runtime.config.current.delegation_concurrency


@kopf.on.event(GROUP, VERSION, "agentsessions")
async def session_changed(body: kopf.Body, name: str, namespace: str, type: str | None, memo: Any,
                          **_: Any) -> None:
    await phases.observe(memo.runtime.kube, dict(body), deleted=type == "DELETED")
    if type != "DELETED":
        await reconcile_session(memo.runtime.kube, namespace, name, _bound(memo))


@kopf.on.event(GROUP, VERSION, "agentinputs")
async def input_changed(body: kopf.Body, spec: kopf.Spec, namespace: str, memo: Any, **_: Any) -> None:
    if await release_orphan(memo.runtime.kube, dict(body)):
        return
    session = (spec.get("sessionRef") or {}).get("name")
    if session:
        await reconcile_session(memo.runtime.kube, namespace, session, _bound(memo))


@kopf.on.event(GROUP, VERSION, "agentruns")
async def run_changed(body: kopf.Body, spec: kopf.Spec, namespace: str, type: str | None, memo: Any,
                      **_: Any) -> None:
    await phases.observe(memo.runtime.kube, dict(body), deleted=type == "DELETED")
    session = (spec.get("sessionRef") or {}).get("name")
    if session:
        await reconcile_session(memo.runtime.kube, namespace, session, _bound(memo))
    if _may_free_a_slot(dict(body), deleted=type == "DELETED"):
        root = body.metadata.labels[TREE_LABEL]
        await wake_held_back(memo.runtime.kube, namespace, root, _bound(memo))
        await wake_held_runs(memo.runtime.kube, memo.runtime.config.current, namespace, root,
                             credentials=memo.runtime.credentials)


@kopf.timer(GROUP, VERSION, "agentsessions", interval=30, idle=10)
async def session_resync(name: str, namespace: str, memo: Any, **_: Any) -> None:
    """A safety net: a missed event is repaired within the interval."""
    rt: Runtime = memo.runtime
    await reconcile_session(rt.kube, namespace, name, _bound(memo))


@kopf.on.delete(GROUP, VERSION, "agentsessions")
async def session_deleted(uid: str, namespace: str, memo: Any, **_: Any) -> None:
    """The session's thread goes with it (in its namespace's schema, with the admin credential).
    Repeating is safe: deleting no rows is a no-op."""
    rt: Runtime = memo.runtime
    await checkpoints.adelete_thread(rt.checkpoint_dsn(namespace), uid)

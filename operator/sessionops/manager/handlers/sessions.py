"""The session controller: every event of a session, its inputs or its runs reconciles
the session (level-triggered). Event handlers only: kopf keeps no finalizer, diff base or
progress on sessions (each would be one more write per session, and kopf's first-sight
finalizer patch collided with our first status write); the session's own finalizer is set
at admission and dropped here once its thread is deleted."""

from __future__ import annotations

from typing import Any

from sessionops.api.names import SESSION_FINALIZER
from sessionops.api.run import TERMINAL_PHASES, RunPhase, WaitpointKind
from sessionops.delegation.names import PARENT_RUN_LABEL, TREE_LABEL
from sessionops.execution.reconcile import wake_held_runs
from sessionops.manager import phases
from sessionops.manager.runtime import Runtime
from sessionops.platform import checkpoints, metrics
from sessionops.scheduling.reconcile import (
    ensure_session_finalizer,
    reconcile_session,
    release_orphan,
    release_session,
    wake_held_back,
)
from sessionops.views import InputView, RunView

FREES_A_SLOT = TERMINAL_PHASES | {RunPhase.WAITING.value}
"""Run phases that no longer count against the tree's bound."""


def _may_free_a_slot(run: dict[str, Any], *, deleted: bool) -> bool:
    """A child's turn ended or waits, or a parent started waiting on its children: a held-back
    sibling may claim now. Other runs never hold a tree back (no list call for them)."""
    view = RunView(run)
    labels = view.labels
    in_tree = PARENT_RUN_LABEL in labels or bool(view.children) or \
        view.waitpoint_kind == WaitpointKind.DELEGATION.value
    return TREE_LABEL in labels and in_tree and (deleted or view.phase in FREES_A_SLOT)


def _bound(memo: Any) -> int:
    return memo.runtime.config.current.delegation_concurrency


async def session_changed(body: dict[str, Any], type: str | None, memo: Any, **_: Any) -> None:
    rt: Runtime = memo.runtime
    session = dict(body)
    rt.cache.see_session(session, deleted=type == "DELETED")
    await phases.observe(rt.kube, session, deleted=type == "DELETED", listed=type is None)
    if type == "DELETED":
        metrics.forget_session(session["metadata"]["namespace"], session["metadata"]["name"])
    else:
        await settle_session(rt, session)


async def settle_session(rt: Runtime, session: dict[str, Any]) -> None:
    """One pass over a session as it was just seen: its queue, and at the end of its life its
    thread. Each step is idempotent (see ``reconcile_session`` and ``release_session``)."""
    meta = session["metadata"]
    deleting = bool(meta.get("deletionTimestamp"))
    if not deleting and SESSION_FINALIZER not in (meta.get("finalizers") or []):
        # Admitted before the webhook set it: added once; that write's event reconciles.
        await ensure_session_finalizer(rt.kube, session)
        return
    await reconcile_session(rt.kube, meta["namespace"], meta["name"], rt.config.current.delegation_concurrency)
    if deleting and SESSION_FINALIZER in (meta.get("finalizers") or []):
        # The session's thread goes with it (deleting no rows is a no-op), then the session.
        await checkpoints.adelete_thread(rt.checkpoint_dsn(meta["namespace"]), meta["uid"])
        await release_session(rt.kube, session)


async def resync_session(rt: Runtime, namespace: str, name: str) -> None:
    """The safety scan's pass over a session the cache shows out of step."""
    # Fresh: the cache only said where to look, and a missed event is what a scan is for; the
    # read also puts the session as it is now into the store.
    session = await rt.kube.get("agentsessions", namespace, name)
    if session is not None:
        await settle_session(rt, session)


async def input_changed(body: dict[str, Any], namespace: str, type: str | None, memo: Any, **_: Any) -> None:
    received = dict(body)
    memo.runtime.cache.see_input(received, deleted=type == "DELETED")
    if await release_orphan(memo.runtime.kube, received):
        return
    session = InputView(received).session_name
    # A listed input (type None: a start or a re-list) needs no pass of its own: its session is
    # listed too, and that pass reads the complete store (one pass per session, not per input).
    if session and type is not None:
        await reconcile_session(memo.runtime.kube, namespace, session, _bound(memo))


async def run_changed(body: dict[str, Any], namespace: str, type: str | None, memo: Any, **_: Any) -> None:
    run = dict(body)
    memo.runtime.cache.see_run(run, deleted=type == "DELETED")
    await phases.observe(memo.runtime.kube, run, deleted=type == "DELETED", listed=type is None)
    session = RunView(run).session_name
    if session and type is not None:  # listed: the session's own listed pass covers it (see inputs)
        await reconcile_session(memo.runtime.kube, namespace, session, _bound(memo))
    if _may_free_a_slot(run, deleted=type == "DELETED"):
        root = run["metadata"]["labels"][TREE_LABEL]
        await wake_held_back(memo.runtime.kube, namespace, root, _bound(memo))
        await wake_held_runs(memo.runtime.kube, memo.runtime.config.current, namespace, root,
                             credentials=memo.runtime.credentials)

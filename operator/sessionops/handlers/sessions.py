"""The session controller: every event of a session, its inputs or its runs reconciles
the session (level-triggered; event handlers keep no kopf bookkeeping on the object)."""

from __future__ import annotations

from typing import Any

import kopf

from sessionops import GROUP, VERSION, checkpoints, phases
from sessionops.runtime import Runtime
from sessionops.scheduling.reconcile import reconcile_session, release_orphan


@kopf.on.event(GROUP, VERSION, "agentsessions")
async def session_changed(body: kopf.Body, name: str, namespace: str, type: str | None, memo: Any,
                          **_: Any) -> None:
    await phases.observe(memo.runtime.kube, dict(body), deleted=type == "DELETED")
    if type != "DELETED":
        await reconcile_session(memo.runtime.kube, namespace, name)


@kopf.on.event(GROUP, VERSION, "agentinputs")
async def input_changed(body: kopf.Body, spec: kopf.Spec, namespace: str, memo: Any, **_: Any) -> None:
    if await release_orphan(memo.runtime.kube, dict(body)):
        return
    session = (spec.get("sessionRef") or {}).get("name")
    if session:
        await reconcile_session(memo.runtime.kube, namespace, session)


@kopf.on.event(GROUP, VERSION, "agentruns")
async def run_changed(body: kopf.Body, spec: kopf.Spec, namespace: str, type: str | None, memo: Any,
                      **_: Any) -> None:
    await phases.observe(memo.runtime.kube, dict(body), deleted=type == "DELETED")
    session = (spec.get("sessionRef") or {}).get("name")
    if session:
        await reconcile_session(memo.runtime.kube, namespace, session)


@kopf.timer(GROUP, VERSION, "agentsessions", interval=30, idle=10)
async def session_resync(name: str, namespace: str, memo: Any, **_: Any) -> None:
    """A safety net: a missed event is repaired within the interval."""
    rt: Runtime = memo.runtime
    await reconcile_session(rt.kube, namespace, name)


@kopf.on.delete(GROUP, VERSION, "agentsessions")
async def session_deleted(uid: str, memo: Any, **_: Any) -> None:
    """The session's thread goes with it. Repeating is safe: deleting no rows is a no-op."""
    rt: Runtime = memo.runtime
    await checkpoints.adelete_thread(rt.settings.database_url, uid)

"""The cancellation adapter: observe the writers, stop them, clean the checkpoint through
the checkpoint-only graph, then write Cancelled. Safe to repeat at any point: every step
of the flow is re-derived from the objects, and each checkpoint commit is guarded."""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any

from sessionops import checkpoints, metrics
from sessionops.api.run import RunPhase
from sessionops.api.snapshot import ContextSnapshot
from sessionops.cancellation import flow
from sessionops.cancellation.checkpoint_graph import checkpoint_graph
from sessionops.cancellation.cleanup import STEPS, CleanupError, CleanupReport, cleanup_thread
from sessionops.delegation import reconcile as delegation
from sessionops.execution.segments import JobView
from sessionops.kube import Kube
from sessionops.locks import lock
from sessionops.timestamps import parse

logger = logging.getLogger(__name__)


def lease_name(session: str) -> str:
    return f"sessionops-{session}"


async def observe(kube: Kube, run: dict[str, Any]) -> flow.Execution:
    namespace = run["metadata"]["namespace"]
    segments = (run.get("status") or {}).get("segments") or []
    job = await kube.get_job(namespace, segments[-1]["job"]) if segments else None
    view = JobView.of(job)
    pods = await kube.running_pods(namespace, segments[-1]["job"]) if segments else 0
    lease = await kube.get_lease(namespace, lease_name(run["spec"]["sessionRef"]["name"]))
    spec = (lease or {}).get("spec") or {}
    renew = parse(spec.get("renewTime") or spec.get("acquireTime"))
    expires = renew + datetime.timedelta(seconds=spec.get("leaseDurationSeconds") or 0) if renew else None
    return flow.Execution(job_exists=view.exists, job_finished=view.finished, pods_running=pods,
                          lease_holder=spec.get("holderIdentity") or None, lease_expires_at=expires)


def clean_thread(dsn: str, snapshot: dict[str, Any], thread_id: str) -> CleanupReport:
    """Blocking: the three guarded commits on the session's thread (no model, no tool runs)."""
    with checkpoints.saver(dsn) as saver:
        graph = checkpoint_graph(ContextSnapshot.model_validate(snapshot), saver)
        return cleanup_thread(graph, {"configurable": {"thread_id": thread_id}})


async def reconcile_cancel(kube: Kube, dsn: str, namespace: str, name: str,
                           now: datetime.datetime | None = None) -> flow.CancelPlan | None:
    async with lock("run", namespace, name):
        return await _reconcile(kube, dsn, namespace, name, now)


async def _reconcile(kube: Kube, dsn: str, namespace: str, name: str,
                     now: datetime.datetime | None) -> flow.CancelPlan | None:
    run = await kube.get("agentruns", namespace, name)
    if run is None:
        return None
    now = now or datetime.datetime.now(datetime.UTC)
    # Cascading is repeated on every pass: cheap (absolute writes) and it catches a child
    # admitted just before the cancel was requested.
    active = 0
    if (run.get("status") or {}).get("phase") == RunPhase.CANCELLING.value:
        active = await delegation.cascade(kube, run, f"the parent run {name} was cancelled")
    plan = flow.decide(run, await observe(kube, run), now=now, active_children=active)
    if plan.status:
        await kube.patch_status("agentruns", namespace, name, {"status": plan.status})
    if plan.delete_job:
        await kube.delete_job(namespace, plan.delete_job)
    if plan.wait_reason:
        logger.info("run %s/%s cancelling: %s", namespace, name, plan.wait_reason)
    if not plan.run_cleanup:
        return plan
    session = await kube.get("agentsessions", namespace, run["spec"]["sessionRef"]["name"])
    thread_id = (session or {}).get("metadata", {}).get("uid")
    done = list(((run.get("status") or {}).get("cancellation") or {}).get("completedSteps") or [])
    if thread_id:  # a deleted session took its thread with it: nothing left to clean
        try:
            report = await asyncio.to_thread(clean_thread, dsn, run["spec"]["contextSnapshot"], thread_id)
        except Exception as e:  # any failure: say which step, stay Cancelling, the timer retries
            step = e.step if isinstance(e, CleanupError) else "Connect"
            metrics.CANCELLATION_STEP_FAILURES.labels(step=step).inc()
            await kube.patch_status("agentruns", namespace, name,
                                    {"status": flow.failed_step(run, step, str(e), now=now)})
            raise
        # Verified clean: every step is done, whether this call or an earlier one committed it.
        done = [s for s in STEPS if s in done or s in report.committed or s in report.skipped]
    await kube.patch_status("agentruns", namespace, name, {"status": flow.completed(run, done, now=now)})
    requested = parse(((run.get("status") or {}).get("cancellation") or {}).get("requestedAt"))
    if requested is not None:
        metrics.CANCELLATION_DURATION.observe(max(0.0, (now - requested).total_seconds()))
    return plan

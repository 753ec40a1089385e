"""The cancellation adapter: observe the writers, stop them, clean the checkpoint through
the checkpoint-only graph, then write Cancelled. Safe to repeat at any point: every step
of the flow is re-derived from the objects, and each checkpoint commit is guarded."""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any

from sessionops import GROUP, VERSION
from sessionops.api.names import RUN_LABEL, SESSION_LABEL, lease_name, owner_reference
from sessionops.api.run import RunPhase
from sessionops.api.snapshot import ContextSnapshot
from sessionops.api.timestamps import parse
from sessionops.api.transcript import chunk_name
from sessionops.cancellation import flow
from sessionops.cancellation.checkpoint_graph import checkpoint_graph
from sessionops.cancellation.cleanup import CANCEL_CONTENT, STEPS, CleanupError, CleanupReport, cleanup_thread
from sessionops.cancellation.transcript import cancelled_steps, chunk_writes
from sessionops.delegation import reconcile as delegation
from sessionops.platform import checkpoints, metrics
from sessionops.platform.kube import Kube
from sessionops.platform.locks import lock
from sessionops.views import JobView, RunView
from sessionops.views.lease import LeaseView
from sessionops.views.transcript import ChunkView, in_order, steps_in_order

logger = logging.getLogger(__name__)

TRANSCRIPTS = "agenttranscripts"
STEP_RECORD = "RecordCancelledCalls"
"""Not a checkpoint step (not in ``completedSteps``): named in the condition when it fails."""


async def observe(kube: Kube, run: dict[str, Any]) -> flow.Execution:
    namespace = run["metadata"]["namespace"]
    last = RunView(run).last_segment
    job = await kube.cached_get("jobs", namespace, last["job"]) if last else None
    view = JobView.of(job)
    # Fresh: the checkpoint is cleaned only once no writer is left, so whether a pod still runs
    # and who holds the Lease are read as they are now, not as last watched.
    pods = await kube.running_pods(namespace, last["job"]) if last else 0
    lease = await kube.get_lease(namespace, lease_name(RunView(run).session_name))
    held = LeaseView.of(lease or {})
    return flow.Execution(job_exists=view.exists, job_finished=view.finished, pods_running=pods,
                          lease_holder=held.holder, lease_expires_at=held.expires_at)


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
    # Fresh: the flow's status writes are absolute, not compare-and-swap, so they must start
    # from the run as it is (a cancellation is rare: one read per pass costs nothing at scale).
    run = await kube.get("agentruns", namespace, name)
    if run is None:
        return None
    now = now or datetime.datetime.now(datetime.UTC)
    # Cascading is repeated on every pass: cheap (absolute writes) and it catches a child
    # admitted just before the cancel was requested.
    active = 0
    if RunView(run).phase == RunPhase.CANCELLING.value:
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
    view = RunView(run)
    session = await kube.cached_get("agentsessions", namespace, view.session_name)  # its uid never changes
    thread_id = (session or {}).get("metadata", {}).get("uid")
    done = list(view.completed_steps)
    if thread_id:  # a deleted session took its thread with it: nothing left to clean
        try:
            report = await asyncio.to_thread(clean_thread, dsn, view.context_snapshot, thread_id)
        except Exception as e:  # any failure: say which step, stay Cancelling, the timer retries
            step = e.step if isinstance(e, CleanupError) else "Connect"
            metrics.CANCELLATION_STEP_FAILURES.labels(step=step).inc()
            await kube.patch_status("agentruns", namespace, name,
                                    {"status": flow.failed_step(run, step, str(e), now=now)})
            raise
        # Verified clean: every step is done, whether this call or an earlier one committed it.
        done = [s for s in STEPS if s in done or s in report.committed or s in report.skipped]
        try:
            recorded = await record_cancelled(kube, run, report.closed_calls, now)
        except Exception as e:  # stay Cancelling with a condition; the timer retries (idempotent)
            metrics.CANCELLATION_STEP_FAILURES.labels(step=STEP_RECORD).inc()
            await kube.patch_status("agentruns", namespace, name,
                                    {"status": flow.failed_step(run, STEP_RECORD, f"{type(e).__name__}: {e}",
                                                                now=now)})
            raise
        if recorded:
            logger.info("run %s/%s: %d cancelled call(s) added to the transcript", namespace, name, recorded)
    await kube.patch_status("agentruns", namespace, name, {"status": flow.completed(run, done, now=now)})
    requested = parse(view.cancel_requested_at)
    if requested is not None:
        metrics.CANCELLATION_DURATION.observe(max(0.0, (now - requested).total_seconds()))
    return plan


async def record_cancelled(kube: Kube, run: dict[str, Any], closed: list[str], now: datetime.datetime) -> int:
    """Append the run's calls the cleanup closed to its transcript, before the run is marked
    Cancelled (a reader that sees Cancelled reads them). Safe to repeat: a call whose result
    step is stored gets none, and the chunks are recomputed from what is stored."""
    if not closed:
        return 0
    namespace, name = run["metadata"]["namespace"], run["metadata"]["name"]
    # Fresh (transcripts are not watched): the worker may have written chunks until it stopped.
    items = in_order(await kube.list(TRANSCRIPTS, namespace, f"{RUN_LABEL}={name}"))
    last = RunView(run).last_segment
    at = now.astimezone(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    new = cancelled_steps(steps_in_order(items), set(closed),
                          text=CANCEL_CONTENT, segment=last["name"] if last else None, at=at)
    if not new:
        return 0
    stored = {ChunkView(c).index: c for c in items}
    for index, steps in chunk_writes(items, new):
        if index in stored:
            # A compare-and-swap on the chunk: no worker writes it any more (it was stopped first).
            await kube.patch(TRANSCRIPTS, namespace, chunk_name(name, index), {
                "metadata": {"resourceVersion": stored[index]["metadata"]["resourceVersion"]},
                "spec": {"steps": steps}})
        else:
            session = RunView(run).session_name
            await kube.create(TRANSCRIPTS, namespace, {
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "AgentTranscript",
                "metadata": {"name": chunk_name(name, index), "namespace": namespace,
                             "labels": {SESSION_LABEL: session, RUN_LABEL: name},
                             "ownerReferences": [owner_reference(run, kind="AgentRun")]},
                "spec": {"run": name, "session": session, "index": index, "steps": steps}})
    return len(new)

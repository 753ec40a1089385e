"""The run controller's adapter. Safe to repeat: Job names are deterministic
(AlreadyExists is success), status patches carry absolute values, and a consumed
resume input is not pending any more on the next pass."""

from __future__ import annotations

import datetime
import logging
from typing import Any

from sessionops.api.agent import WorkerSettings
from sessionops.api.config import OperatorConfig
from sessionops.execution import jobs, segments
from sessionops.kube import Kube
from sessionops.locks import coalesced
from sessionops.scheduling.names import SESSION_LABEL

logger = logging.getLogger(__name__)


async def worker_settings(kube: Kube, namespace: str, run: dict[str, Any]) -> WorkerSettings | None:
    """Pod settings are infrastructure, not agent behaviour: read from the current Agent."""
    source = (run["spec"]["contextSnapshot"].get("source") or {}).get("agentName")
    agent = await kube.get("agents", namespace, source) if source else None
    worker = ((agent or {}).get("spec") or {}).get("worker")
    return WorkerSettings.model_validate(worker) if worker else None


async def reconcile_run(kube: Kube, config: OperatorConfig, namespace: str, name: str,
                        now: datetime.datetime | None = None) -> segments.RunPlan | None:
    return await coalesced("run", namespace, name, lambda: _reconcile(kube, config, namespace, name, now))


async def _reconcile(kube: Kube, config: OperatorConfig, namespace: str, name: str,
                     now: datetime.datetime | None) -> segments.RunPlan | None:
    run = await kube.get("agentruns", namespace, name)
    if run is None or run["metadata"].get("deletionTimestamp"):
        return None
    last = ((run.get("status") or {}).get("segments") or [None])[-1]
    job = await kube.get_job(namespace, last["job"]) if last else None
    session = run["spec"]["sessionRef"]["name"]
    inputs = await kube.list("agentinputs", namespace, f"{SESSION_LABEL}={session}")
    plan = segments.decide(run, job, segments.pending_resumes(inputs, name),
                           now=now or datetime.datetime.now(datetime.UTC),
                           max_retries=config.worker.max_retries,
                           start_timeout_seconds=config.worker.start_timeout_seconds)
    await apply(kube, config, run, plan)
    return plan


async def apply(kube: Kube, config: OperatorConfig, run: dict[str, Any], plan: segments.RunPlan) -> None:
    namespace, name = run["metadata"]["namespace"], run["metadata"]["name"]
    if plan.delete_job:
        await kube.delete_job(namespace, plan.delete_job)
    if plan.reject_input:
        input_name, reason = plan.reject_input
        await kube.patch_status("agentinputs", namespace, input_name, {"status": {
            "phase": "Rejected", "conditions": [{"type": "Rejected", "status": "True", "reason": "StaleWaitpoint",
                                                 "message": reason}]}})
    # Status first: the segment is recorded before its Job exists, so a crash in between
    # re-creates the same Job name on the next pass instead of starting a second one.
    if plan.status:
        await kube.patch_status("agentruns", namespace, name, {"status": plan.status})
    if plan.start_segment is not None:
        n, kind, resume_input = plan.start_segment
        body = jobs.job_body(run, n, kind, config=config, worker=await worker_settings(kube, namespace, run),
                             resume_input=resume_input)
        await kube.create_job(namespace, body)
    if plan.consume_input:
        await kube.patch_status("agentinputs", namespace, plan.consume_input,
                                {"status": {"phase": "Consumed", "run": name}})

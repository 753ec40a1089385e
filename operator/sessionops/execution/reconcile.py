"""The run controller's adapter. Safe to repeat: Job names are deterministic
(AlreadyExists is success), status patches carry absolute values, and a consumed
resume input is not pending any more on the next pass."""

from __future__ import annotations

import datetime
import logging
from typing import Any

from sessionops.api.agent import WorkerSettings
from sessionops.api.config import OperatorConfig
from sessionops.api.run import RunPhase, SegmentKind, WaitpointKind
from sessionops.delegation import reconcile as delegation
from sessionops.delegation import tree
from sessionops.delegation.names import TREE_LABEL
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
    if segments.JobView.of(job).finished:
        # The run was read before the Job: a worker that wrote its verdict and exited between the
        # two reads would look Lost and be retried. Its write happened before its exit, which
        # happened before the Job finished, so a run read now includes it.
        run = await kube.get("agentruns", namespace, name)
        if run is None or run["metadata"].get("deletionTimestamp"):
            return None
    session = run["spec"]["sessionRef"]["name"]
    inputs = await kube.list("agentinputs", namespace, f"{SESSION_LABEL}={session}")
    now = now or datetime.datetime.now(datetime.UTC)
    plan = segments.decide(run, job, segments.pending_resumes(inputs, name), now=now,
                           max_retries=config.worker.max_retries,
                           start_timeout_seconds=config.worker.start_timeout_seconds,
                           delegation_due=await _delegation_due(kube, config, run, now))
    if plan.start_segment is not None and plan.start_segment[1] == SegmentKind.RESUME.value:
        return await _resume_within_bound(kube, config, run, plan)
    await apply(kube, config, run, plan)
    return plan


async def _resume_within_bound(kube: Kube, config: OperatorConfig, run: dict[str, Any],
                               plan: segments.RunPlan) -> segments.RunPlan | None:
    """A waiting turn that resumes runs again: it takes a slot of its tree like a claim does
    (under the same lock), or stays Waiting with the reason in ``status.heldBack``."""
    namespace, name = run["metadata"]["namespace"], run["metadata"]["name"]
    async with delegation.tree_slot(kube, namespace, delegation.tree_of(run), config.delegation_concurrency) as held:
        if held is not None:
            if (run.get("status") or {}).get("heldBack") != held:
                await kube.patch_status("agentruns", namespace, name, {"status": {"heldBack": held}})
            return None
        plan.status["heldBack"] = None
        await apply(kube, config, run, plan)
    return plan


async def wake_held_runs(kube: Kube, config: OperatorConfig, namespace: str, root: str) -> None:
    """A slot of the tree is free: resumes held back by its bound may start (ordinary passes)."""
    for run in await kube.list("agentruns", namespace, f"{TREE_LABEL}={root}"):
        if (run.get("status") or {}).get("heldBack"):
            await reconcile_run(kube, config, namespace, run["metadata"]["name"])


async def _delegation_due(kube: Kube, config: OperatorConfig, run: dict[str, Any], now: datetime.datetime) -> bool:
    """While a run waits on children: project them into its status; True once it may resume.
    At the deadline the children still active are cancelled: nobody awaits their result."""
    status = run.get("status") or {}
    if status.get("phase") != RunPhase.WAITING.value or \
            (status.get("waitpoint") or {}).get("kind") != WaitpointKind.DELEGATION.value:
        return False
    namespace, name = run["metadata"]["namespace"], run["metadata"]["name"]
    children = await delegation.observe(kube, run)
    due = tree.resume_due([c for _, c in children], since=tree.waiting_since(run), now=now,
                          timeout_seconds=config.delegation_timeout_seconds)
    was_cut = {c.get("session") for c in status.get("children") or [] if c.get("cutOff")}
    wanted = [tree.child_status(given, child, cut_off=child.session_name in was_cut or
                                (due.deadline_passed and not tree.ended(child))).dump()
              for given, child in children]
    if wanted != status.get("children"):
        await kube.patch_status("agentruns", namespace, name, {"status": {"children": wanted}})
    if due.deadline_passed:
        await delegation.cascade(kube, run, f"the parent run {name} stopped waiting after "
                                            f"{config.delegation_timeout_seconds}s")
    return due.due


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

"""The run controller's adapter. Safe to repeat: Job names are deterministic
(AlreadyExists is success), status patches carry absolute values, and a consumed
resume input is not pending any more on the next pass."""

from __future__ import annotations

import datetime
import logging
from typing import Any

from sessionops.api import conditions
from sessionops.api.agent import WorkerSettings
from sessionops.api.config import OperatorConfig
from sessionops.api.names import SESSION_LABEL
from sessionops.api.run import RunPhase, SegmentKind, WaitpointKind
from sessionops.api.run_conditions import with_phase
from sessionops.api.timestamps import iso
from sessionops.delegation import reconcile as delegation
from sessionops.delegation import tree
from sessionops.delegation.names import TREE_LABEL
from sessionops.execution import authorship, jobs, segments
from sessionops.execution.credentials import CredentialError, NamespaceCredentials
from sessionops.platform.errors import Conflict, Invalid
from sessionops.platform.kube import Kube
from sessionops.platform.locks import coalesced
from sessionops.views import JobView, RunView

logger = logging.getLogger(__name__)


async def source_agent(kube: Kube, namespace: str, run: dict[str, Any]) -> dict[str, Any] | None:
    source = RunView(run).source_agent
    return await kube.cached_get("agents", namespace, source) if source else None


def worker_settings(agent: dict[str, Any] | None) -> WorkerSettings | None:
    """Pod settings are infrastructure, not agent behaviour: read from the current Agent."""
    worker = ((agent or {}).get("spec") or {}).get("worker")
    return WorkerSettings.model_validate(worker) if worker else None


async def reconcile_run(kube: Kube, config: OperatorConfig, namespace: str, name: str,
                        now: datetime.datetime | None = None, *,
                        credentials: NamespaceCredentials | None = None) -> segments.RunPlan | None:
    """``credentials``: the namespace's database credential is made sure of before a Job starts
    (None: not this caller's job, e.g. unit tests without a database)."""
    return await coalesced("run", namespace, name,
                           lambda: _reconcile(kube, config, namespace, name, now, credentials))


async def _reconcile(kube: Kube, config: OperatorConfig, namespace: str, name: str,
                     now: datetime.datetime | None,
                     credentials: NamespaceCredentials | None = None) -> segments.RunPlan | None:
    run = await kube.cached_get("agentruns", namespace, name)
    if run is None or run["metadata"].get("deletionTimestamp"):
        return None
    last = RunView(run).last_segment
    job = await kube.cached_get("jobs", namespace, last["job"]) if last else None
    if JobView.of(job).finished:
        # The run was read before the Job: a worker that wrote its verdict and exited between the
        # two reads would look Lost and be retried. Its write happened before its exit, which
        # happened before the Job finished, so a run read now includes it: a fresh read (the
        # run's watch may lag the Job's), once per finished segment.
        run = await kube.get("agentruns", namespace, name)
        if run is None or run["metadata"].get("deletionTimestamp"):
            return None
    session = RunView(run).session_name
    inputs = await kube.cached_list("agentinputs", namespace, f"{SESSION_LABEL}={session}")
    now = now or datetime.datetime.now(datetime.UTC)
    plan = segments.decide(run, job, segments.pending_resumes(inputs, name), now=now,
                           max_retries=config.worker.max_retries,
                           start_timeout_seconds=config.worker.start_timeout_seconds,
                           delegation_due=await _delegation_due(kube, config, run, now),
                           pod_trouble=await _pod_trouble(kube, namespace, last, job),
                           config_error_seconds=config.worker.config_error_seconds)
    if plan.start_segment is not None and plan.start_segment[1] == SegmentKind.RESUME.value:
        return await _resume_within_bound(kube, config, run, plan, inputs, credentials)
    await apply(kube, config, run, plan, inputs, credentials=credentials)
    return plan


async def _pod_trouble(kube: Kube, namespace: str, last: dict[str, Any] | None,
                       job: dict[str, Any] | None) -> segments.PodTrouble | None:
    """Only a segment whose pod has not started yet is worth a look at its pods (a read,
    never a write: the happy path costs no API write for this)."""
    if last is None or last.get("outcome") is not None or job is None:
        return None
    view = JobView.of(job)
    if view.started or view.finished:
        return None
    pods = await kube.cached_list("pods", namespace, f"job-name={last['job']}")
    creating = [p["metadata"]["name"] for p in pods for cs in (p.get("status") or {}).get("containerStatuses") or []
                if ((cs.get("state") or {}).get("waiting") or {}).get("reason") == "ContainerCreating"]
    events = [e for pod in dict.fromkeys(creating) for e in await kube.failed_mounts(namespace, pod)]
    return segments.PodTrouble.of(pods, events)


async def _resume_within_bound(kube: Kube, config: OperatorConfig, run: dict[str, Any],
                               plan: segments.RunPlan, inputs: list[dict[str, Any]],
                               credentials: NamespaceCredentials | None = None) -> segments.RunPlan | None:
    """A waiting turn that resumes runs again: it takes a slot of its tree like a claim does
    (under the same lock), or stays Waiting with the reason in ``status.heldBack``."""
    namespace, name = run["metadata"]["namespace"], run["metadata"]["name"]
    async with delegation.tree_slot(kube, namespace, delegation.tree_of(run), config.delegation_concurrency) as held:
        if held is not None:
            if RunView(run).held_back != held:
                await kube.patch_status("agentruns", namespace, name, {"status": {"heldBack": held}})
            return None
        plan.status["heldBack"] = None
        await apply(kube, config, run, plan, inputs, credentials=credentials)
    return plan


async def wake_held_runs(kube: Kube, config: OperatorConfig, namespace: str, root: str, *,
                         credentials: NamespaceCredentials | None = None) -> None:
    """A slot of the tree is free: resumes held back by its bound may start (ordinary passes)."""
    for run in await kube.cached_list("agentruns", namespace, f"{TREE_LABEL}={root}"):
        if RunView(run).held_back:
            await reconcile_run(kube, config, namespace, run["metadata"]["name"], credentials=credentials)


async def _delegation_due(kube: Kube, config: OperatorConfig, run: dict[str, Any], now: datetime.datetime) -> bool:
    """While a run waits on children: project them into its status; True once it may resume.
    At the deadline the children still active are cancelled: nobody awaits their result."""
    view = RunView(run)
    if view.phase != RunPhase.WAITING.value or view.waitpoint_kind != WaitpointKind.DELEGATION.value:
        return False
    namespace, name = run["metadata"]["namespace"], run["metadata"]["name"]
    children = await delegation.observe(kube, run)
    due = tree.resume_due([c for _, c in children], since=tree.waiting_since(run), now=now,
                          timeout_seconds=config.delegation_timeout_seconds)
    was_cut = {c.get("session") for c in view.children if c.get("cutOff")}
    wanted = [tree.child_status(given, child, cut_off=child.session_name in was_cut or
                                (due.deadline_passed and not tree.ended(child))).dump()
              for given, child in children]
    if wanted != list(view.children):
        await kube.patch_status("agentruns", namespace, name, {"status": {"children": wanted}})
    if due.deadline_passed:
        await delegation.cascade(kube, run, f"the parent run {name} stopped waiting after "
                                            f"{config.delegation_timeout_seconds}s")
    return due.due


async def apply(kube: Kube, config: OperatorConfig, run: dict[str, Any], plan: segments.RunPlan,
                inputs: list[dict[str, Any]] | None = None, *,
                credentials: NamespaceCredentials | None = None) -> None:
    namespace, name = run["metadata"]["namespace"], run["metadata"]["name"]
    now = datetime.datetime.now(datetime.UTC)
    if plan.start_segment is not None and credentials is not None:
        # Before anything is written: without its credential the segment would not start, and
        # the run says why on its Ready condition until a later pass (event or scan) succeeds.
        try:
            await credentials.ensure(kube, config, namespace)
        except CredentialError as e:
            await _credential_trouble(kube, run, str(e), now)
            return
    if plan.delete_job:
        await kube.delete_job(namespace, plan.delete_job)
    if plan.reject_input:
        input_name, reason = plan.reject_input
        stored = next((i for i in inputs or [] if i["metadata"]["name"] == input_name), {"metadata": {}})
        await kube.patch_status("agentinputs", namespace, input_name, {"status": {
            "phase": "Rejected",
            "conditions": conditions.updated(stored, [conditions.condition("Rejected", True, "StaleWaitpoint",
                                                                           reason)], now)}})
    # Status first: the segment is recorded before its Job exists, so a crash in between
    # re-creates the same Job name on the next pass instead of starting a second one.
    if plan.status:
        try:
            # A compare-and-swap: the conditions list is computed from this read, and the
            # worker writes the same list; a stale write would undo its verdict's conditions.
            run = await kube.patch_status("agentruns", namespace, name, {
                "metadata": {"resourceVersion": run["metadata"]["resourceVersion"]}, "status": plan.status})
        except Conflict:
            logger.debug("run %s/%s changed since it was read: the event of that change decides again",
                         namespace, name)
            return
    if plan.start_segment is not None:
        n, kind, resume_input = plan.start_segment
        agent = await source_agent(kube, namespace, run)
        if (refused := await authorship.refusal(kube, config, agent)) is not None:
            await _invalid_job(kube, run, f"{name}-{n}", refused, now, reason=authorship.REASON)
            await kube.post_event(run, type_="Warning", reason=authorship.REASON, message=refused)
            return
        body = jobs.job_body(run, n, kind, config=config, worker=worker_settings(agent), resume_input=resume_input)
        try:
            await kube.create_job(namespace, body)
        except Invalid as e:
            await _invalid_job(kube, run, f"{body['metadata']['name']}", str(e), now)
            return
    if plan.consume_input:
        await kube.patch_status("agentinputs", namespace, plan.consume_input,
                                {"status": {"phase": "Consumed", "run": name}})


async def _credential_trouble(kube: Kube, run: dict[str, Any], error: str, now: datetime.datetime) -> None:
    """Ready False naming the failed provisioning step; written only when it changed. Safe to
    repeat: an absolute condition."""
    namespace, name = run["metadata"]["namespace"], run["metadata"]["name"]
    logger.warning("run %s/%s: %s", namespace, name, error)
    wanted = conditions.condition("Ready", False, "DatabaseCredentialFailed", error)
    current = RunView(run).conditions
    updated = conditions.updated(run, [wanted], now)
    if updated != current:
        await kube.patch_status("agentruns", namespace, name, {"status": {"conditions": updated}})


async def _invalid_job(kube: Kube, run: dict[str, Any], job: str, error: str, now: datetime.datetime,
                       reason: str = "InvalidPodSpec") -> None:
    """The API server refuses the segment's Job (an invalid pod spec, e.g. a bad env name in the
    Agent's worker settings), or the Agent's worker settings are not allowed any more: fail the
    run with the reason, no retry (the same body fails again).
    Safe to repeat: absolute values, and a failed run starts no segment."""
    namespace, name = run["metadata"]["namespace"], run["metadata"]["name"]
    segs = [dict(s) for s in RunView(run).segments]
    if segs:
        segs[-1].update(outcome=segments.NOT_STARTED, finishedAt=iso(now), reason=f"{reason}: {error}")
    await kube.patch_status("agentruns", namespace, name, {"status": with_phase(
        run, {"segments": segs, "phase": RunPhase.FAILED.value, "waitpoint": None}, now,
        reason=reason, message=f"job {job}: {error}")})

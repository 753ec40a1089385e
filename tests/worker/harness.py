"""The worker's test stack without the operator: the test cluster, the pod runner (real
worker subprocesses), PostgreSQL and the replay model over HTTP.

The test stands in for admission and the scheduler: it writes objects as the admission
webhook would (``contextSnapshot``, ``sequence``, ``submittedBy``) and creates runs as the
scheduler would. ``reconcile`` is a pass of the run controller itself: its pure decision
(``sessionops.execution.segments.decide``) applied by its own adapter
(``sessionops.execution.reconcile.apply``), so segments and Jobs are what the operator creates.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.types import StateSnapshot

from sessionops.api.config import OperatorConfig
from sessionops.api.input import SubmittedBy
from sessionops.api.names import SESSION_LABEL
from sessionops.api.snapshot import ContextSnapshot, SnapshotSource
from sessionops.cancellation import checkpoint_graph
from sessionops.execution import reconcile, segments
from sessionops.platform import checkpoints
from sessionops.platform.kube import Kube
from sessionops.platform.worker_kube import CUSTOM, WorkerKube
from sessionops.replay import ReplayServer
from sessionops.views import RunView
from testcluster import FaithfulCluster
from testcluster.podrunner import Execution, PodRunner
from tests import identities

NS = "team-a"
ALICE = SubmittedBy(username="alice", uid="uid-alice", groups=["team-a-devs", "system:authenticated"])
ALICE_EDIT = "alice-edit"
"""alice's RoleBinding to the aggregated ``edit`` ClusterRole in NS: what lets her use agents there."""
OPERATOR_NS = "sessionops-system"
MCP_HEADER_SECRETS = ("calc-headers",)
"""Secrets the stack's workers may read (chart value ``worker.rbac.secretNames``): MCP headers."""
POLL = 0.05


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30) -> Any:
    """Poll ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(POLL)


@dataclasses.dataclass
class Stack:
    cluster: FaithfulCluster
    kube: WorkerKube
    operator: Kube
    """The run controller's own client (the administrator's kubeconfig, as the operator's is)."""
    runner: PodRunner
    replay: ReplayServer
    dsn: str
    config: OperatorConfig
    workdirs: Path
    sequence: int = 0

    # Objects, as admission would write them.
    def create(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        body.setdefault("apiVersion", "sessionops.dev/v1alpha1")
        body.setdefault("metadata", {}).setdefault("namespace", NS)
        return self.kube.request("POST", f"{CUSTOM}/namespaces/{NS}/{plural}", body=body)

    def get(self, plural: str, name: str) -> dict[str, Any]:
        obj = self.kube.get(plural, NS, name)
        assert obj is not None, f"{plural}/{name} not found"
        return obj

    def patch_status(self, plural: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        # Warn is the real API server's default field validation (the test cluster's is Strict):
        # the run controller's segments carry a "reason" the CRD does not declare (reported).
        return self.kube.request("PATCH", f"{CUSTOM}/namespaces/{NS}/{plural}/{name}/status",
                                 body={"status": status}, content_type="application/merge-patch+json",
                                 query={"fieldValidation": "Warn"})

    def patch(self, plural: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.kube.request("PATCH", f"{CUSTOM}/namespaces/{NS}/{plural}/{name}", body=body,
                                 content_type="application/merge-patch+json")

    # alice's permissions, as an administrator changes them (RBAC has no deny: narrowing is re-granting).
    def restrict_alice(self, rules: list[dict[str, Any]]) -> None:
        """Replace alice's ``edit`` binding in NS by a Role with exactly these rules."""
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}"
        self.kube.request("DELETE", f"{rbac}/rolebindings/{ALICE_EDIT}")
        self.kube.request("POST", f"{rbac}/roles", body=identities.role("alice-only", NS, rules))
        self.kube.request("POST", f"{rbac}/rolebindings",
                          body=identities.binding_to_role("alice-only", NS, "alice-only", users=[ALICE.username]))

    def restore_alice(self) -> None:
        """Back to the ``edit`` binding of the fixture."""
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}"
        self.kube.request("DELETE", f"{rbac}/rolebindings/alice-only")
        self.kube.request("POST", f"{rbac}/rolebindings",
                          body=identities.role_binding(ALICE_EDIT, NS, "edit", users=[ALICE.username]))

    def agent(self, name: str = "helper", **spec: Any) -> dict[str, Any]:
        return self.create("agents", {"kind": "Agent", "metadata": {"name": name},
                                      "spec": {"systemPrompt": "You are a test agent.", **spec}})

    def snapshot(self, scenario: str, *, approval: str = "Default", agent: str = "helper",
                 **fields: Any) -> dict[str, Any]:
        return ContextSnapshot(system_prompt="You are a test agent.", model=f"replay/{scenario}",
                               approval_mode=approval, source=SnapshotSource(agent_name=agent),
                               **fields).dump()

    def session(self, name: str, snapshot: dict[str, Any], agent: str = "helper") -> dict[str, Any]:
        return self.create("agentsessions", {"kind": "AgentSession", "metadata": {"name": name},
                                             "spec": {"agentRef": {"name": agent}, "contextSnapshot": snapshot}})

    def _input(self, name: str, session: str, spec: dict[str, Any], user: SubmittedBy | None) -> dict[str, Any]:
        self.sequence += 1
        snapshot = self.get("agentsessions", session)["spec"]["contextSnapshot"]
        spec = {"sessionRef": {"name": session}, "sequence": self.sequence, "contextSnapshot": snapshot, **spec}
        if user is not None:
            spec["submittedBy"] = user.dump()
        return self.create("agentinputs", {"kind": "AgentInput",
                                           "metadata": {"name": name, "labels": {SESSION_LABEL: session}},
                                           "spec": spec})

    def message(self, name: str, session: str, *texts: str, delivery: str = "FollowUp",
                user: SubmittedBy | None = ALICE) -> dict[str, Any]:
        return self._input(name, session, {"kind": "Message", "delivery": delivery,
                                           "messages": [{"content": t} for t in texts]}, user)

    def resume(self, name: str, run: str, *, answers: list[Any] | None = None,
               decisions: list[dict[str, Any]] | None = None, user: SubmittedBy | None = ALICE) -> dict[str, Any]:
        current = self.get("agentruns", run)
        spec: dict[str, Any] = {"kind": "Resume", "run": run, "waitpointId": current["status"]["waitpoint"]["id"]}
        if answers is not None:
            spec["answers"] = answers
        if decisions is not None:
            spec["decisions"] = decisions
        return self._input(name, current["spec"]["sessionRef"]["name"], spec, user)

    def turn(self, name: str, session: str, inputs: list[str]) -> dict[str, Any]:
        """An AgentRun as the scheduler creates it: the head input's snapshot; inputs consumed."""
        head = self.get("agentinputs", inputs[0])
        run = self.create("agentruns", {"kind": "AgentRun", "metadata": {"name": name, "labels": {
            SESSION_LABEL: session}}, "spec": {"sessionRef": {"name": session}, "inputs": inputs,
                                               "contextSnapshot": head["spec"]["contextSnapshot"]}})
        for inp in inputs:
            self.patch_status("agentinputs", inp, {"phase": "Consumed", "run": name})
        return run

    # The run controller.
    def reconcile(self, run_name: str) -> segments.RunPlan:
        """One pass of the run controller: its decision, applied by its adapter (no delegation
        here, and the fixture provisioned the namespace's database credential)."""
        run = self.get("agentruns", run_name)
        last = RunView(run).last_segment
        job = self.job(last["job"]) if last else None
        inputs = self.kube.list_inputs(NS, RunView(run).session_name)
        plan = segments.decide(run, job, segments.pending_resumes(inputs, run_name),
                               now=datetime.datetime.now(datetime.UTC), max_retries=self.config.worker.max_retries,
                               start_timeout_seconds=self.config.worker.start_timeout_seconds)
        asyncio.run(reconcile.apply(self.operator, self.config, run, plan, inputs))
        return plan

    def segment(self, run_name: str, *, timeout: float = 60) -> tuple[dict[str, Any], Execution]:
        """Start the next segment, let the worker run it to its exit, record the outcome."""
        plan = self.reconcile(run_name)
        assert plan.start_segment is not None, f"the operator would start no segment: {plan}"
        job = f"{run_name}-{plan.start_segment[0]}"
        execution = self.runner.wait_execution(job, timeout=timeout)
        wait_for(f"job {job} to finish", lambda: self.job_finished(job))
        self.reconcile(run_name)
        return self.get("agentruns", run_name), execution

    def job(self, name: str) -> dict[str, Any] | None:
        return self.kube.read(f"/apis/batch/v1/namespaces/{NS}/jobs/{name}")

    def job_finished(self, name: str) -> bool:
        job = self.job(name) or {}
        return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                   for c in (job.get("status") or {}).get("conditions") or [])

    def lease(self, session: str) -> dict[str, Any] | None:
        return self.kube.get_lease(NS, f"sessionops-{session}")

    # Observations.
    def transcript(self, run: str) -> list[dict[str, Any]]:
        """The run's transcript steps, chunk after chunk, as a reader gets them from the API."""
        chunks = self.kube.list_transcripts(NS, run)
        return [s for c in sorted(chunks, key=lambda c: c["spec"]["index"]) for s in c["spec"]["steps"]]

    def requests(self, scenario: str | None = None) -> list[dict[str, Any]]:
        return [r for r in list(self.replay.records) if scenario is None or r["scenario"] == scenario]

    def workdir(self, session: str) -> Path:
        path = self.workdirs / NS / session
        path.mkdir(parents=True, exist_ok=True)
        return path

    def thread(self, session: str) -> StateSnapshot:
        """The thread's current state, read through the checkpoint-only graph (nothing runs)."""
        sess = self.get("agentsessions", session)
        snapshot = ContextSnapshot.model_validate(sess["spec"]["contextSnapshot"])
        with checkpoints.saver(self.dsn) as saver:
            graph = checkpoint_graph(snapshot, saver)
            return graph.get_state({"configurable": {"thread_id": sess["metadata"]["uid"]}})

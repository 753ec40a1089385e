"""The run controller never retries a segment whose worker wrote its verdict and exited 0.

The race (seen as 2 spurious ``Lost`` -> ``Retry`` segments in 200 runs): the controller read
the run while the worker was still running, the worker then wrote ``Succeeded`` and exited,
and the controller read the Job as complete. Decided from those two reads the segment looked
Lost. Here the API answers in exactly that order.
"""

from __future__ import annotations

import copy
import datetime
from typing import Any

from sessionops.execution.reconcile import reconcile_run
from tests.factories import config

NOW = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.UTC)


def run(phase: str) -> dict[str, Any]:
    return {"metadata": {"name": "s-t1", "namespace": "team-a", "uid": "u1", "resourceVersion": "7"},
            "spec": {"sessionRef": {"name": "s"}, "inputs": ["i1"],
                     "contextSnapshot": {"systemPrompt": "p", "model": "m", "approvalMode": "Default"}},
            "status": {"phase": phase, "segments": [{"name": "s-t1-1", "kind": "Start", "job": "s-t1-1",
                                                     "startedAt": "2026-12-03T11:59:00Z"}]}}


COMPLETE_JOB = {"metadata": {"name": "s-t1-1", "creationTimestamp": "2026-12-03T11:59:00Z"},
                "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}}


class RacingKube:
    """The store holds the run as the watch last delivered it (``runs[0]``); a fresh read
    returns it as the API server has it now (``runs[-1]``: the worker's verdict landed)."""

    def __init__(self, runs: list[dict[str, Any]], job: dict[str, Any]) -> None:
        self.runs, self.job = runs, job
        self.patches: list[dict[str, Any]] = []
        self.created: list[dict[str, Any]] = []

    async def cached_get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        if plural == "jobs":
            return copy.deepcopy(self.job)
        assert plural == "agentruns", plural
        return copy.deepcopy(self.runs[0])

    async def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        assert plural == "agentruns", plural
        return copy.deepcopy(self.runs[-1])

    async def cached_list(self, plural: str, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        return []

    async def patch_status(self, plural: str, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self.patches.append(body)
        stored = copy.deepcopy(self.runs[0])
        stored["status"].update(body["status"])
        return stored

    async def create_job(self, namespace: str, body: dict[str, Any]) -> None:
        self.created.append(body)


async def test_a_verdict_written_just_before_the_job_completed_is_recorded_not_retried() -> None:
    kube = RacingKube([run("Running"), run("Succeeded")], COMPLETE_JOB)
    plan = await reconcile_run(kube, config(), "team-a", "s-t1", now=NOW)
    assert plan is not None and plan.start_segment is None and not kube.created
    (segment,) = plan.status["segments"]
    assert segment["outcome"] == "Succeeded"


async def test_a_worker_that_exited_without_a_verdict_is_still_lost_and_retried() -> None:
    kube = RacingKube([run("Running"), run("Running")], COMPLETE_JOB)
    plan = await reconcile_run(kube, config(), "team-a", "s-t1", now=NOW)
    assert plan is not None and plan.start_segment is not None and plan.start_segment[1] == "Retry"
    assert plan.status["segments"][0]["outcome"] == "Lost" and len(kube.created) == 1


class Credentials:
    """Stands in for ``NamespaceCredentials``: fails (as without CREATEROLE) or records the namespace."""

    def __init__(self, error: str | None = None) -> None:
        self.error, self.ensured = error, []

    async def ensure(self, kube: Any, config: Any, namespace: str) -> None:
        from sessionops.execution.credentials import CredentialError
        if self.error:
            raise CredentialError(self.error)
        self.ensured.append(namespace)


async def test_the_namespace_credential_is_made_before_the_segment_is_recorded_or_its_job_created() -> None:
    kube, creds = RacingKube([run("Running"), run("Running")], COMPLETE_JOB), Credentials()
    plan = await reconcile_run(kube, config(), "team-a", "s-t1", now=NOW, credentials=creds)  # type: ignore[arg-type]
    assert plan is not None and creds.ensured == ["team-a"] and len(kube.created) == 1


async def test_a_credential_failure_starts_nothing_and_says_why_on_ready() -> None:
    message = "database schema sessionops_team_a / role r for namespace team-a: permission denied to create role"
    kube = RacingKube([run("Running"), run("Running")], COMPLETE_JOB)
    await reconcile_run(kube, config(), "team-a", "s-t1", now=NOW, credentials=Credentials(message))  # type: ignore[arg-type]
    assert not kube.created
    (patch,) = kube.patches  # no segment recorded: only the condition
    (ready,) = [c for c in patch["status"]["conditions"] if c["type"] == "Ready"]
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "DatabaseCredentialFailed", message)
    assert set(patch["status"]) == {"conditions"}

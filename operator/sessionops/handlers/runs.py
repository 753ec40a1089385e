"""The run controller: run events, Job events and a timer for start/lease timeouts."""

from __future__ import annotations

from typing import Any

import kopf

from sessionops import GROUP, VERSION
from sessionops.execution.reconcile import reconcile_run
from sessionops.runtime import Runtime
from sessionops.scheduling.names import RUN_LABEL


@kopf.on.event(GROUP, VERSION, "agentruns")
async def run_event(name: str, namespace: str, type: str | None, memo: Any, **_: Any) -> None:
    rt: Runtime = memo.runtime
    if type != "DELETED":
        await reconcile_run(rt.kube, rt.config.current, namespace, name)


@kopf.on.event("batch", "v1", "jobs", labels={RUN_LABEL: kopf.PRESENT})
async def job_event(labels: kopf.Labels, namespace: str, memo: Any, **_: Any) -> None:
    rt: Runtime = memo.runtime
    await reconcile_run(rt.kube, rt.config.current, namespace, labels[RUN_LABEL])


@kopf.on.event(GROUP, VERSION, "agentinputs")
async def resume_received(spec: kopf.Spec, namespace: str, memo: Any, **_: Any) -> None:
    if spec.get("kind") == "Resume" and spec.get("run"):
        rt: Runtime = memo.runtime
        await reconcile_run(rt.kube, rt.config.current, namespace, spec["run"])


@kopf.timer(GROUP, VERSION, "agentruns", interval=10, idle=5,
            when=lambda status, **_: status.get("phase") not in ("Succeeded", "Failed", "Cancelled"))
async def run_resync(name: str, namespace: str, memo: Any, **_: Any) -> None:
    """Timeouts need time to pass, not events: a Job that never starts is noticed here."""
    rt: Runtime = memo.runtime
    await reconcile_run(rt.kube, rt.config.current, namespace, name)

"""The run controller: run events and Job events (``sessionops.manager.scans`` handles timeouts)."""

from __future__ import annotations

from typing import Any

import kopf

from sessionops.api.input import InputKind
from sessionops.api.names import RUN_LABEL
from sessionops.cancellation.reconcile import reconcile_cancel
from sessionops.delegation.names import PARENT_RUN_LABEL
from sessionops.execution.reconcile import reconcile_run
from sessionops.manager.runtime import Runtime
from sessionops.views import InputView, RunView


async def run_event(name: str, namespace: str, type: str | None, memo: Any, **_: Any) -> None:
    rt: Runtime = memo.runtime
    if type != "DELETED":
        await reconcile_run(rt.kube, rt.config.current, namespace, name, credentials=rt.credentials)


async def child_run_event(labels: kopf.Labels, namespace: str, memo: Any, **_: Any) -> None:
    """A child turn moved: its parent may resume, or its cancellation may go on."""
    rt: Runtime = memo.runtime
    parent = await rt.kube.cached_get("agentruns", namespace, labels[PARENT_RUN_LABEL])
    if parent is None:
        return
    if RunView(parent).cancel_requested:
        await reconcile_cancel(rt.kube, rt.checkpoint_dsn(namespace), namespace, parent["metadata"]["name"])
    else:
        await reconcile_run(rt.kube, rt.config.current, namespace, parent["metadata"]["name"],
                            credentials=rt.credentials)


async def job_event(labels: kopf.Labels, namespace: str, memo: Any, **_: Any) -> None:
    """A Job ending decides a segment; a Job going away lets a cancellation go on."""
    rt: Runtime = memo.runtime
    run = await rt.kube.cached_get("agentruns", namespace, labels[RUN_LABEL])
    if run is not None and RunView(run).cancel_requested:
        await reconcile_cancel(rt.kube, rt.checkpoint_dsn(namespace), namespace, labels[RUN_LABEL])
    else:
        await reconcile_run(rt.kube, rt.config.current, namespace, labels[RUN_LABEL], credentials=rt.credentials)


async def pod_event(labels: kopf.Labels, namespace: str, type: str | None, memo: Any, **_: Any) -> None:
    """A worker pod that cannot start shows its reason on the run's Ready condition at once
    (the recovery scan fails the run once the configured wait has passed)."""
    rt: Runtime = memo.runtime
    if type != "DELETED":
        await reconcile_run(rt.kube, rt.config.current, namespace, labels[RUN_LABEL], credentials=rt.credentials)


async def resume_received(body: dict[str, Any], namespace: str, memo: Any, **_: Any) -> None:
    inp = InputView(body)
    if inp.kind == InputKind.RESUME.value and inp.resume_run:
        rt: Runtime = memo.runtime
        await reconcile_run(rt.kube, rt.config.current, namespace, inp.resume_run, credentials=rt.credentials)

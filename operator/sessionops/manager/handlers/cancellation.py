"""Cancellation: run and Job events drive it; ``sessionops.manager.scans`` is the recovery scan for
Cancelling runs (a failed step, a Job still stopping, an operator restart mid-cleanup)."""

from __future__ import annotations

from typing import Any

from sessionops.cancellation.reconcile import reconcile_cancel
from sessionops.manager.runtime import Runtime
from sessionops.views import RunView


def cancelling(body: dict[str, Any], **_: Any) -> bool:
    run = RunView(body)
    return run.cancel_requested and not run.terminal


async def cancel_requested(name: str, namespace: str, type: str | None, memo: Any, **_: Any) -> None:
    rt: Runtime = memo.runtime
    if type != "DELETED":
        await reconcile_cancel(rt.kube, rt.checkpoint_dsn(namespace), namespace, name)

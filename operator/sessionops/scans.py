"""The recovery scan: one loop in the operator instead of kopf timers on every run.

Time-based decisions (a Job that never starts, a cleanup step to retry after a failure,
an operator restart mid-cancellation) need a pass without an event. kopf timers would put
a finalizer and bookkeeping writes on every AgentRun; one periodic list of unfinished runs
costs nothing per run. Each pass is a normal, idempotent reconcile.
"""

from __future__ import annotations

import asyncio
import logging

from sessionops import API_VERSION, GROUP, VERSION, logs
from sessionops.api.run import TERMINAL_PHASES
from sessionops.cancellation.reconcile import reconcile_cancel
from sessionops.execution.reconcile import reconcile_run
from sessionops.runtime import Runtime

logger = logging.getLogger(__name__)


async def scan_once(rt: Runtime) -> int:
    """Reconcile every unfinished run once; returns how many were visited."""
    listing = await rt.kube.call(rt.kube.custom.list_cluster_custom_object, GROUP, VERSION, "agentruns")
    visited = 0
    for run in listing.get("items", []):
        status = run.get("status") or {}
        if status.get("phase") in TERMINAL_PHASES:
            continue
        meta = run["metadata"]
        visited += 1
        try:
            if (run.get("spec") or {}).get("cancel"):
                await reconcile_cancel(rt.kube, rt.checkpoint_dsn(meta["namespace"]), meta["namespace"], meta["name"])
            else:
                await reconcile_run(rt.kube, rt.config.current, meta["namespace"], meta["name"],
                                    credentials=rt.credentials)
        except asyncio.CancelledError:
            raise
        except Exception:  # one broken run must not stop the scan of the others; the next scan retries
            logger.exception("recovery scan of run %s/%s failed; the next scan retries", meta["namespace"],
                             meta["name"], extra=logs.ref({"apiVersion": API_VERSION, "kind": "AgentRun", **run}))
    return visited


async def run_forever(rt: Runtime, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            await scan_once(rt)
        except asyncio.CancelledError:
            raise
        except Exception:  # an API hiccup: the next scan retries
            logger.exception("recovery scan failed")

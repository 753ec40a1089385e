"""The recovery scan: one loop in the operator instead of kopf timers on every run.

Time-based decisions (a Job that never starts, a cleanup step to retry after a failure,
an operator restart mid-cancellation) need a pass without an event. kopf timers would put
a finalizer and bookkeeping writes on every object; these scans read the watch-fed cache
(``sessionops.platform.cache``) instead of listing, and visit only unfinished runs and the sessions
that look out of step. Each pass is a normal, idempotent reconcile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from sessionops import API_VERSION
from sessionops.cancellation.reconcile import reconcile_cancel
from sessionops.execution.reconcile import reconcile_run
from sessionops.manager.runtime import Runtime
from sessionops.platform import logs

logger = logging.getLogger(__name__)


async def scan_once(rt: Runtime) -> int:
    """Reconcile every unfinished run once (as the run watch last saw them); returns how many."""
    visited = 0
    for (namespace, name), cancel in list(rt.cache.unfinished_runs.items()):
        visited += 1
        ref = {"apiVersion": API_VERSION, "kind": "AgentRun", "metadata": {"namespace": namespace, "name": name}}
        try:
            if cancel:
                await reconcile_cancel(rt.kube, rt.checkpoint_dsn(namespace), namespace, name)
            else:
                await reconcile_run(rt.kube, rt.config.current, namespace, name,
                                    credentials=rt.credentials)
        except asyncio.CancelledError:
            raise
        except Exception:  # one broken run must not stop the scan of the others; the next scan retries
            logger.exception("recovery scan of run %s/%s failed; the next scan retries", namespace, name,
                             extra=logs.ref(ref))
    return visited


async def scan_sessions(rt: Runtime, resync: Callable[[Runtime, str, str], Awaitable[None]],
                        suspects: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Pass over the sessions the cache showed out of step at this scan and at the one before
    (``suspects``; a session whose event is merely still queued is left to its event), one after
    another (spread, never a burst). Consistent sessions cost a dictionary lookup. Returns this
    scan's suspects."""
    now = set(rt.cache.sessions_out_of_step())
    for namespace, name in sorted(now & suspects):
        try:
            await resync(rt, namespace, name)
        except asyncio.CancelledError:
            raise
        except Exception:  # as above: the next scan retries
            logger.exception("safety scan of session %s/%s failed; the next scan retries", namespace, name)
    return now


async def run_forever(rt: Runtime, interval: float, resync: Callable[[Runtime, str, str], Awaitable[None]]) -> None:
    suspects: set[tuple[str, str]] = set()
    while True:
        await asyncio.sleep(interval)
        try:
            await scan_once(rt)
            suspects = await scan_sessions(rt, resync, suspects)
        except asyncio.CancelledError:
            raise
        except Exception:  # an API hiccup: the next scan retries
            logger.exception("recovery scan failed")

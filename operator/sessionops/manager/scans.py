"""The recovery scan: one loop in the operator instead of kopf timers on every run.

Time-based decisions (a Job that never starts, a cleanup step to retry after a failure,
an operator restart mid-cancellation) need a pass without an event. kopf timers would put
a finalizer and bookkeeping writes on every object; these scans read the watch-fed cache
(``sessionops.platform.cache``) instead of listing, and visit only the unfinished runs that are due
(a clock-driven decision, an event since the last pass, a failed pass, or the safety pass) and
the sessions that look out of step. Each pass is a normal, idempotent reconcile.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import math
import time
from collections.abc import Awaitable, Callable

from sessionops import API_VERSION
from sessionops.cancellation.reconcile import reconcile_cancel
from sessionops.execution import segments
from sessionops.execution.reconcile import reconcile_run
from sessionops.manager.runtime import Runtime
from sessionops.platform import logs
from sessionops.views import RunView

logger = logging.getLogger(__name__)


SAFETY_PASS_SCANS = 12
"""A run that only events can change is still passed over every this many scans (a minute at the
default 5 s): the net under a lost watch event."""


async def scan_once(rt: Runtime, safety_pass: float = math.inf) -> int:
    """Reconcile every unfinished run (as the run watch last saw it) that is due: one whose next
    decision may depend on the clock, or that an event touched since its last pass (or whose
    last pass failed), or that has not been passed over for ``safety_pass`` seconds. Returns how
    many were visited. A thousand runs whose pods run cost a dictionary lookup each, not a
    reconcile each every scan (0.65 ms each here: 10,000 Pending runs kept a core busy)."""
    visited = 0
    for key, cancel in list(rt.cache.unfinished_runs.items()):
        started = time.monotonic()
        if not rt.cache.run_due(key, started):
            continue
        namespace, name = key
        visited += 1
        ref = {"apiVersion": API_VERSION, "kind": "AgentRun", "metadata": {"namespace": namespace, "name": name}}
        rt.cache.visiting(key, started)
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
            continue
        rt.cache.visited(key, started, started + min(safety_pass, _quiet_for(rt, key)))
    return visited


def _quiet_for(rt: Runtime, key: tuple[str, str]) -> float:
    """How long the run, as the store now holds it, can only change by an event (0 unknown)."""
    store = rt.kube.store
    run = store.get("agentruns", *key) if store is not None and store.tracks("agentruns") else None
    if run is None:
        return 0.0
    last = RunView(run).last_segment
    job = store.get("jobs", key[0], last["job"]) if last and store.tracks("jobs") else None  # type: ignore[union-attr]
    worker = rt.config.current.worker
    return segments.quiet_for(run, job, now=datetime.datetime.now(datetime.UTC),
                              start_timeout_seconds=worker.start_timeout_seconds,
                              config_error_seconds=worker.config_error_seconds)


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


async def run_forever(rt: Runtime, interval: float, resync: Callable[[Runtime, str, str], Awaitable[None]],
                      listed: Callable[[], bool] = lambda: True) -> None:
    """``listed``: whether kopf's initial listings are through. Until then the cache (fed by
    kopf's events) holds part of each session's inputs, so sessions look out of step that are
    not: at 10,000 sessions and 50,000 inputs, 7,700 needless fresh reads. The runs' scan reads
    the store, complete from the start."""
    suspects: set[tuple[str, str]] = set()
    while True:
        await asyncio.sleep(interval)
        try:
            await scan_once(rt, safety_pass=interval * SAFETY_PASS_SCANS)
            if listed():
                suspects = await scan_sessions(rt, resync, suspects)
        except asyncio.CancelledError:
            raise
        except Exception:  # an API hiccup: the next scan retries
            logger.exception("recovery scan failed")

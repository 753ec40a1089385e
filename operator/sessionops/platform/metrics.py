"""Prometheus metrics and the /healthz endpoint of the operator (one small aiohttp app)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import prometheus_client as prom
from aiohttp import web

ADMISSIONS = prom.Counter("sessionops_admissions_total", "Admission decisions.", ["kind", "operation", "outcome"])
WEBHOOK_LATENCY = prom.Histogram("sessionops_webhook_latency_seconds", "Admission handler latency.", ["kind"],
                                 buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
QUEUE_DEPTH = prom.Gauge("sessionops_queue_depth", "Pending inputs per session.", ["namespace", "session"])
"""The only per-object label set: dropped with its session (``forget_session``)."""
DISPATCH_LATENCY = prom.Histogram("sessionops_dispatch_latency_seconds", "Input received to run created.",
                                  buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
PHASE_TRANSITIONS = prom.Counter("sessionops_phase_transitions_total", "Phase changes.", ["kind", "phase"])
CANCELLATION_DURATION = prom.Histogram("sessionops_cancellation_duration_seconds",
                                       "Cancel requested to Cancelled.", buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60))
WATCHED = prom.Gauge("sessionops_watched_objects", "Objects in the watch-fed cache (sessions, inputs, "
                     "unfinished runs).", ["kind"])
CANCELLATION_STEP_FAILURES = prom.Counter("sessionops_cancellation_step_failures_total",
                                          "Failed cleanup steps.", ["step"])


def forget_session(namespace: str, name: str) -> None:
    """A deleted session's series go with it: a label set lives in the registry (and in every
    scrape) until removed. Safe to repeat: removing an absent label set changes nothing."""
    with contextlib.suppress(KeyError):  # prometheus-client before 0.21 raises for an absent one
        QUEUE_DEPTH.remove(namespace, name)


async def serve(port: int, ready: Callable[[], bool]) -> web.AppRunner:
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=prom.generate_latest(), headers={"Content-Type": prom.CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        # Readiness decides which replicas the webhook Service sends to: only ready ones.
        return web.Response(text="ok") if ready() else web.Response(status=503, text="starting")

    app = web.Application()
    app.add_routes([web.get("/metrics", metrics), web.get("/healthz", healthz)])
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", port).start()
    return runner

"""The operator process's wiring (run as ``python -m sessionops.manager``).

kopf runs every handler in ``sessionops.manager.handlers``; this module only wires settings,
the webhook server, storages, the database schema and shared state.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

import kopf

from sessionops.api.names import RUN_LABEL
from sessionops.manager import scans
from sessionops.manager.config_watch import ConfigWatcher
from sessionops.manager.runtime import Runtime
from sessionops.platform import checkpoint_scope, logs, memprofile, metrics
from sessionops.platform.configuration import ConfigStore
from sessionops.platform.kube import Kube, load_api_client
from sessionops.platform.settings import Settings
from sessionops.platform.webhook import WebhookServer
from sessionops.readiness.reconcile import reconcile_namespace

logger = logging.getLogger(__name__)

FROZEN_FIELDS = ("spec.contextSnapshot", "spec.context")
"""Left out of kopf's diff base: admission freezes them (no handler reacts to a change that
cannot happen), and they are the bulk of a session; kept, every object stored them twice."""


def configure_kopf(kopf_settings: kopf.OperatorSettings, settings: Settings) -> None:
    # Bookkeeping and status in one atomic status patch: 2 API writes per handled object
    # instead of 3 (ARCHITECTURE 7.2). The CRDs declare status.kopf so it is not pruned.
    kopf_settings.persistence.progress_storage = kopf.StatusProgressStorage(field="status.kopf.progress")
    kopf_settings.persistence.diffbase_storage = kopf.StatusDiffBaseStorage(
        field="status.kopf.diffbase", ignored_fields=FROZEN_FIELDS)
    # No handler needs kopf's finalizer (sessions carry our own, SESSION_FINALIZER, set at
    # admission); kopf removes it from objects that still have it from older versions.
    kopf_settings.persistence.finalizer = "sessionops.dev/finalizer"
    kopf_settings.posting.level = logging.WARNING
    # Only our workers' pods and Jobs, filtered by the API server: unfiltered, kopf would
    # receive (and keep in memory) every pod and Job of the cluster.
    kopf_settings.watching.label_selectors[lambda r: r.group == "" and r.plural == "pods"] = RUN_LABEL
    kopf_settings.watching.label_selectors[lambda r: r.group == "batch" and r.plural == "jobs"] = RUN_LABEL
    kopf_settings.watching.server_timeout = 300
    kopf_settings.admission.server = WebhookServer(
        addr=settings.webhook_addr, port=settings.webhook_port, host=settings.webhook_host,
        certfile=settings.cert_file, pkeyfile=settings.key_file)
    # The chart (or the test cluster fixture) owns the webhook configurations.
    kopf_settings.admission.managed = None


async def build_runtime(settings: Settings) -> tuple[Runtime, ConfigWatcher]:
    rt = Runtime(settings=settings, kube=Kube(load_api_client()), config=ConfigStore())
    # A new configuration may add or drop the model or a Secret an Agent relies on.
    watcher = ConfigWatcher(rt, on_change=lambda: reconcile_namespace(rt.kube, rt.config.current))
    await watcher.refresh()
    return rt, watcher


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    ours = Settings.from_env()
    configure_kopf(settings, ours)
    # Checkpoint tables live in one schema per worker namespace, set up with its role before
    # the namespace's first Job (execution.credentials); workers only read and write.
    if not await asyncio.to_thread(checkpoint_scope.revoke_public_create, ours.database_url):
        logger.warning("the admin credential may not revoke CREATE on schema public from PUBLIC: "
                       "do it once as the database owner (docs/database.md)")
    memo.runtime, memo.config_watcher = await build_runtime(ours)
    # Before any object is seen, after the imports (the Kubernetes client's API classes load with the
    # runtime): their code is the same memory at any scale, and traced they load ten times slower.
    memprofile.start_from_env()
    cache = memo.runtime.cache
    # Read when scraped: nothing to keep in step.
    metrics.WATCHED.labels(kind="AgentSession").set_function(lambda: len(cache.sessions))
    metrics.WATCHED.labels(kind="AgentInput").set_function(lambda: len(cache.inputs))
    metrics.WATCHED.labels(kind="AgentRun").set_function(lambda: len(cache.unfinished_runs))
    if ours.peering:
        await memo.runtime.kube.create_peering(ours.peering)
    memo.scan_task = asyncio.create_task(
        scans.run_forever(memo.runtime, ours.scan_seconds, resync_session),
        name="recovery-scan")
    if ours.metrics_port:
        memo.metrics = await metrics.serve(ours.metrics_port, ready=lambda: memo.runtime.config.loaded)


@kopf.on.cleanup()
async def cleanup(memo: Any, **_: Any) -> None:
    for name in ("scan_task",):
        task = getattr(memo, name, None)
        if task is not None:
            task.cancel()
    if getattr(memo, "metrics", None) is not None:
        await memo.metrics.cleanup()
    rt: Runtime | None = getattr(memo, "runtime", None)
    if rt is not None:
        rt.kube.close()


async def resync_session(rt: Runtime, namespace: str, name: str) -> None:
    from sessionops.manager.handlers.sessions import resync_session as resync
    await resync(rt, namespace, name)


def register_handlers() -> None:
    import sessionops.manager.handlers.admission  # noqa: F401
    import sessionops.manager.handlers.agents  # noqa: F401
    import sessionops.manager.handlers.cancellation  # noqa: F401
    import sessionops.manager.handlers.config  # noqa: F401
    import sessionops.manager.handlers.runs  # noqa: F401
    import sessionops.manager.handlers.sessions  # noqa: F401


def main() -> None:
    register_handlers()
    settings = Settings.from_env()
    logs.configure()
    # A unique priority: replicas with equal priorities pause each other (kopf peering).
    kopf.run(clusterwide=True, standalone=settings.peering is None, peering_name=settings.peering or None,
             priority=random.randint(1, 2**31 - 1))


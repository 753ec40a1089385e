"""The operator process's wiring (run as ``python -m sessionops.manager``).

kopf runs every handler in ``sessionops.manager.handlers``; this module only wires settings,
the webhook server, storages, the database schema and shared state.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator
from typing import Any

import kopf

from sessionops import GROUP, VERSION
from sessionops.api.names import RUN_LABEL, SESSION_LABEL
from sessionops.delegation.names import PARENT_RUN_LABEL, TREE_LABEL
from sessionops.manager import listing, scans
from sessionops.manager.config_watch import ConfigWatcher
from sessionops.manager.runtime import Runtime
from sessionops.platform import checkpoint_scope, logs, memprofile, metrics
from sessionops.platform.configuration import ConfigStore
from sessionops.platform.kube import Kube, load_api_client
from sessionops.platform.settings import Settings
from sessionops.platform.store import Store
from sessionops.platform.webhook import WebhookServer
from sessionops.readiness.reconcile import reconcile_namespace

logger = logging.getLogger(__name__)

class NoDiffBase(kopf.DiffBaseStorage):
    """kopf builds a diff base (a deep copy of the object's essence) for every event, even
    when no handler of the kind is a changing one: a fifth of the operator's CPU per input.
    Every handler here is an event or index handler, which never reads it."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> None:  # type: ignore[override]
        return None

    def fetch(self, *, body: kopf.Body) -> None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: Any) -> None:
        return None


def configure_kopf(kopf_settings: kopf.OperatorSettings, settings: Settings) -> None:
    # Bookkeeping and status in one atomic status patch if a changing handler ever needs it
    # (ARCHITECTURE 7.2); today none does, so there is no diff base to keep either.
    kopf_settings.persistence.progress_storage = kopf.StatusProgressStorage(field="status.kopf.progress")
    kopf_settings.persistence.diffbase_storage = NoDiffBase()
    # No handler needs kopf's finalizer (sessions carry our own, SESSION_FINALIZER, set at
    # admission); kopf removes it from objects that still have it from older versions.
    kopf_settings.persistence.finalizer = "sessionops.dev/finalizer"
    kopf_settings.posting.level = logging.WARNING
    # Only our workers' pods and Jobs, filtered by the API server: unfiltered, kopf would
    # receive (and keep in memory) every pod and Job of the cluster.
    kopf_settings.watching.label_selectors[lambda r: r.group == "" and r.plural == "pods"] = RUN_LABEL
    kopf_settings.watching.label_selectors[lambda r: r.group == "batch" and r.plural == "jobs"] = RUN_LABEL
    kopf_settings.watching.server_timeout = 300
    # kopf's own initial listing in pages too: unpaged, 50,000 inputs arrived as one response
    # whose parsing took the operator to 2.3 GB and stalled its loop for seconds.
    kopf_settings.watching.chunk_size = PAGE
    # kopf's per-object worker keeps the last raw event it processed until it exits, idle for
    # this long (5 s by default): at a restart the listed objects of the last 5 s, in full, sat
    # among the store's compact copies, and the allocator could not give their pages back.
    # Workers only wait on their next event, so a short wait costs a task start for an object
    # that is busy again later.
    kopf_settings.queueing.idle_timeout = IDLE_WORKER_SECONDS
    # ...and a kind's next page only once our handlers caught up with the last one.
    from sessionops.manager.handlers.events import STEPS  # registered by register_handlers
    listing.pace(STEPS)
    kopf_settings.admission.server = WebhookServer(
        addr=settings.webhook_addr, port=settings.webhook_port, host=settings.webhook_host,
        certfile=settings.cert_file, pkeyfile=settings.key_file)
    # The chart (or the test cluster fixture) owns the webhook configurations.
    kopf_settings.admission.managed = None


def decision_store() -> Store:
    """What the reconciles read from memory, with the label selectors they list by."""
    store = Store()
    store.track("agentsessions", (TREE_LABEL, PARENT_RUN_LABEL))
    store.track("agentinputs", (SESSION_LABEL, PARENT_RUN_LABEL))
    store.track("agentruns", (SESSION_LABEL, TREE_LABEL, PARENT_RUN_LABEL))
    store.track("agents")
    store.track("jobs")
    store.track("pods", ("job-name",))
    return store


PRIMED = {  # plural -> the cluster-wide path that lists what the store keeps of it
    "agentsessions": f"/apis/{GROUP}/{VERSION}/agentsessions",
    "agentinputs": f"/apis/{GROUP}/{VERSION}/agentinputs",
    "agentruns": f"/apis/{GROUP}/{VERSION}/agentruns",
    "agents": f"/apis/{GROUP}/{VERSION}/agents",
    "jobs": "/apis/batch/v1/jobs",
    "pods": "/api/v1/pods",
}
LABELLED = {"jobs": RUN_LABEL, "pods": RUN_LABEL}
"""Kinds kept only when labelled (our workers'), as kopf watches them."""
PAGE = 500
IDLE_WORKER_SECONDS = 0.5


async def listed_items(kube: Kube, plural: str) -> AsyncIterator[dict[str, Any]]:
    """Every object of ``plural`` the store keeps, as the API server lists it, page by page (a
    start over 50,000 inputs never holds one giant response)."""
    token = ""
    while True:
        query = [("limit", str(PAGE))] + ([("continue", token)] if token else []) + \
            ([("labelSelector", LABELLED[plural])] if plural in LABELLED else [])
        page = await kube.raw("GET", PRIMED[plural], query=query)
        for item in page.get("items") or []:
            yield item
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return


async def prime_store(kube: Kube) -> None:
    """Fill the store before kopf watches (see ``platform.store``). Safe to repeat: newer
    versions win."""
    assert kube.store is not None
    for plural in PRIMED:
        async for item in listed_items(kube, plural):
            kube.store.see(plural, item)


GHOST_READS = 50
"""Up to this many unconfirmed objects of a kind are read one by one; more, by a listing."""


async def drop_ghosts(kube: Kube, settle_seconds: float = 5.0, limit_seconds: float = 300.0) -> int:
    """Once kopf's initial listings are through (no object confirmed for ``settle_seconds``),
    read each primed object no watch event has shown: one deleted between the priming list
    and kopf's listing gets no DELETED event, and a ghost active run would hold its session's
    queue forever. Returns how many were gone. Safe to repeat: a fresh read decides."""
    assert kube.store is not None
    loop = asyncio.get_running_loop()
    started, last, last_count = loop.time(), loop.time(), -1
    while loop.time() - started < limit_seconds:
        count = sum(len(kube.store.unconfirmed(p)) for p in PRIMED)
        if count != last_count:
            last, last_count = loop.time(), count
        elif loop.time() - last >= settle_seconds:
            break
        await asyncio.sleep(0.5)
    gone = 0
    for plural in PRIMED:
        unconfirmed = kube.store.unconfirmed(plural)
        if len(unconfirmed) > GHOST_READS:
            # Many: kopf's listing was slow, not many deleted. One listing answers for all.
            listed = {(item["metadata"].get("namespace") or "", item["metadata"]["name"])
                      async for item in listed_items(kube, plural)}
            missing = [key for key in unconfirmed if key not in listed]
        else:
            missing = [(ns, name) for ns, name in unconfirmed if await kube.fresh_get(plural, ns, name) is None]
        for namespace, name in missing:
            kube.store.forget(plural, {"metadata": {"namespace": namespace, "name": name}})
            gone += 1
    if gone:
        logger.info("store: %d object(s) deleted while the operator started were dropped", gone)
    return gone


async def build_runtime(settings: Settings) -> tuple[Runtime, ConfigWatcher]:
    rt = Runtime(settings=settings, kube=Kube(load_api_client(), store=decision_store()), config=ConfigStore())
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
    # Before any object is seen (the store's priming list is the first), after the imports (the
    # Kubernetes client's API classes load with the runtime): their code is the same memory at
    # any scale, and traced they load ten times slower.
    memprofile.start_from_env()
    await prime_store(memo.runtime.kube)
    memo.ghost_task = asyncio.create_task(drop_ghosts(memo.runtime.kube), name="store-ghosts")
    cache = memo.runtime.cache
    # Read when scraped: nothing to keep in step.
    metrics.WATCHED.labels(kind="AgentSession").set_function(lambda: len(cache.sessions))
    metrics.WATCHED.labels(kind="AgentInput").set_function(lambda: len(cache.inputs))
    metrics.WATCHED.labels(kind="AgentRun").set_function(lambda: len(cache.unfinished_runs))
    if ours.peering:
        await memo.runtime.kube.create_peering(ours.peering)
    memo.scan_task = asyncio.create_task(
        scans.run_forever(memo.runtime, ours.scan_seconds, resync_session, listed=memo.ghost_task.done),
        name="recovery-scan")
    if ours.metrics_port:
        memo.metrics = await metrics.serve(ours.metrics_port, ready=lambda: memo.runtime.config.loaded)


@kopf.on.cleanup()
async def cleanup(memo: Any, **_: Any) -> None:
    for name in ("scan_task", "ghost_task"):
        task = getattr(memo, name, None)
        if task is not None:
            task.cancel()
    if getattr(memo, "metrics", None) is not None:
        await memo.metrics.cleanup()
    rt: Runtime | None = getattr(memo, "runtime", None)
    if rt is not None:
        await rt.kube.aclose()


async def resync_session(rt: Runtime, namespace: str, name: str) -> None:
    from sessionops.manager.handlers.sessions import resync_session as resync
    await resync(rt, namespace, name)


def register_handlers() -> None:
    import sessionops.manager.handlers.admission  # noqa: F401
    import sessionops.manager.handlers.agents  # noqa: F401  (skill ConfigMaps)
    import sessionops.manager.handlers.config  # noqa: F401
    import sessionops.manager.handlers.events  # noqa: F401  (the watched kinds)


def main() -> None:
    register_handlers()
    settings = Settings.from_env()
    logs.configure()
    # A unique priority: replicas with equal priorities pause each other (kopf peering).
    kopf.run(clusterwide=True, standalone=settings.peering is None, peering_name=settings.peering or None,
             priority=random.randint(1, 2**31 - 1))


"""The recovery scan passes over a run when its decision may depend on the clock, after an event
of it, its Job, its pods or an answer to it, after a failed pass, and at the safety pass; else
it leaves the run alone."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from types import SimpleNamespace
from typing import Any

import pytest

from sessionops.api.names import RUN_LABEL
from sessionops.api.timestamps import iso
from sessionops.manager import scans
from sessionops.manager.handlers import store as feeding
from sessionops.manager.main import decision_store
from sessionops.platform.cache import Cache
from tests.factories import config

NS = "team-a"


def run(name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": NS, "name": name, "resourceVersion": "1"}, "spec": {},
            "status": {"phase": "Pending", "segments": [{"name": f"{name}-1", "kind": "Start", "job": f"{name}-1"}]}}


def job(run_name: str, *, created_ago: float, **status: Any) -> dict[str, Any]:
    created = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=created_ago)
    return {"metadata": {"namespace": NS, "name": f"{run_name}-1", "resourceVersion": "1",
                         "labels": {RUN_LABEL: run_name}, "creationTimestamp": iso(created)}, "status": status}


@pytest.fixture
def rt(monkeypatch: pytest.MonkeyPatch) -> Any:
    visits: list[str] = []
    failing: set[str] = set()

    async def reconcile_run(kube: Any, config: Any, namespace: str, name: str, **_: Any) -> None:
        visits.append(name)
        if name in failing:
            raise RuntimeError("the API server is away")

    monkeypatch.setattr(scans, "reconcile_run", reconcile_run)
    store = decision_store()
    runtime = SimpleNamespace(cache=Cache(), kube=SimpleNamespace(store=store), credentials=None,
                              config=SimpleNamespace(current=config()), visits=visits, failing=failing)
    runtime.memo = SimpleNamespace(runtime=runtime)
    return runtime


def put(rt: Any, plural: str, obj: dict[str, Any]) -> None:
    """As a watch event delivers it (``handlers.events``: the store, then the cache)."""
    feeding.feed(plural, obj, "MODIFIED", rt.memo)
    if plural == "agentruns":
        rt.cache.see_run(obj)


async def scan(rt: Any, safety_pass: float = 3600) -> list[str]:
    rt.visits.clear()
    await scans.scan_once(rt, safety_pass=safety_pass)
    return sorted(rt.visits)


async def test_the_scan_visits_what_may_change_and_skips_what_cannot(rt: Any) -> None:
    start_timeout = rt.config.current.worker.start_timeout_seconds
    for name in ("started", "waiting-pod", "overdue", "lost-create"):
        put(rt, "agentruns", run(name))
    put(rt, "jobs", job("started", created_ago=5, active=1, ready=1))
    put(rt, "jobs", job("waiting-pod", created_ago=5, active=1))
    put(rt, "jobs", job("overdue", created_ago=start_timeout + 5, active=1))
    assert await scan(rt) == ["lost-create", "overdue", "started", "waiting-pod"]  # each seen once
    assert await scan(rt) == ["lost-create", "overdue"]  # no Job yet; a deadline passed
    put(rt, "pods", {"metadata": {"namespace": NS, "name": "p", "resourceVersion": "2",
                                  "labels": {RUN_LABEL: "started", "job-name": "started-1"}}, "status": {}})
    put(rt, "agentinputs", {"metadata": {"namespace": NS, "name": "a", "resourceVersion": "3"},
                            "spec": {"kind": "Resume", "run": "waiting-pod", "sessionRef": {"name": "s"}}})
    assert await scan(rt) == ["lost-create", "overdue", "started", "waiting-pod"]  # touched by events
    assert await scan(rt) == ["lost-create", "overdue"]
    for name in ("started", "waiting-pod"):
        rt.cache.touch_run((NS, name))
    await scan(rt, safety_pass=0)  # a safety pass due right away (after 0 s)
    assert await scan(rt) == ["lost-create", "overdue", "started", "waiting-pod"]


async def test_a_failed_pass_is_retried_at_the_next_scan(rt: Any) -> None:
    put(rt, "agentruns", run("r"))
    put(rt, "jobs", job("r", created_ago=5, active=1, ready=1))
    rt.failing.add("r")
    assert await scan(rt) == ["r"]
    assert await scan(rt) == ["r"]
    rt.failing.clear()
    assert await scan(rt) == ["r"]
    assert await scan(rt) == []


async def test_sessions_are_not_resynced_before_kopf_s_listings_are_through(rt: Any) -> None:
    """Until then the cache holds part of a session's inputs: it looks out of step and is not."""
    rt.cache.see_session({"metadata": {"namespace": NS, "name": "s"}, "status": {}})  # never reconciled
    resynced: list[str] = []
    listed = False

    async def resync(rt: Any, namespace: str, name: str) -> None:
        resynced.append(name)

    task = asyncio.create_task(scans.run_forever(rt, 0.01, resync, listed=lambda: listed))
    try:
        await asyncio.sleep(0.2)
        assert resynced == []
        listed = True
        for _ in range(100):
            if resynced:
                break
            await asyncio.sleep(0.01)
        assert resynced and set(resynced) == {"s"}
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

"""The kopf wiring the store and the cheap event path rely on."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import kopf
import pytest

from sessionops.delegation.names import PARENT_RUN_LABEL
from sessionops.manager.handlers import events
from sessionops.manager.main import NoDiffBase, register_handlers
from sessionops.platform.store import Store


def registry() -> kopf.OperatorRegistry:
    register_handlers()
    return kopf.get_default_registry()


def test_no_handler_reads_a_diff_base_so_none_is_built() -> None:
    """``NoDiffBase`` is only right while every handler is an event or index handler: a
    changing (create/update/delete/resume) or spawning (timer/daemon) handler would read it."""
    reg = registry()
    assert reg._changing.get_all_handlers() == [] and reg._spawning.get_all_handlers() == []
    assert NoDiffBase().build(body=kopf.Body({"spec": {"a": 1}})) is None


def test_one_event_handler_per_kind_and_no_kopf_indexes() -> None:
    """kopf's cost is per handler invoked: each watched kind has one (``handlers.events``).
    No index handler: kopf's index barrier is quadratic in the objects of a restart."""
    reg = registry()
    assert reg._indexing.get_all_handlers() == []
    for plural in ("agentsessions", "agentinputs", "agentruns", "agents", "jobs", "pods"):
        watching = [h.id for h in reg._watching.get_all_handlers()
                    if h.selector is not None and h.selector.any_name == plural]
        assert watching == [plural], watching


def _memo(store: Store) -> Any:
    return SimpleNamespace(runtime=SimpleNamespace(kube=SimpleNamespace(store=store)))


def _event(memo: Any, body: dict[str, Any], type_: str | None) -> dict[str, Any]:
    meta = body["metadata"]
    return {"body": kopf.Body(body), "event": {"type": type_, "object": body}, "type": type_, "memo": memo, "name": meta["name"],
            "namespace": meta["namespace"], "labels": meta.get("labels") or {}}


async def test_the_store_sees_the_event_before_any_step() -> None:
    """A deleted object is gone from the store before a step of the same event reads it."""
    store = Store()
    store.track("agentruns")
    run = {"metadata": {"namespace": "ns", "name": "r", "resourceVersion": "1"}}
    store.see("agentruns", run)
    seen: list[Any] = []

    def step(**_: Any) -> None:
        seen.append(store.get("agentruns", "ns", "r"))

    await events.dispatch("agentruns", [(step, None)])(**_event(_memo(store), run, "DELETED"))
    assert seen == [None]


async def test_a_failing_step_does_not_stop_the_next_and_filters_apply(caplog: pytest.LogCaptureFixture) -> None:
    store = Store()
    store.track("agentruns")
    ran: list[str] = []

    async def broken(**_: Any) -> None:
        ran.append("broken")
        raise RuntimeError("boom")

    def child_only(**_: Any) -> None:
        ran.append("child")

    def last(**_: Any) -> None:
        ran.append("last")

    handler = events.dispatch("agentruns", [(broken, None), (child_only, events._labelled(PARENT_RUN_LABEL)),
                                            (last, None)])
    run = {"metadata": {"namespace": "ns", "name": "r", "resourceVersion": "1"}}
    await handler(**_event(_memo(store), run, "ADDED"))
    assert ran == ["broken", "last"]
    assert "Step 'broken' failed on agentruns ns/r" in caplog.text
    child = {"metadata": {"namespace": "ns", "name": "c", "resourceVersion": "2", "labels": {PARENT_RUN_LABEL: "r"}}}
    await handler(**_event(_memo(store), child, "ADDED"))
    assert ran == ["broken", "last", "broken", "child", "last"]
    assert store.get("agentruns", "ns", "c") is not None


def test_kopf_lists_in_pages_as_the_store_is_primed_paced_by_our_handlers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unpaged, kopf's initial listing of 50,000 inputs was one response: 2.3 GB at its peak."""
    from kopf._cogs.clients import fetching

    from sessionops.manager import listing, main
    from sessionops.platform.settings import Settings

    monkeypatch.setattr(fetching, "fetch_objs", fetching.fetch_objs)  # restored after the test
    monkeypatch.setattr(listing, "PACE", listing.Pace())
    settings = kopf.OperatorSettings()
    main.configure_kopf(settings, Settings())
    assert settings.watching.chunk_size == main.PAGE == 500
    assert settings.queueing.idle_timeout == main.IDLE_WORKER_SECONDS < 1
    assert fetching.fetch_objs is listing.paced_fetch_objs
    assert listing.PACE.paced == set(events.STEPS) >= {"agentsessions", "agentinputs", "agentruns", "jobs", "pods"}

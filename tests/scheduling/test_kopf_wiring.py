"""The kopf wiring the store and the cheap event path rely on."""

from __future__ import annotations

import kopf

from sessionops.manager.main import NoDiffBase, register_handlers


def registry() -> kopf.OperatorRegistry:
    register_handlers()
    return kopf.get_default_registry()


def test_no_handler_reads_a_diff_base_so_none_is_built() -> None:
    """``NoDiffBase`` is only right while every handler is an event or index handler: a
    changing (create/update/delete/resume) or spawning (timer/daemon) handler would read it."""
    reg = registry()
    assert reg._changing.get_all_handlers() == [] and reg._spawning.get_all_handlers() == []
    assert NoDiffBase().build(body=kopf.Body({"spec": {"a": 1}})) is None


def test_the_store_is_fed_first_and_without_kopf_indexes() -> None:
    """The store's handler runs before the other event handlers of its kind (kopf calls them in
    registration order): a deleted object is gone before a reconcile the event triggers reads.
    No index handler: kopf's index barrier is quadratic in the objects of a restart."""
    reg = registry()
    assert reg._indexing.get_all_handlers() == []
    for plural in ("agentsessions", "agentinputs", "agentruns", "agents", "jobs", "pods"):
        watching = [h.id for h in reg._watching.get_all_handlers()
                    if h.selector is not None and h.selector.any_name == plural]
        assert watching and watching[0] == f"store-{plural}", watching

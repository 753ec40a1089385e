"""Feeds the operator's store (``platform.store``) from kopf's watches.

The store is primed before kopf starts watching (``manager.main`` lists every kept kind), so the
first reconcile after a start reads complete lists. From then on these handlers, registered
before every other handler of their kind (``handlers/__init__``), put each event's object in,
or take a deleted one out, before the reconciles the same event triggers read the store.

Not kopf index handlers: kopf holds every handler back until all indexed objects of the initial
listings are indexed, and that barrier wakes every waiting object on each one indexed, which
is quadratic: a restart over 10,000 sessions ran a core flat out for more than ten minutes.
"""

from __future__ import annotations

from typing import Any

import kopf

from sessionops import GROUP, VERSION
from sessionops.api.names import RUN_LABEL


def _feed(plural: str):  # type: ignore[no-untyped-def]
    def feed(body: kopf.Body, type: str | None, memo: Any, **_: Any) -> None:
        store = memo.runtime.kube.store
        if type == "DELETED":
            store.forget(plural, dict(body))
        else:
            store.see(plural, dict(body), confirmed=True)
    feed.__name__ = f"store_{plural}"
    return feed


for _plural in ("agentsessions", "agentinputs", "agentruns", "agents"):
    kopf.on.event(GROUP, VERSION, _plural, id=f"store-{_plural}")(_feed(_plural))

# Only our workers' Jobs and pods (the watch is label-selected too: ``manager.main``).
kopf.on.event("batch", "v1", "jobs", id="store-jobs", labels={RUN_LABEL: kopf.PRESENT})(_feed("jobs"))
kopf.on.event("", "v1", "pods", id="store-pods", labels={RUN_LABEL: kopf.PRESENT})(_feed("pods"))

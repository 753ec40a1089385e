"""Feeds the operator's store (``platform.store``) from kopf's watches.

Index handlers, because kopf calls them for every object of the initial listings before any
other handler of any kind runs: the first reconcile after a start already reads complete
lists. They return None, so kopf's own index keeps nothing (no second copy). kopf calls no
index handler for a deletion: the event handlers below drop the object, and are registered
first (this module is imported before the other handlers), so the reconciles an event
triggers never see a deleted object.
"""

from __future__ import annotations

from typing import Any

import kopf

from sessionops import GROUP, VERSION
from sessionops.api.names import RUN_LABEL


def _deleted(type: str | None, **_: Any) -> bool:
    return type == "DELETED"


def _see(plural: str):  # type: ignore[no-untyped-def]
    def see(body: kopf.Body, memo: Any, **_: Any) -> None:
        memo.runtime.kube.store.see(plural, dict(body))
    see.__name__ = f"store_{plural}"
    return see


def _forget(plural: str):  # type: ignore[no-untyped-def]
    async def forget(body: kopf.Body, memo: Any, **_: Any) -> None:
        memo.runtime.kube.store.forget(plural, dict(body))
    forget.__name__ = f"store_forget_{plural}"
    return forget


for _plural in ("agentsessions", "agentinputs", "agentruns", "agents"):
    kopf.index(GROUP, VERSION, _plural, id=f"store-{_plural}")(_see(_plural))
    kopf.on.event(GROUP, VERSION, _plural, id=f"store-forget-{_plural}", when=_deleted)(_forget(_plural))

# Only our workers' Jobs and pods (the watch is label-selected too: ``manager.main``).
kopf.index("batch", "v1", "jobs", id="store-jobs", labels={RUN_LABEL: kopf.PRESENT})(_see("jobs"))
kopf.on.event("batch", "v1", "jobs", id="store-forget-jobs", labels={RUN_LABEL: kopf.PRESENT},
              when=_deleted)(_forget("jobs"))
kopf.index("", "v1", "pods", id="store-pods", labels={RUN_LABEL: kopf.PRESENT})(_see("pods"))
kopf.on.event("", "v1", "pods", id="store-forget-pods", labels={RUN_LABEL: kopf.PRESENT},
              when=_deleted)(_forget("pods"))

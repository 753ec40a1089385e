"""Feeds the operator's store (``platform.store``) from kopf's watches.

The store is primed before kopf starts watching (``manager.main`` lists every kept kind), so the
first reconcile after a start reads complete lists. From then on each kind's event handler
(``handlers.events``) puts the event's object in, or takes a deleted one out, before the
reconciles of the same event read the store.

Not kopf index handlers: kopf holds every handler back until all indexed objects of the initial
listings are indexed, and that barrier wakes every waiting object on each one indexed, which
is quadratic: a restart over 10,000 sessions ran a core flat out for more than ten minutes.
"""

from __future__ import annotations

from typing import Any

from sessionops.api.names import RUN_LABEL
from sessionops.views import InputView


def feed(plural: str, body: dict[str, Any], type: str | None, memo: Any) -> None:
    """The event's object into the store, or a deleted one out of it. An event of a run's Job or
    pod, or of an answer to it, also makes the run due at the recovery scan (``platform.cache``:
    the retry of a step that fails on this event)."""
    store = memo.runtime.kube.store
    if type == "DELETED":
        store.forget(plural, dict(body))
    else:
        store.see(plural, dict(body), confirmed=True)
    metadata = body.get("metadata") or {}
    if plural in ("jobs", "pods"):
        run = (metadata.get("labels") or {}).get(RUN_LABEL)
    elif plural == "agentinputs":
        run = InputView(body).resume_run  # an answer: the run it resumes
    else:
        return
    if run:
        memo.runtime.cache.touch_run((metadata.get("namespace") or "", run))

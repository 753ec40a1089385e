"""One kopf event handler per watched kind: it feeds the store, then runs the kind's steps in
order (the session, run, cancellation and Agent controllers' functions in the sibling modules).

Why one handler, not one per concern: kopf's cost is per handler invoked (its cause, logger and
context for each, about a third of a millisecond here), and an accepted input's seven watch
events invoked eighteen handlers. The behaviour of separate handlers is kept: the store sees
the event first, a step's filter (a label, a cancellation) is checked per event, and a step
that fails is logged and does not keep the next one from running; as with any event handler,
the next event or the recovery scan retries it. Each event handled is counted for the pacing
of kopf's initial listings (``manager.listing``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any

import kopf

from sessionops import GROUP, VERSION
from sessionops.api.names import RUN_LABEL
from sessionops.delegation.names import PARENT_RUN_LABEL
from sessionops.manager import listing
from sessionops.manager.handlers import agents, cancellation, runs, sessions, store

logger = logging.getLogger(__name__)

Step = tuple[Callable[..., Any], Callable[[dict[str, Any]], bool] | None]
"""A step and the filter an event must pass for it (None: every event)."""


def _labelled(label: str) -> Callable[[dict[str, Any]], bool]:
    return lambda kwargs: label in kwargs["labels"]


def dispatch(plural: str, steps: Sequence[Step]) -> Callable[..., Any]:
    """The kind's handler: the store, then each step whose filter passes, failures contained."""
    async def handler(**kwargs: Any) -> None:
        # The event's own dict, not kopf's Body view (which resolves every key it is asked for):
        # the steps only read it.
        kwargs["body"] = kwargs["event"]["object"]
        try:
            store.feed(plural, kwargs["body"], kwargs["type"], kwargs["memo"])
            for step, applies in steps:
                if applies is not None and not applies(kwargs):
                    continue
                try:
                    result = step(**kwargs)
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    # As kopf does for a failed event handler: logged on kopf's object logger (the
                    # JSON log names the object), and the event's other steps go on.
                    kwargs.get("logger", logger).exception("Step %r failed on %s %s/%s", step.__name__,
                                                           plural, kwargs.get("namespace"), kwargs.get("name"))
        finally:
            listing.PACE.handling(plural)  # the listing's next page may come (``manager.listing``)
    handler.__name__ = f"on_{plural}"
    return handler


STEPS: dict[str, Sequence[Step]] = {
    "agentsessions": [(sessions.session_changed, None)],
    "agentinputs": [(runs.resume_received, None), (sessions.input_changed, None)],
    "agentruns": [(cancellation.cancel_requested, lambda kwargs: cancellation.cancelling(kwargs["body"])),
                  (runs.run_event, None), (runs.child_run_event, _labelled(PARENT_RUN_LABEL)),
                  (sessions.run_changed, None)],
    "agents": [(agents.agent_changed, None)],
    "jobs": [(runs.job_event, None)],
    "pods": [(runs.pod_event, None)],
}

for _plural in ("agentsessions", "agentinputs", "agentruns", "agents"):
    kopf.on.event(GROUP, VERSION, _plural, id=_plural)(dispatch(_plural, STEPS[_plural]))
# Only our workers' Jobs and pods (the watch is label-selected too: ``manager.main``).
kopf.on.event("batch", "v1", "jobs", id="jobs", labels={RUN_LABEL: kopf.PRESENT})(dispatch("jobs", STEPS["jobs"]))
kopf.on.event("", "v1", "pods", id="pods", labels={RUN_LABEL: kopf.PRESENT})(dispatch("pods", STEPS["pods"]))

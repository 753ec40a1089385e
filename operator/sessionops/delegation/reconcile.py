"""The operator's delegation adapter: read a run's children, cascade a cancel or a
deadline to them, and wake what a finished child turn unblocks. Every write sets an
absolute value (a Cancelled phase, ``spec.cancel: true``), so repeating a pass is a no-op."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import AsyncIterator
from typing import Any

from sessionops.api import conditions
from sessionops.api.input import InputPhase
from sessionops.delegation import tree
from sessionops.delegation.names import PARENT_RUN_LABEL, TREE_LABEL, child_input_name
from sessionops.platform.kube import Kube
from sessionops.platform.locks import lock
from sessionops.views import InputView, RunView, SessionView

logger = logging.getLogger(__name__)


async def _children(kube: Kube, namespace: str, run: str) -> tuple[list[dict], list[dict], list[dict]]:
    selector = f"{PARENT_RUN_LABEL}={run}"
    sessions, inputs, runs = await asyncio.gather(kube.cached_list("agentsessions", namespace, selector),
                                                  kube.cached_list("agentinputs", namespace, selector),
                                                  kube.cached_list("agentruns", namespace, selector))
    return sessions, inputs, runs


async def observe(kube: Kube, run: dict[str, Any]) -> list[tuple[str, tree.Child]]:
    """The children a Delegation waitpoint waits on, in its order, with their given names."""
    namespace = run["metadata"]["namespace"]
    awaited = RunView(run).awaited_children
    sessions, inputs, runs = await _children(kube, namespace, run["metadata"]["name"])
    by_session = {s["metadata"]["name"]: s for s in sessions}
    by_input = {i["metadata"]["name"]: i for i in inputs}
    by_run = {r["metadata"]["name"]: r for r in runs}
    found = []
    for name in awaited:
        session = by_session.get(name)
        inp = by_input.get(child_input_name(name))
        child_run = by_run.get(tree.run_of(inp) or "")
        given = SessionView(session).delegated_name or name
        found.append((given, tree.Child(name, session, inp, child_run)))
    return found


@contextlib.asynccontextmanager
async def tree_slot(kube: Kube, namespace: str, root: str, bound: int) -> AsyncIterator[str | None]:
    """Hold the tree's lock while a turn may start (a claim, a resume); yields why it may not
    (None: the tree has room). Counting and starting must not interleave with a sibling's,
    or two could both take the last slot."""
    async with lock("tree", namespace, root):
        # From memory: a sibling's claim made under this lock is in the store (its create response).
        running = tree.running_turns(await kube.cached_list("agentruns", namespace, f"{TREE_LABEL}={root}"))
        yield tree.held_back(root, running, bound)


def tree_of(run: dict[str, Any]) -> str:
    """The tree a run counts in (its session's root; the session itself for an unlabelled run)."""
    view = RunView(run)
    return view.labels.get(TREE_LABEL) or view.session_name


async def cascade(kube: Kube, run: dict[str, Any], reason: str) -> int:
    """Stop everything ``run`` delegated: delegated inputs not yet claimed become Cancelled,
    active child turns get ``spec.cancel`` (their own cancellation cascades further down).
    Returns how many child turns are still active.

    Under the tree's lock, the one a child's queue holds while it claims: a child is either
    claimed before this lists the runs (and its run is cancelled here) or finds its input
    Cancelled (and never starts). Admission refuses new children of a cancelled run."""
    namespace, name = run["metadata"]["namespace"], run["metadata"]["name"]
    async with lock("tree", namespace, tree_of(run)):
        sessions, inputs, runs = await _children(kube, namespace, name)
        delegated = {child_input_name(s["metadata"]["name"]) for s in sessions}
        for inp in inputs:
            if inp["metadata"]["name"] in delegated and InputView(inp).phase == InputPhase.PENDING.value:
                cancelled = conditions.condition("Cancelled", True, "ParentEnded", reason)
                await kube.patch_status("agentinputs", namespace, inp["metadata"]["name"], {"status": {
                    "phase": InputPhase.CANCELLED.value,
                    "conditions": conditions.updated(inp, [cancelled], datetime.datetime.now(datetime.UTC))}})
        active = 0
        for child in runs:
            if RunView(child).terminal:
                continue
            active += 1
            if not RunView(child).cancel_requested:
                logger.info("run %s/%s: cancelling child turn %s (%s)", namespace, name, child["metadata"]["name"],
                            reason)
                await kube.patch("agentruns", namespace, child["metadata"]["name"], {"spec": {"cancel": True}})
        return active

"""The receipt adapter: reads the session and its runs, decides, and allocates the
input's sequence with a compare-and-swap on the session (its "same session lock")."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from typing import Any

from sessionops.admission.errors import CONFLICT, Rejection
from sessionops.admission.inputs import Receipt, active_turn, decide_receipt
from sessionops.api.config import OperatorConfig
from sessionops.api.input import InputKind
from sessionops.platform.errors import Conflict
from sessionops.platform.kube import Kube
from sessionops.platform.locks import lock
from sessionops.views import SessionView

# Bounded: every successful receipt or session status write moves the resourceVersion,
# so under a burst a receipt may lose the race many times before it wins.
MAX_ATTEMPTS = 200


@dataclasses.dataclass(frozen=True)
class Allocated:
    sequence: int
    receipt: Receipt
    session: dict[str, Any]


async def read_state(kube: Kube, namespace: str, spec: dict[str, Any], *,
                     fresh: bool = False) -> tuple[dict | None, dict | None, dict | None]:
    """The session from memory first: the allocation's compare-and-swap proves it current (a
    lost swap reads again with ``fresh``). A miss is confirmed fresh: right after a start the
    store may still be filling, and a missing session or active run changes the verdict."""
    session_name = (spec.get("sessionRef") or {}).get("name", "")
    session = None if fresh else await kube.cached_get("agentsessions", namespace, session_name)
    if session is None:
        session = await kube.get("agentsessions", namespace, session_name)
    active_name = SessionView(session).active_run if session else None
    resume_name = spec.get("run") if spec.get("kind") == InputKind.RESUME.value else None
    # Fresh: an answer is checked against the waitpoint it answers, which the worker has just
    # written; a lagging watch would refuse a correct answer (Resume inputs are few).
    resume = await kube.get("agentruns", namespace, resume_name) if resume_name else None
    if resume is not None and resume_name == active_name:
        active = resume
    else:
        active = await kube.cached_get("agentruns", namespace, active_name) if active_name and not fresh else None
        if active_name and active is None:
            active = await kube.get("agentruns", namespace, active_name)
    return session, (active_turn(session, active) if session else None), resume


async def receive(kube: Kube, config: OperatorConfig, namespace: str, spec: dict[str, Any], *,
                  dry_run: bool) -> Allocated:
    """Decide the receipt and allocate ``lastSequence + 1`` under the session's resourceVersion.

    Safe to retry: a lost compare-and-swap re-reads the session and decides again, so the
    input's snapshot is always the one of the session version its sequence came from.
    A dry run decides but allocates nothing (sideEffects: NoneOnDryRun).
    """
    session_name = (spec.get("sessionRef") or {}).get("name", "")
    # Receipts of one session queue up inside this replica, so a burst costs one round
    # each instead of everyone retrying against everyone; the compare-and-swap still
    # decides across replicas and against session updates.
    async with lock("receipt", namespace, session_name):
        return await _allocate(kube, config, namespace, spec, session_name, dry_run=dry_run)


async def _allocate(kube: Kube, config: OperatorConfig, namespace: str, spec: dict[str, Any], session_name: str,
                    *, dry_run: bool) -> Allocated:
    for attempt in range(MAX_ATTEMPTS):
        session, active, resume_run = await read_state(kube, namespace, spec, fresh=attempt > 0)
        receipt = decide_receipt(spec, session, session_name=session_name, active_run=active,
                                 resume_run=resume_run, config=config)
        assert session is not None  # decide_receipt rejects a missing session
        sequence = SessionView(session).last_sequence + 1
        if dry_run:
            return Allocated(sequence, receipt, session)
        cas = {"metadata": {"resourceVersion": session["metadata"]["resourceVersion"]},
               "status": {"lastSequence": sequence}}
        try:
            await kube.patch_status("agentsessions", namespace, session_name, cas)
        except Conflict:
            await asyncio.sleep(random.uniform(0, 0.004))
            continue
        return Allocated(sequence, receipt, session)
    raise Rejection("spec.sessionRef.name", f'agentsession "{session_name}" is too busy: no sequence could be '
                                            "allocated; retry", CONFLICT)

"""The AgentRun's conditions (pure): ``Succeeded``, ``Failed``, ``Waiting`` and ``Cancelled``
follow the phase, ``Ready`` says whether the current segment's pod runs.

Every phase write carries all four phase conditions, so ``kubectl wait
--for=condition=Succeeded`` (or ``=False``) has something to read at every phase and the
condition can never disagree with the phase written in the same patch.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from sessionops.api import conditions
from sessionops.api.run import RunPhase

SUCCEEDED, FAILED, WAITING, CANCELLED, READY = "Succeeded", "Failed", "Waiting", "Cancelled", "Ready"
CLEANUP_FAILED = "CleanupFailed"
PHASE_TYPES = (SUCCEEDED, FAILED, WAITING, CANCELLED)


def phase_conditions(phase: str, *, reason: str | None = None, message: str = "") -> list[dict[str, Any]]:
    """The four phase conditions for ``phase``; ``reason``/``message`` explain the true one
    (a Failed reason such as ModelError, a waitpoint kind). The others are False with the
    phase as their reason."""
    wanted = []
    for type_ in PHASE_TYPES:
        if phase == type_:
            wanted.append(conditions.condition(type_, True, reason or type_, message))
        else:
            wanted.append(conditions.condition(type_, False, phase or RunPhase.PENDING.value))
    return wanted


def ready_for_phase(phase: str) -> dict[str, Any]:
    """Ready as far as the phase tells: a Running run's worker writes it from inside its pod;
    a Pending run's pod has not started yet (the operator refines this from the pod's own
    state); any other phase holds no pod."""
    if phase == RunPhase.RUNNING.value:
        return conditions.condition(READY, True, "PodRunning", "the worker pod of the current segment runs")
    if phase == RunPhase.PENDING.value:
        return conditions.condition(READY, False, "PodPending", "the worker pod of the current segment has not "
                                                                "started yet")
    return conditions.condition(READY, False, phase, "no segment runs")


def with_phase(run: Mapping[str, Any], patch: dict[str, Any], now: datetime.datetime, *,
               reason: str | None = None, message: str = "", extra: list[dict[str, Any]] | None = None
               ) -> dict[str, Any]:
    """``patch`` (a run status merge patch that sets ``phase``) plus the whole conditions list
    that matches it, computed from the stored conditions (timestamps kept where nothing changed).
    ``Ready`` follows the phase unless ``extra`` carries one (the pod's own state)."""
    extra = list(extra or [])
    ready = [] if any(c["type"] == READY for c in extra) else [ready_for_phase(patch["phase"])]
    wanted = [*phase_conditions(patch["phase"], reason=reason, message=message), *ready, *extra]
    return {**patch, "conditions": conditions.updated(run, wanted, now)}

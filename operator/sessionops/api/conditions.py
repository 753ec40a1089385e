"""Conditions by the Kubernetes API conventions, through one helper (pure).

Every writer of ``status.conditions`` (the operator's controllers and the worker) goes
through ``set_conditions``: a condition is replaced by type, ``observedGeneration`` is
stamped, and ``lastTransitionTime`` moves only when the status changes (a new reason or
message with the same status is not a transition), as cert-manager's and apimachinery's
``SetStatusCondition`` do. Because unchanged conditions come back equal, a caller can
compare the result with what is stored and skip a no-op write.

A status merge patch replaces the whole list, so the helper always returns the full list
computed from the stored one; writers that may race (operator and worker on a run) make
that write a compare-and-swap.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sessionops.api.timestamps import iso

TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"
MESSAGE_MAX = 1024
"""Messages are bounded: conditions are read at a glance, and the object stays small."""
_TRUNCATED = " [...]"


def now_iso(now: datetime.datetime) -> str:
    return iso(now.astimezone(datetime.UTC))


def condition(type_: str, status: bool | str, reason: str, message: str = "") -> dict[str, Any]:
    """A wanted condition; ``status`` may be a bool (True/False) or ``Unknown``."""
    if isinstance(status, bool):
        status = TRUE if status else FALSE
    if status not in (TRUE, FALSE, UNKNOWN):
        raise ValueError(f"condition {type_}: status must be True, False or Unknown, not {status!r}")
    if not reason:
        raise ValueError(f"condition {type_}: a reason is required (CamelCase)")
    if len(message) > MESSAGE_MAX:
        message = message[:MESSAGE_MAX - len(_TRUNCATED)] + _TRUNCATED
    return {"type": type_, "status": status, "reason": reason, "message": message}


def set_conditions(current: Sequence[Mapping[str, Any]] | None, wanted: Iterable[Mapping[str, Any]], *,
                   generation: int | None, now: datetime.datetime) -> list[dict[str, Any]]:
    """``current`` with each of ``wanted`` replacing the condition of its type (new types are
    appended in order). Types not in ``wanted`` stay as stored."""
    result = [dict(c) for c in current or []]
    index = {c.get("type"): i for i, c in enumerate(result)}
    for want in wanted:
        old = result[index[want["type"]]] if want["type"] in index else None
        stamp = old.get("lastTransitionTime") if old is not None and old.get("status") == want["status"] else None
        new = {**want, "lastTransitionTime": stamp or now_iso(now)}
        if generation is not None:
            new["observedGeneration"] = generation
        if old is None:
            index[want["type"]] = len(result)
            result.append(new)
        else:
            result[index[want["type"]]] = new
    return result


def find(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions or [] if c.get("type") == type_), None)


def is_true(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> bool:
    return (find(conditions, type_) or {}).get("status") == TRUE


def updated(obj: Mapping[str, Any], wanted: Iterable[Mapping[str, Any]], now: datetime.datetime) -> list[dict[str, Any]]:
    """``set_conditions`` on an object's stored conditions, stamped with its generation."""
    meta = obj.get("metadata") or {}
    return set_conditions((obj.get("status") or {}).get("conditions"), wanted, generation=meta.get("generation"),
                          now=now)

"""Phase changes become Events and metrics. The tracker remembers the last phase seen per
object in this process; a phase first seen after a restart (in kopf's initial listing, or on
an object already edited) is recorded, not announced: an Event per object per restart would
be noise, and a restart over idle objects writes nothing."""

from __future__ import annotations

from typing import Any

from sessionops.api import conditions
from sessionops.platform import metrics
from sessionops.platform.kube import Kube

_seen: dict[tuple[str, str, str], str | None] = {}


async def observe(kube: Kube, obj: dict[str, Any], *, deleted: bool = False, listed: bool = False) -> bool:
    """Post an Event and count a transition when ``obj``'s phase changed. Safe to repeat:
    the same phase seen twice is not a change. ``listed``: seen in the watch's initial listing
    (kopf's event type None), so whatever phase it has was reached before this process."""
    meta = obj.get("metadata", {})
    key = (obj.get("kind", ""), meta.get("namespace", ""), meta.get("name", ""))
    if deleted:
        _seen.pop(key, None)
        return False
    phase = (obj.get("status") or {}).get("phase")
    known = key in _seen
    previous = _seen.get(key)
    _seen[key] = phase
    if phase is None or phase == previous or (not known and (listed or meta.get("generation", 1) > 1)):
        return False
    metrics.PHASE_TRANSITIONS.labels(kind=key[0], phase=phase).inc()
    message = f"{key[0]} is {phase}" + (f" (was {previous})" if previous else "")
    failed = conditions.find((obj.get("status") or {}).get("conditions"), "Failed") if phase == "Failed" else None
    reason = (failed or {}).get("reason")
    if reason:
        message += f": {reason}"
    await kube.post_event(obj, type_="Warning" if phase == "Failed" else "Normal", reason=phase, message=message)
    return True

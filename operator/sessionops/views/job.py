"""What the run controller and the cancellation controller read of a segment's Job."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from sessionops.api.timestamps import parse


@dataclasses.dataclass(frozen=True)
class JobView:
    """What the run controller needs to know about a segment's Job."""

    exists: bool
    finished: bool = False
    succeeded: bool = False
    started: bool = False
    created_at: datetime.datetime | None = None
    reason: str = ""

    @classmethod
    def of(cls, job: dict[str, Any] | None) -> JobView:
        if job is None:
            return cls(exists=False)
        status = job.get("status") or {}
        conds = {c.get("type"): c for c in status.get("conditions") or [] if c.get("status") == "True"}
        created = job.get("metadata", {}).get("creationTimestamp")
        created_at = parse(created)
        failed = conds.get("Failed")
        return cls(exists=True, finished="Complete" in conds or failed is not None,
                   # A real Job controller sets startTime and active before any pod runs:
                   # only a ready or finished pod proves the segment started.
                   succeeded="Complete" in conds,
                   started=bool(status.get("ready") or status.get("succeeded") or status.get("failed")),
                   created_at=created_at,
                   reason=(failed or {}).get("reason", "") + (": " + failed["message"] if failed and
                                                               failed.get("message") else ""))

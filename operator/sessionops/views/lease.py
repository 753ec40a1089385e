"""A session Lease (``coordination.k8s.io/v1``) as its writer and its watcher read it."""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Any

from sessionops.api.timestamps import parse


class Holder(enum.Enum):
    FREE = "free"
    OURS = "ours"
    OTHER = "other"


@dataclasses.dataclass(frozen=True)
class LeaseView:
    """What the worker's acquire decision and the cancellation cleanup's "is a writer alive" read
    of a session Lease: both must read it the same way, so it is read here once."""

    holder: str | None
    renew_time: datetime.datetime | None
    duration: int

    @classmethod
    def of(cls, lease: dict[str, Any]) -> LeaseView:
        spec = lease.get("spec") or {}
        renew = spec.get("renewTime") or spec.get("acquireTime")
        return cls(holder=spec.get("holderIdentity") or None, renew_time=parse(renew),
                   duration=int(spec.get("leaseDurationSeconds") or 0))

    @property
    def expires_at(self) -> datetime.datetime | None:
        """When the holder's claim runs out (None: never renewed, so no claim)."""
        if self.renew_time is None:
            return None
        return self.renew_time + datetime.timedelta(seconds=self.duration)

    def expired(self, now: datetime.datetime) -> bool:
        return self.expires_at is None or self.expires_at < now

    def holder_state(self, me: str, now: datetime.datetime) -> Holder:
        if self.holder is None or self.expired(now):
            return Holder.FREE
        return Holder.OURS if self.holder == me else Holder.OTHER

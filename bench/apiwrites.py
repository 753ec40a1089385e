"""API writes as the test cluster received them, for the benchmarks: counted by kind, the
transcript's writes apart from the others, and the shortest gap between two transcript
writes of one run (the coalescing bound: at most one write per 250 ms per run)."""

from __future__ import annotations

import collections
import time
from typing import Any

WRITES = {"POST", "PUT", "PATCH", "DELETE"}
TRANSCRIPTS = "agenttranscripts"
COALESCE_SECONDS = 0.25


class RequestLog(list):
    """The cluster's request list, with the arrival time of every request appended."""

    def __init__(self, items: list[Any]) -> None:
        super().__init__(items)
        self.times: list[float] = [0.0] * len(items)

    def append(self, item: Any) -> None:
        self.times.append(time.monotonic())
        super().append(item)


def record(cluster: Any) -> RequestLog:
    """Time the requests ``cluster`` receives from now on (the test cluster's request list)."""
    log = RequestLog(cluster._requests)
    cluster._requests = log
    return log


def _method(req: Any) -> str:
    return str(getattr(req.method, "value", req.method)).upper()


def _kind(req: Any) -> str:
    return f"{_method(req)} {req.resource.plural}{'/' + req.subresource if req.subresource else ''}"


def _run_of(req: Any) -> str | None:
    spec = (req.data or {}).get("spec") if isinstance(req.data, dict) else None
    return (spec or {}).get("run") or (req.name.rsplit("-t", 1)[0] if req.name else None)


def writes(log: RequestLog, start: int = 0) -> dict[str, Any]:
    """Writes since request ``start``: transcripts and the rest by kind, and per run the
    shortest gap between two transcript writes (seconds)."""
    other: collections.Counter[str] = collections.Counter()
    transcripts = 0
    by_run: dict[str, list[float]] = collections.defaultdict(list)
    for req, at in zip(log[start:], log.times[start:], strict=True):
        if _method(req) not in WRITES or req.resource is None:
            continue
        if req.resource.plural == TRANSCRIPTS and not req.subresource:
            transcripts += 1
            if (run := _run_of(req)) is not None:
                by_run[run].append(at)
        else:
            other[_kind(req)] += 1
    gaps = [b - a for times in by_run.values() for a, b in zip(times, times[1:], strict=False)]
    return {"transcript_writes": transcripts, "other_writes": sum(other.values()),
            "other_writes_by_kind": dict(sorted(other.items())),
            "min_transcript_write_gap_seconds": round(min(gaps), 3) if gaps else None,
            "runs_with_transcript_writes": len(by_run)}


def coalesced(report: dict[str, Any]) -> bool:
    """At most one transcript write per 250 ms per run (a small tolerance for the clock of
    the request's arrival, which is not the worker's)."""
    gap = report["min_transcript_write_gap_seconds"]
    return gap is None or gap >= COALESCE_SECONDS - 0.05

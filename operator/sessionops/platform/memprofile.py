"""Where the operator's memory goes: tracemalloc on request, a report on a signal.

``SESSIONOPS_TRACEMALLOC=<frames>`` starts tracemalloc at the operator's start (once its modules
are loaded, before any object is seen), keeping ``frames`` frames per allocation.
``kill -USR2 <pid>`` then writes the largest live allocations, grouped by file and line (and,
with more than one frame, by call stack), as JSON to ``SESSIONOPS_TRACEMALLOC_FILE`` (default:
``sessionops-tracemalloc-<pid>.json`` in the temporary directory); the next signal, what was
allocated since and is still live. Off by default: tracing costs CPU on every allocation and
memory for every trace, and a report pauses the operator (seconds per million traces).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import tempfile
import tracemalloc
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

logger = logging.getLogger(__name__)

TOP = 30
"""Entries by file and line in a report."""
TOP_STACKS = 10
"""Entries by call stack in a report (with more than one frame traced)."""
SIGNAL = signal.SIGUSR2


def report(limit: int = TOP, stacks: int = TOP_STACKS) -> dict[str, Any]:
    """The largest live allocations now (tracemalloc must be tracing).

    Tracing stops while the snapshot is grouped (grouping millions of traces while tracing
    would trace its own allocations too: ten times slower) and starts again afterwards, so a
    later report shows what was allocated since this one and is still live: growth.
    """
    frames = tracemalloc.get_traceback_limit()
    snapshot = tracemalloc.take_snapshot()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    try:
        result: dict[str, Any] = {
            "frames": frames, "traces": len(snapshot.traces),
            "traced_mb": round(current / 2**20, 1), "peak_traced_mb": round(peak / 2**20, 1),
            "top": [{"where": _where(s.traceback[0]), "size_kb": round(s.size / 1024, 1), "count": s.count}
                    for s in snapshot.statistics("lineno")[:limit]],
        }
        if frames > 1:
            result["top_stacks"] = [{"stack": [_where(f) for f in reversed(s.traceback)],  # allocating line first
                                     "size_kb": round(s.size / 1024, 1), "count": s.count}
                                    for s in snapshot.statistics("traceback")[:stacks]]
        return result
    finally:
        del snapshot
        tracemalloc.start(frames)


def _where(frame: tracemalloc.Frame) -> str:
    """``file:line``, the file relative to the import path entry it was found under."""
    filename = frame.filename
    for root in sorted((p for p in sys.path if p), key=len, reverse=True):
        if filename.startswith(root.rstrip("/") + "/"):
            filename = filename[len(root.rstrip("/")) + 1:]
            break
    return f"{filename}:{frame.lineno}"


def write_report(path: Path) -> None:
    """The report, written whole (a reader never sees half a file)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(report(), indent=1))
    os.replace(partial, path)


def start_from_env(env: Mapping[str, str] | None = None) -> Path | None:
    """Start tracing and listen for the signal when ``SESSIONOPS_TRACEMALLOC`` asks for it; the
    report's path, or None when off. Call from the main thread (signal handlers live there)."""
    env = os.environ if env is None else env
    frames = env.get("SESSIONOPS_TRACEMALLOC", "")
    if not frames:
        return None
    path = Path(env.get("SESSIONOPS_TRACEMALLOC_FILE") or
                Path(tempfile.gettempdir()) / f"sessionops-tracemalloc-{os.getpid()}.json")
    tracemalloc.start(max(1, int(frames)))

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # Runs between two bytecodes of the main thread (the event loop's): the snapshot
        # pauses the operator for its duration, which is what a measurement on request costs.
        try:
            write_report(path)
            logger.info("tracemalloc report written to %s", path)
        except OSError as e:
            logger.warning("tracemalloc report not written to %s: %s", path, e)

    signal.signal(SIGNAL, on_signal)
    return path

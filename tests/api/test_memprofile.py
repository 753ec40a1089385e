"""The operator's tracemalloc hook: off unless asked; on request, the largest allocations by line."""

from __future__ import annotations

import json
import os
import signal
import tracemalloc
from pathlib import Path

from sessionops.platform import memprofile


def test_off_unless_asked() -> None:
    assert memprofile.start_from_env({}) is None
    assert not tracemalloc.is_tracing()


def _hoard() -> list[bytes]:
    return [bytes(1000) for _ in range(4000)]  # HOARD: about 4 MB allocated on this line


def test_the_signal_writes_the_largest_allocations_by_line_and_by_stack(tmp_path: Path) -> None:
    path = tmp_path / "tracemalloc.json"
    previous = signal.getsignal(memprofile.SIGNAL)
    try:
        env = {"SESSIONOPS_TRACEMALLOC": "4", "SESSIONOPS_TRACEMALLOC_FILE": str(path)}
        assert memprofile.start_from_env(env) == path
        hoard = _hoard()  # CALL
        os.kill(os.getpid(), memprofile.SIGNAL)  # the handler runs in this (the main) thread, at once
        report = json.loads(path.read_text())
        assert tracemalloc.is_tracing()  # again, after the report
        os.kill(os.getpid(), memprofile.SIGNAL)
        since = json.loads(path.read_text())  # what was allocated since the first report
        del hoard
    finally:
        tracemalloc.stop()
        signal.signal(memprofile.SIGNAL, previous)
    line = next(i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1) if "# HOARD" in text)
    assert report["frames"] == 4 and report["traced_mb"] >= 3.5
    assert report["top"][0]["where"] == f"tests/api/test_memprofile.py:{line}"
    assert report["top"][0]["size_kb"] >= 3900 and report["top"][0]["count"] >= 4000
    assert len(report["top"]) <= memprofile.TOP
    assert report["top_stacks"][0]["stack"][0] == f"tests/api/test_memprofile.py:{line}"
    call = next(i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1) if "# CALL" in text)
    assert f"tests/api/test_memprofile.py:{call}" in report["top_stacks"][0]["stack"]  # up the calls
    assert all(not e["where"].endswith(f"test_memprofile.py:{line}") for e in since["top"])

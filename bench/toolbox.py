"""The cost of running the tools in their own process: per-call latency, in process vs over the
tools process's Unix socket, and the tools process's start (spawn -> first answered ping).
Prints JSON.

    python bench/toolbox.py [--calls 200] [--starts 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "operator"))

from sessionops.toolbox.client import ToolboxClient  # noqa: E402
from sessionops.toolbox.ops import LocalToolbox  # noqa: E402

CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "read_file": ("read_file", {"path": "small.txt"}),
    "list_files": ("list_files", {"path": "."}),
    "run_shell true": ("run_shell", {"command": "true", "timeoutSeconds": 10}),
}


def _timed(call: Callable[[], Any], n: int) -> dict[str, float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return {"median_ms": round(statistics.median(samples), 3), "p95_ms": round(samples[int(0.95 * (n - 1))], 3)}


def _spawn(work: Path, sock: Path) -> subprocess.Popen[bytes]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT / "operator"),
           "SESSIONOPS_WORKDIR": str(work), "SESSIONOPS_TOOLS_SOCKET": str(sock)}
    return subprocess.Popen([sys.executable, "-m", "sessionops.toolbox"], env=env, cwd=work,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--starts", type=int, default=10)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-toolbox-"))
    work = tmp / "work"
    work.mkdir()
    (work / "small.txt").write_text("hello\n" * 100)
    for i in range(50):
        (work / f"f{i}").write_text("x")
    local = LocalToolbox(work)
    starts = []
    for i in range(args.starts):
        sock = tmp / f"start-{i}.sock"
        t0 = time.perf_counter()
        proc = _spawn(work, sock)
        ToolboxClient(sock).wait_ready(30, interval=0.002)
        starts.append((time.perf_counter() - t0) * 1000)
        proc.terminate()
        proc.wait()
    sock = tmp / "tools.sock"
    proc = _spawn(work, sock)
    remote = ToolboxClient(sock)
    remote.wait_ready(30)
    per_call = {}
    try:
        for label, (op, call_args) in CALLS.items():
            in_process = _timed(lambda op=op, a=call_args: local.call(op, a), args.calls)
            socket = _timed(lambda op=op, a=call_args: remote.call(op, a), args.calls)
            per_call[label] = {"in_process": in_process, "tools_process": socket,
                               "added_median_ms": round(socket["median_ms"] - in_process["median_ms"], 3)}
    finally:
        proc.terminate()
        proc.wait()
    print(json.dumps({
        "bench": "tools process: per-call latency and start",
        "per_call": per_call,
        "tools_process_start_ms": {"median": round(statistics.median(starts), 1), "max": round(max(starts), 1)},
        "machine": {"cpus": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2), "python": sys.version.split()[0]},
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`make dev`, `make demo` and `make dev-down` as a new user runs them (examples/ are applied)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.stack import ROOT


def run(command: str, dev: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tests.localstack", command], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "SESSIONOPS_DEV_DIR": str(dev)})


def test_dev_demo_and_dev_down_show_a_conversation_and_stop_everything(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    try:
        up = run("up", dev)
        assert up.returncode == 0, up.stdout + up.stderr + "".join(
            p.read_text()[-3000:] for p in dev.glob("*.log"))
        assert (dev / "kubeconfig").exists() and "SESSIONOPS_REPLAY_URL=" in (dev / "env").read_text()
        again = run("up", dev)
        assert "already running" in again.stdout
        demo = run("demo", dev)
        assert demo.returncode == 0, demo.stdout + demo.stderr
        assert "assistant: Wrote hello.sh and ran it." in demo.stdout
        assert "cleanup steps: MergeCompletedTasks, AddCancellationResults, ClearTasks" in demo.stdout
        assert "Paused" in demo.stdout
        pids = [int(line.split()[1]) for line in (dev / "pids").read_text().splitlines()]
    finally:
        down = run("down", dev)
    assert down.returncode == 0 and not (dev / "pids").exists()
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"process {pid} still runs after dev-down")

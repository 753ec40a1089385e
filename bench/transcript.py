"""Transcript publication: API writes per step, and the delay from the worker's step to a
watcher's line (prints JSON).

One worker process (as a pod would run it) drives a turn of ``--steps`` tool calls
(``list_files``, one per model call, then an answer) against the test cluster, PostgreSQL
and the replay model over HTTP. A watcher follows the run's AgentTranscript chunks through
the watch API, as ``kubectl sessionops transcript --follow`` does; each watch event is one
write. A step's delay is the watcher's receive time minus the step's ``at`` (when the
worker learned it), so it includes the coalescing wait (<= 250 ms), the write and the watch.
Target: p99 <= 1 s; writes <= 4 per second of turn.

    python bench/transcript.py [--steps 20]      # DATABASE_URL selects the PostgreSQL server
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import apiwrites  # noqa: E402
from bench.sidecar import start_tools  # noqa: E402
from bench.worker import NS, _create, _env, prepare_namespace  # noqa: E402
from sessionops.api.config import OperatorConfig  # noqa: E402
from sessionops.api.snapshot import ContextSnapshot, SnapshotSource  # noqa: E402
from sessionops.execution.jobs import job_body  # noqa: E402
from sessionops.platform.kube import load_api_client  # noqa: E402
from sessionops.platform.worker_kube import CUSTOM, WorkerKube  # noqa: E402
from sessionops.replay import running_replay_server  # noqa: E402
from testcluster.podrunner.threaded import threaded_cluster  # noqa: E402
from tests import pgserver  # noqa: E402
from tests.agent.pg import create_database, drop_database, server_url  # noqa: E402

TARGET_P99_SECONDS = 1.0


def _scenario(directory: Path, steps: int) -> str:
    responses: list[dict[str, Any]] = [{"toolCalls": [{"name": "list_files", "args": {"path": "."}}]}
                                       for _ in range(steps)]
    responses.append({"content": "done"})
    (directory / "many-steps.yaml").write_text(yaml.safe_dump({"name": "many-steps", "responses": responses}))
    return "many-steps"


def _watch(kubeconfig: Path, run: str, seen: dict[str, float], events: list[float], stop: threading.Event) -> None:
    from kubernetes import client, watch

    api = client.CustomObjectsApi(load_api_client(str(kubeconfig)))
    while not stop.is_set():
        for event in watch.Watch().stream(api.list_namespaced_custom_object, "sessionops.dev", "v1alpha1", NS,
                                          "agenttranscripts", label_selector=f"sessionops.dev/run={run}",
                                          timeout_seconds=1):
            received = time.time()
            events.append(received)
            for step in event["object"]["spec"].get("steps") or []:
                seen.setdefault(step["id"], received)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="tool calls in the turn (2 steps each, plus 3)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-transcript-"))
    scenario = _scenario(tmp, args.steps)
    database = create_database()
    dsn = server_url(database)
    try:
        with running_replay_server(dirs=[tmp]) as replay, threaded_cluster(tmp / "kubeconfig", bookmark_interval=0.2) as cluster:
            kube = WorkerKube(load_api_client(str(tmp / "kubeconfig")))
            prepare_namespace(kube, dsn)
            model = f"replay/{scenario}"
            config = OperatorConfig.model_validate({"defaults": {"model": model}, "models": [
                {"name": model, "provider": "replay", "model": scenario, "endpoint": f"{replay.url}/v1"}]})
            snapshot = ContextSnapshot(system_prompt="bench", model=model, approval_mode="AlwaysTrust",
                                       max_execution_steps=args.steps + 10,
                                       source=SnapshotSource(agent_name="helper")).dump()
            _create(kube, "agentsessions", {"kind": "AgentSession", "metadata": {"name": "s0"},
                                            "spec": {"agentRef": {"name": "helper"}, "contextSnapshot": snapshot}})
            _create(kube, "agentinputs", {"kind": "AgentInput", "metadata": {
                "name": "s0-i1", "labels": {"sessionops.dev/session": "s0"}}, "spec": {
                "sessionRef": {"name": "s0"}, "messages": [{"content": "Go."}], "delivery": "FollowUp",
                "sequence": 1, "contextSnapshot": snapshot, "submittedBy": {"username": "bench"}}})
            run = _create(kube, "agentruns", {"kind": "AgentRun", "metadata": {"name": "s0-t1"}, "spec": {
                "sessionRef": {"name": "s0"}, "inputs": ["s0-i1"], "contextSnapshot": snapshot}})
            kube.request("PATCH", f"{CUSTOM}/namespaces/{NS}/agentruns/s0-t1/status",
                         content_type="application/merge-patch+json", body={"status": {"phase": "Pending", "segments": [
                             {"name": "s0-t1-1", "kind": "Start", "job": "s0-t1-1"}]}})
            job = job_body(run, 1, "Start", config=config, worker=None)
            seen: dict[str, float] = {}
            events: list[float] = []
            stop = threading.Event()
            watcher = threading.Thread(target=_watch, args=(tmp / "kubeconfig", "s0-t1", seen, events, stop),
                                       daemon=True)
            watcher.start()
            time.sleep(1.5)  # the watch is established before the worker starts
            work = tmp / "work"
            work.mkdir()
            env = _env(kube, job, work, tmp / "kubeconfig")
            if "PYTHONPATH" in os.environ:  # the worker of this checkout, not the installed one
                env["PYTHONPATH"] = os.environ["PYTHONPATH"]
            log = apiwrites.record(cluster)
            start = len(log)
            t0 = time.time()
            tools = start_tools(job, work, Path(env["SESSIONOPS_TOOLS_SOCKET"]))
            proc = subprocess.run([sys.executable, "-m", "sessionops.worker"], env=env, cwd=tmp,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
            turn_seconds = time.time() - t0
            tools.terminate()
            tools.wait()
            written = apiwrites.writes(log, start)
            time.sleep(1.5)
            stop.set()
            status = kube.get("agentruns", NS, "s0-t1")["status"]
            phase = status["phase"]
            if phase != "Succeeded":
                print(json.dumps(status.get("conditions")), file=sys.stderr)
            chunks = kube.list_transcripts(NS, "s0-t1")
            steps = [s for c in sorted(chunks, key=lambda c: c["spec"]["index"]) for s in c["spec"]["steps"]]
            kube.close()
            if proc.returncode != 0:
                print(proc.stderr.decode()[-2000:], file=sys.stderr)
    finally:
        drop_database(database)
    delays = sorted(seen[s["id"]] - datetime.datetime.fromisoformat(s["at"]).timestamp() for s in steps
                    if s["id"] in seen)
    p = (lambda q: round(delays[min(len(delays) - 1, int(q * len(delays)))], 3)) if delays else (lambda q: None)
    report = {
        "bench": "transcript: API writes per step, worker step -> watcher delay",
        "phase": phase, "steps": len(steps), "writes": len(events),
        "writes_per_step": round(len(events) / max(1, len(steps)), 3),
        "writes_per_second": round(len(events) / turn_seconds, 2), "turn_seconds": round(turn_seconds, 2),
        "api_writes_per_step": {"transcript": round(written["transcript_writes"] / max(1, len(steps)), 3),
                                "other": round(written["other_writes"] / max(1, len(steps)), 3),
                                "other_by_kind": written["other_writes_by_kind"]},
        "min_transcript_write_gap_seconds": written["min_transcript_write_gap_seconds"],
        "coalesced_250ms": apiwrites.coalesced(written),
        "delay_seconds": {"p50": p(0.5), "p99": p(0.99), "max": round(delays[-1], 3) if delays else None,
                          "mean": round(statistics.mean(delays), 3) if delays else None},
        "target": {"p99_seconds": TARGET_P99_SECONDS, "met": bool(delays) and p(0.99) <= TARGET_P99_SECONDS},
        "machine": {"cpus": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2)},
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    with pgserver.database_url():
        sys.exit(main())

"""Worker start-up: process start -> first model request, and peak RSS (prints JSON).

Each run starts ``python -m sessionops.worker`` for a fresh one-message turn (its own
session), exactly as a pod would (the env comes from ``jobs.job_body`` resolved like the
kubelet does), against the test cluster, PostgreSQL and the replay model over HTTP. The
latency is measured from just before the process is spawned to the replay server's
record of the first chat-completions request; peak RSS is the child's ``ru_maxrss``, and its
CPU time (user + system, the whole segment) is reported too.
Also reported: the import time of the worker's modules alone (a floor for the latency) with the
packages that take most of it; when the tools process (the pod's sidecar, started just before the
worker) answers its first ping; the worker's API writes per transcript step, the transcript's apart from the others
(status, Lease, inputs), with the shortest gap between two transcript writes of a run
(coalescing: at most one write per 250 ms per run).
Targets: <= 1.5 s to the first request, <= 250 MB peak RSS.

    python bench/worker.py [--runs 5]      # DATABASE_URL selects the PostgreSQL server
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import apiwrites  # noqa: E402
from bench.sidecar import start_tools  # noqa: E402
from sessionops.api.config import OperatorConfig  # noqa: E402
from sessionops.api.snapshot import ContextSnapshot, SnapshotSource  # noqa: E402
from sessionops.execution.jobs import job_body  # noqa: E402
from sessionops.platform.kube import load_api_client  # noqa: E402
from sessionops.platform.worker_kube import CUSTOM, WorkerKube  # noqa: E402
from sessionops.replay import running_replay_server  # noqa: E402
from sessionops.toolbox.client import ToolboxClient  # noqa: E402
from testcluster.podrunner import volumes  # noqa: E402
from testcluster.podrunner.envresolve import resolve_env  # noqa: E402
from testcluster.podrunner.threaded import threaded_cluster  # noqa: E402
from tests import pgserver  # noqa: E402
from tests.agent.pg import create_database, drop_database, provision_namespace, server_url  # noqa: E402

NS = "bench"
TARGET_SECONDS = 1.5
TARGET_MB = 250.0


def _create(kube: WorkerKube, plural: str, body: dict[str, Any]) -> dict[str, Any]:
    body = {"apiVersion": "sessionops.dev/v1alpha1", **body}
    body["metadata"]["namespace"] = NS
    return kube.request("POST", f"{CUSTOM}/namespaces/{NS}/{plural}", body=body)


def grant_submitter(kube: WorkerKube) -> None:
    """The turns' submitter ("bench") may use the Agent and its tools, as the worker checks
    (SubjectAccessReview) before any model call; the test cluster enforces RBAC."""
    rules = [{"apiGroups": ["sessionops.dev"], "resources": ["agents"], "verbs": ["get"]},
             {"apiGroups": ["sessionops.dev"], "resources": ["tools", "skills", "mcpservers"], "verbs": ["use"]}]
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    kube.request("POST", f"{rbac}/namespaces/{NS}/roles", body={"metadata": {"name": "bench"}, "rules": rules})
    kube.request("POST", f"{rbac}/namespaces/{NS}/rolebindings", body={
        "metadata": {"name": "bench"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                   "name": "bench"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bench"}]})


def _turn(kube: WorkerKube, config: OperatorConfig, i: int) -> dict[str, Any]:
    snapshot = ContextSnapshot(system_prompt="bench", model="replay/hello", approval_mode="Default",
                               source=SnapshotSource(agent_name="helper")).dump()
    _create(kube, "agentsessions", {"kind": "AgentSession", "metadata": {"name": f"s{i}"},
                                    "spec": {"agentRef": {"name": "helper"}, "contextSnapshot": snapshot}})
    _create(kube, "agentinputs", {"kind": "AgentInput", "metadata": {
        "name": f"s{i}-i1", "labels": {"sessionops.dev/session": f"s{i}"}}, "spec": {
        "sessionRef": {"name": f"s{i}"}, "messages": [{"content": "Hello?"}], "delivery": "FollowUp",
        "sequence": 1, "contextSnapshot": snapshot, "submittedBy": {"username": "bench"}}})
    run = _create(kube, "agentruns", {"kind": "AgentRun", "metadata": {"name": f"s{i}-t1"}, "spec": {
        "sessionRef": {"name": f"s{i}"}, "inputs": [f"s{i}-i1"], "contextSnapshot": snapshot}})
    kube.request("PATCH", f"{CUSTOM}/namespaces/{NS}/agentruns/s{i}-t1/status", content_type=
                 "application/merge-patch+json", body={"status": {"phase": "Pending", "segments": [
                     {"name": f"s{i}-t1-1", "kind": "Start", "job": f"s{i}-t1-1"}]}})
    return job_body(run, 1, "Start", config=config, worker=None)


def _database_secret(kube: WorkerKube, dsn: str) -> None:
    """As the operator before the namespace's first Job: its schema, role and the Secret workers mount."""
    worker_dsn, _ = provision_namespace(dsn, NS)
    kube.request("POST", f"/api/v1/namespaces/{NS}/secrets", body={
        "metadata": {"name": "sessionops-worker-database"}, "stringData": {"dsn": worker_dsn}})


def prepare_namespace(kube: WorkerKube, dsn: str) -> None:
    """What a turn needs before its worker starts: the CRDs, the namespace, its database credential,
    an Agent and the submitter's RBAC."""
    for crd in sorted((ROOT / "crds").glob("*.yaml")):
        kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                     body=yaml.safe_load(crd.read_text()))
    kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
    _database_secret(kube, dsn)
    _create(kube, "agents", {"kind": "Agent", "metadata": {"name": "helper"}, "spec": {"systemPrompt": "b"}})
    grant_submitter(kube)


def _env(kube: WorkerKube, job: dict[str, Any], workdir: Path, kubeconfig: Path) -> dict[str, str]:
    container = job["spec"]["template"]["spec"]["containers"][0]
    pod = {"metadata": {"name": f"{job['metadata']['name']}-bench", "namespace": NS},
           "spec": job["spec"]["template"]["spec"]}
    lookup = lambda ns, n: kube.read(f"/api/v1/namespaces/{ns}/secrets/{n}")  # noqa: E731
    env = resolve_env(container, pod, secrets=lookup, configmaps=lambda ns, n: None)
    # The credential files, as the pod runner mounts them (the paths in env point into them).
    mounts = volumes.materialize(pod, container, lookup, workdir.parent / f"{workdir.name}-secrets")
    for key, value in env.items():
        for mount, host in mounts.items():
            if value.startswith(mount + "/"):
                env[key] = str(host / value[len(mount) + 1:])
    env["SESSIONOPS_TOOLS_SOCKET"] = str(workdir.parent / f"{workdir.name}.sock")
    base = {k: os.environ[k] for k in ("PATH", "LANG", "VIRTUAL_ENV", "PYTHONPATH") if k in os.environ}
    return {**base, **env, "KUBECONFIG": str(kubeconfig), "HOSTNAME": pod["metadata"]["name"]}


IMPORT = "from sessionops.worker.startup import load_segment; load_segment()"
"""The worker's imports, as ``python -m sessionops.worker`` makes them."""


def _imports() -> dict[str, Any]:
    """The worker's imports alone (a floor for the latency), and the packages that take most of it:
    ``-X importtime`` self times summed by top-level package (a second run, slower for the tracing)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", IMPORT], check=True)
    seconds = time.perf_counter() - start
    traced = subprocess.run([sys.executable, "-X", "importtime", "-c", IMPORT],
                            capture_output=True, text=True, check=True).stderr
    by_package: collections.Counter[str] = collections.Counter()
    for line in traced.splitlines():
        fields = line.removeprefix("import time:").split("|")
        if line.startswith("import time:") and fields[0].strip().isdigit():
            by_package[fields[2].strip().split(".")[0]] += int(fields[0])
    return {"import_only_seconds": round(seconds, 3),
            "import_self_seconds_by_package": {name: round(us / 1e6, 3) for name, us in by_package.most_common(10)}}


def _per_step(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The worker's writes per transcript step over all runs, transcripts apart from the rest."""
    steps = max(1, sum(r["transcript_steps"] for r in runs))
    gaps = [r["min_transcript_write_gap_seconds"] for r in runs if r["min_transcript_write_gap_seconds"] is not None]
    least = {"min_transcript_write_gap_seconds": min(gaps) if gaps else None}
    return {"steps": steps, "transcript": round(sum(r["transcript_writes"] for r in runs) / steps, 3),
            "other": round(sum(r["other_writes"] for r in runs) / steps, 3), **least,
            "coalesced_250ms": apiwrites.coalesced(least)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-worker-"))
    database = create_database()
    dsn = server_url(database)
    runs: list[dict[str, Any]] = []
    try:
        with running_replay_server(dirs=[ROOT / "examples" / "replay"]) as replay, \
                threaded_cluster(tmp / "kubeconfig", bookmark_interval=0.2) as cluster:
            kube = WorkerKube(load_api_client(str(tmp / "kubeconfig")))
            prepare_namespace(kube, dsn)
            config = OperatorConfig.model_validate({"defaults": {"model": "replay/hello"}, "models": [
                {"name": "replay/hello", "provider": "replay", "model": "hello", "endpoint": f"{replay.url}/v1"}]})
            log = apiwrites.record(cluster)
            for i in range(args.runs):
                job = _turn(kube, config, i)
                env = _env(kube, job, tmp / f"work-{i}", tmp / "kubeconfig")
                (tmp / f"work-{i}").mkdir()
                replay.records.clear()
                start = len(log)
                started = datetime.datetime.now(datetime.UTC)
                t0 = time.perf_counter()
                # As a kubelet starts the pod: the tools sidecar, then the worker at once.
                tools = start_tools(job, tmp / f"work-{i}", Path(env["SESSIONOPS_TOOLS_SOCKET"]))
                proc = subprocess.Popen([sys.executable, "-m", "sessionops.worker"], env=env, cwd=tmp,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                ToolboxClient(env["SESSIONOPS_TOOLS_SOCKET"]).wait_ready(30, interval=0.005)
                tools_ready = time.perf_counter() - t0
                _, status, usage = os.wait4(proc.pid, 0)
                total = time.perf_counter() - t0
                tools.terminate()
                tools.wait()
                proc.returncode = os.waitstatus_to_exitcode(status)
                first = datetime.datetime.fromisoformat(replay.records[0]["timestamp"]) if replay.records else None
                status = kube.get("agentruns", NS, f"s{i}-t1")["status"]
                phase = status["phase"]
                written = apiwrites.writes(log, start)
                steps = sum(len(c["spec"].get("steps") or []) for c in kube.list_transcripts(NS, f"s{i}-t1"))
                if phase != "Succeeded":
                    print(json.dumps(status.get("conditions")), file=sys.stderr)
                runs.append({"run": i, "exit_code": proc.returncode, "phase": phase,
                             "first_request_seconds": round((first - started).total_seconds(), 3) if first else None,
                             "process_seconds": round(total, 3), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
                             "process_cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
                             "tools_ready_seconds": round(tools_ready, 3),
                             "transcript_steps": steps, **written})
                if proc.returncode != 0 and proc.stderr is not None:
                    print(proc.stderr.read().decode()[-2000:], file=sys.stderr)
            kube.close()
    finally:
        drop_database(database)
    latencies = [r["first_request_seconds"] for r in runs if r["first_request_seconds"] is not None]
    rss = [r["peak_rss_mb"] for r in runs]
    report = {
        "bench": "worker start -> first model request",
        "runs": runs,
        "first_request_seconds": {"min": min(latencies), "median": statistics.median(latencies),
                                  "max": max(latencies)} if latencies else None,
        "peak_rss_mb": {"min": min(rss), "median": statistics.median(rss), "max": max(rss)},
        # CPU of the whole segment (start to exit): unlike the latency, barely moved by other load.
        "process_cpu_seconds": {"median": statistics.median(r["process_cpu_seconds"] for r in runs)},
        "tools_ready_seconds": {"median": statistics.median(r["tools_ready_seconds"] for r in runs)},
        **_imports(),
        "api_writes_per_step": _per_step(runs),
        "targets": {"first_request_seconds": TARGET_SECONDS, "peak_rss_mb": TARGET_MB},
        "met": {"first_request_seconds": bool(latencies) and statistics.median(latencies) <= TARGET_SECONDS,
                "peak_rss_mb": max(rss) <= TARGET_MB},
        "machine": {"cpus": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2), "python": sys.version.split()[0]},
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    with pgserver.database_url():
        sys.exit(main())

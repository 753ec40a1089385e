"""The operator at scale: RSS and idle CPU at N sessions, a restart over them, and the cost
of one accepted follow-up.

    python bench/scale.py [--sizes 1000,5000,10000] [--idle 30] [--inputs 0] [--follow-ups 100]
                          [--seed-inputs 0] [--tracemalloc [FRAMES]]

Prints JSON. Runs the local stack without the pod runner (runs stay Pending: a follow-up's
path ends at its Job). The operator's CPU and RSS come from /proc for its process; requests
are counted at the test cluster by the operator's identity. The test cluster runs inside
this process: its CPU (``cluster_cpu_*``) is reported apart, so the operator's figures
describe the product, not the emulator. See docs/scale.md for running against a real
cluster. Targets (issue 17): idle CPU <= 5 % of a core and RSS <= 300 MB at 10,000 sessions;
a restart over idle sessions writes nothing and sees every session in <= 30 s.

``--tracemalloc``: the operator traces its allocations (``sessionops.platform.memprofile``,
FRAMES frames each, 1 by default) and, once the largest size has settled and idled, reports its
largest live allocations by line (and by stack with FRAMES > 1) under ``tracemalloc``. Tracing
inflates the operator's RSS and CPU up to then (the ``sizes`` figures); the restarted operator
runs untraced. With ``--seed-inputs`` the operator restarted over the seeded objects is the
one traced, after its idle period.

``--seed-inputs M``: after the other stages, about M inputs in all: every session past the
follow-ups gets a copy of session s0's objects (its follow-up, run and Job, and enough queued
inputs), written straight into the test cluster's store (``seed``); then a restart over them
and an idle period, reported under ``seeded``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sessionops.api.names import SESSION_LABEL  # noqa: E402
from tests import pgserver  # noqa: E402
from tests.e2e import manifests as m  # noqa: E402
from tests.stack import Stack, running_stack  # noqa: E402

NS = "team-a"
API = f"/apis/sessionops.dev/v1alpha1/namespaces/{NS}"
WRITES = {"POST", "PUT", "PATCH", "DELETE"}
TICKS = os.sysconf("SC_CLK_TCK")
SETTLE_SECONDS = 3.0
"""After the last follow-up's Job exists: time for the status writes that follow it."""


def product_defaults(stack: Stack) -> None:
    """The operator as the chart runs it: the test stack shortens the recovery scan (1 s instead
    of the default 5 s) so that tests see recoveries quickly, and every scan visits each unfinished
    run (here every follow-up's run stays Pending), which a benchmark would count as per-input cost."""
    stack.operator_env.pop("SESSIONOPS_SCAN_SECONDS", None)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (/proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mb(pid: int) -> dict[str, float]:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {"rss_mb": round(int(status["VmRSS"].split()[0]) / 1024, 1),
            "peak_rss_mb": round(int(status["VmHWM"].split()[0]) / 1024, 1)}


def verb(req: Any) -> str:
    """``GET agentsessions`` style: method and resource (list/get told apart by a name)."""
    parts = [p for p in req.path.split("/") if p]
    if "namespaces" in parts and len(parts) > parts.index("namespaces") + 2:
        rest = parts[parts.index("namespaces") + 2:]
    else:
        rest = parts[3:] if parts and parts[0] == "apis" else parts[2:]
    resource = rest[0] if rest else "?"
    sub = f"/{rest[2]}" if len(rest) > 2 else ""
    method = req.method
    if method == "GET":
        method = "WATCH" if "watch" in req.query else ("GET" if len(rest) > 1 else "LIST")
    return f"{method} {resource}{sub}"


class Meter:
    """CPU of the operator and of this process (the test cluster), and the operator's requests."""

    def __init__(self, stack: Stack, cluster: Any) -> None:
        self.stack, self.cluster = stack, cluster

    def start(self) -> None:
        assert self.stack.operator is not None
        self.pid = self.stack.operator.pid
        self.wall, self.op_cpu, self.own_cpu = time.monotonic(), cpu_seconds(self.pid), time.process_time()
        self.since = len(self.cluster.served)

    def stop(self) -> dict[str, Any]:
        wall = time.monotonic() - self.wall
        mine = [r for r in self.cluster.served[self.since:] if r.user == self.stack.operator_user]
        by_verb = collections.Counter(verb(r) for r in mine)
        return {"seconds": round(wall, 2), "operator_cpu_s": round(cpu_seconds(self.pid) - self.op_cpu, 3),
                "cluster_cpu_s": round(time.process_time() - self.own_cpu, 3),
                "operator_requests": len(mine), "operator_writes": sum(1 for r in mine if r.method in WRITES),
                "operator_errors": sum(1 for r in mine if r.status >= 400),
                "requests_by_verb": dict(by_verb.most_common())}


async def post_all(cluster: Any, plural: str, bodies: list[dict[str, Any]], parallel: int = 16) -> None:
    gate = asyncio.Semaphore(parallel)
    connector = aiohttp.TCPConnector(ssl=cluster.client_ssl(), limit=parallel)
    async with aiohttp.ClientSession(headers=cluster.admin_headers, connector=connector) as http:
        async def one(body: dict[str, Any]) -> None:
            async with gate:
                for attempt in range(5):  # a webhook timeout under load: the client's retry
                    async with http.post(cluster.api_url + API + "/" + plural, json=body) as r:
                        if r.status in (201, 409):
                            return
                        text = await r.text()
                    await asyncio.sleep(1 + attempt)
                raise RuntimeError(f"creating {body['metadata']['name']}: {text[:300]}")
        await asyncio.gather(*(one(b) for b in bodies))


def settled_sessions(cluster: Any) -> int:
    items = cluster.store.list(("sessionops.dev", "agentsessions"), NS)  # read-only, no copies
    return sum(1 for s in items if (s.get("status") or {}).get("phase"))


async def wait_quiet(stack: Stack, cluster: Any, quiet: float = 2.0, timeout: float = 900) -> float:
    """Seconds until the operator made no request for ``quiet`` seconds (watches excluded)."""
    start = time.monotonic()
    last_count, last_change = -1, time.monotonic()
    while time.monotonic() - start < timeout:
        count = sum(1 for r in cluster.served if r.user == stack.operator_user and "watch" not in r.query)
        if count != last_count:
            last_count, last_change = count, time.monotonic()
        elif time.monotonic() - last_change >= quiet:
            return round(last_change - start, 2)
        await asyncio.sleep(0.2)
    raise TimeoutError("the operator never went quiet")


async def metric(stack: Stack, name: str) -> float:
    async with aiohttp.ClientSession() as http, \
            http.get(f"http://127.0.0.1:{stack.metrics_port}/metrics") as r:
        for line in (await r.text()).splitlines():
            if line.startswith(name):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


async def tracemalloc_report(stack: Stack, path: Path, timeout: float = 300) -> dict[str, Any]:
    """Ask the operator for its tracemalloc report (SIGUSR2) and read it once written."""
    assert stack.operator is not None
    path.unlink(missing_ok=True)
    stack.operator.send_signal(signal.SIGUSR2)
    started = time.monotonic()
    while not path.exists():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"no tracemalloc report at {path}:\n{stack.operator_log()}")
        await asyncio.sleep(0.2)
    return {"snapshot_s": round(time.monotonic() - started, 2), **json.loads(path.read_text())}


async def restart(stack: Stack, cluster: Any, sessions: int) -> dict[str, Any]:
    await stack.stop_operator()
    meter = Meter(stack, cluster)
    started = time.monotonic()
    await stack.start_operator()
    meter.start()
    while await metric(stack, 'sessionops_watched_objects{kind="AgentSession"}') < sessions:
        await asyncio.sleep(0.2)
    all_cached = time.monotonic() - started
    # kopf's listing of the inputs (their events feed the cache) goes on after the sessions'.
    inputs = len(cluster.store.list(SEEDED[0], NS))
    while await metric(stack, 'sessionops_watched_objects{kind="AgentInput"}') < inputs:
        await asyncio.sleep(0.2)
    inputs_cached = time.monotonic() - started
    quiet = await wait_quiet(stack, cluster)
    result = meter.stop()
    result.update({"every_session_cached_s": round(all_cached, 2), "every_input_cached_s": round(inputs_cached, 2),
                   "every_session_seen_s": round(time.monotonic() - started - 2.0, 2), "quiet_after_s": quiet})
    return result


def sessions_with_jobs(cluster: Any, sessions: set[str], before: set[str]) -> set[str]:
    """Which of ``sessions`` have a Job that was not among ``before`` (read-only, no copies)."""
    jobs = cluster.store.list(("batch", "jobs"), NS)
    return {s for j in jobs if j["metadata"]["name"] not in before
            and (s := (j["metadata"].get("labels") or {}).get(SESSION_LABEL)) in sessions}


async def follow_ups(stack: Stack, cluster: Any, count: int, settle: float = SETTLE_SECONDS,
                     timeout: float = 900) -> dict[str, Any]:
    """One follow-up to each of ``count`` idle sessions; CPU and requests over a fixed window:
    from posting them until every one's Job exists, plus ``settle`` seconds for the writes that
    follow a Job (run and session status). Not "until quiet": the periodic scan over Pending
    runs (none of them ever starts here) keeps making requests."""
    idle = [f"s{i}" for i in range(count)]
    before = {j["metadata"]["name"] for j in cluster.store.list(("batch", "jobs"), NS)}
    meter = Meter(stack, cluster)
    meter.start()
    started = time.monotonic()
    await post_all(cluster, "agentinputs", [m.message(f"{s}-f", s, "go", delivery="FollowUp") for s in idle])
    while len(sessions_with_jobs(cluster, set(idle), before)) < count:
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"only {len(sessions_with_jobs(cluster, set(idle), before))} of {count} Jobs")
        await asyncio.sleep(0.1)
    every_job_s = time.monotonic() - started
    await asyncio.sleep(settle)
    result = meter.stop()
    result.update(every_job_s=round(every_job_s, 2), settle_s=settle)
    writes = collections.Counter(k for k, v in result["requests_by_verb"].items() for _ in range(v)
                                 if k.split()[0] in WRITES)
    events = sum(v for k, v in writes.items() if k.endswith(" events"))
    return {**result, "inputs": count,
            "operator_cpu_ms_per_input": round(result["operator_cpu_s"] * 1000 / count, 1),
            "requests_per_input": round(result["operator_requests"] / count, 2),
            "object_writes_per_input": round((sum(writes.values()) - events) / count, 2),
            "events_per_input": round(events / count, 2)}


SEEDED = (("sessionops.dev", "agentinputs"), ("sessionops.dev", "agentruns"), ("batch", "jobs"))
SESSIONS = ("sessionops.dev", "agentsessions")


async def seed(stack: Stack, cluster: Any, template: str, targets: list[str], queued: int) -> dict[str, Any]:
    """Gives every target session what ``template`` holds after ``queued`` more follow-ups: its
    consumed follow-up, its Pending run and Job, the queued inputs and the session status that
    names them. The template's objects pass the real admission; the copies go straight into the
    test cluster's store with the operator stopped (posting 50,000 inputs through the emulator's
    admission would take hours), renamed and with fresh uids, so the restarted operator finds
    consistent sessions with nothing to do."""
    await post_all(cluster, "agentinputs", [m.message(f"{template}-q{j}", template, "later", delivery="FollowUp")
                                            for j in range(queued)])
    await asyncio.sleep(SETTLE_SECONDS)  # a queued input is not written to; its session's status may be
    await stack.stop_operator()
    originals = [(gp, json.dumps(obj)) for gp in SEEDED for obj in cluster.store.list(gp, NS)
                 if (obj["metadata"].get("labels") or {}).get(SESSION_LABEL) == template]
    session = cluster.store.get(SESSIONS, NS, template)
    session_status = json.dumps(session.get("status") or {})
    uids = [json.loads(text)["metadata"]["uid"] for _, text in originals]
    for target in targets:
        old = cluster.store.get(SESSIONS, NS, target)
        names = {session["metadata"]["uid"]: old["metadata"]["uid"], **{u: str(uuid.uuid4()) for u in uids}}

        def renamed(text: str, target: str = target, names: dict[str, str] = names) -> Any:
            text = text.replace(f'"{template}"', f'"{target}"').replace(f'"{template}-', f'"{target}-')
            for before, after in names.items():
                text = text.replace(before, after)
            return json.loads(text)
        for gp, text in originals:
            cluster.store.put(gp, renamed(text), None)
        cluster.store.put(SESSIONS, {**old, "metadata": dict(old["metadata"]), "status": renamed(session_status)}, old)
    return {"template": template, "sessions": len(targets) + 1, "objects_per_session": collections.Counter(
        gp[1] for gp, _ in originals), **{gp[1]: len(cluster.store.list(gp, NS)) for gp in SEEDED}}


async def main(sizes: list[int], idle: float, inputs: int, follow: int, trace_frames: int = 0,
               seed_inputs: int = 0) -> dict[str, Any]:
    report: dict[str, Any] = {"benchmark": "scale", "sizes": {}, "targets": {
        "idle_cpu_core_fraction_at_10000": 0.05, "rss_mb_at_10000": 300, "restart_writes": 0,
        "restart_every_session_seen_s": 30, "operator_cpu_ms_per_input": 20, "requests_per_input": 15,
        "object_writes_per_input": 6, "seeded_rss_mb_at_10000_sessions_50000_inputs": 300}}
    with tempfile.TemporaryDirectory() as tmp:
        async with running_stack(Path(tmp), pod_runner=False, operator=False) as (stack, cluster):
            trace_file = Path(tmp) / "tracemalloc.json"
            tracing = {"SESSIONOPS_TRACEMALLOC": str(trace_frames), "SESSIONOPS_TRACEMALLOC_FILE": str(trace_file)}
            product_defaults(stack)
            if trace_frames and not seed_inputs:
                stack.operator_env.update(tracing)
            await stack.start_operator()
            await stack.apply(m.agent("bench"))
            created = 0
            for size in sizes:
                meter = Meter(stack, cluster)
                meter.start()
                await post_all(cluster, "agentsessions", [m.session(f"s{i}", "bench") for i in range(created, size)])
                while settled_sessions(cluster) < size:
                    await asyncio.sleep(0.5)
                await wait_quiet(stack, cluster)
                creation = meter.stop()
                created = size
                meter = Meter(stack, cluster)
                meter.start()
                await asyncio.sleep(idle)
                quiet = meter.stop()
                report["sizes"][size] = {
                    **rss_mb(stack.operator.pid),  # type: ignore[union-attr]
                    "idle_cpu_core_fraction": round(quiet["operator_cpu_s"] / quiet["seconds"], 4),
                    "idle_cluster_cpu_core_fraction": round(quiet["cluster_cpu_s"] / quiet["seconds"], 4),
                    "idle_requests": quiet["requests_by_verb"],
                    "creation": {k: creation[k] for k in ("seconds", "operator_cpu_s", "cluster_cpu_s",
                                                          "operator_requests", "operator_writes", "operator_errors",
                                                          "requests_by_verb")},
                }
                print(json.dumps({size: report["sizes"][size]}), file=sys.stderr, flush=True)
            largest = sizes[-1]
            if trace_frames and not seed_inputs:
                report["tracemalloc"] = {"sessions": largest, **rss_mb(stack.operator.pid),  # type: ignore[union-attr]
                                         **await tracemalloc_report(stack, trace_file)}
                # The restarted operator runs untraced: restart and per-input figures stay comparable.
                for key in ("SESSIONOPS_TRACEMALLOC", "SESSIONOPS_TRACEMALLOC_FILE"):
                    stack.operator_env.pop(key)
            report["restart"] = {"sessions": largest, **await restart(stack, cluster, largest)}
            report["restart"].update(rss_mb(stack.operator.pid))  # type: ignore[union-attr]
            if follow:
                report["per_input"] = await follow_ups(stack, cluster, min(follow, largest))
            if inputs:
                # Inputs that stay in the store (one turn per session is claimed, the rest wait).
                bodies = [m.message(f"s{i % largest}-q{i}", f"s{i % largest}", "later", delivery="FollowUp")
                          for i in range(inputs)]
                started = time.monotonic()
                await post_all(cluster, "agentinputs", bodies)
                # A fixed settle, not a lull: the recovery scan keeps visiting the Pending runs
                # (no pod runner here), so the operator is never quiet for long.
                await asyncio.sleep(SETTLE_SECONDS)
                posting_s = round(time.monotonic() - started, 2)
                meter = Meter(stack, cluster)
                meter.start()
                await asyncio.sleep(idle)
                quiet = meter.stop()
                report["with_inputs"] = {"sessions": largest, "inputs": inputs, "posting_s": posting_s,
                                         **rss_mb(stack.operator.pid),  # type: ignore[union-attr]
                                         "idle_cpu_core_fraction": round(quiet["operator_cpu_s"] / quiet["seconds"], 4)}
            if seed_inputs:
                # Sessions past the follow-ups get the template's objects; the follow-ups' own stay.
                queued = max(0, -(-seed_inputs // largest) - 1)
                seeded = await seed(stack, cluster, "s0", [f"s{i}" for i in range(max(follow, 1), largest)], queued)
                if trace_frames:
                    stack.operator_env.update(tracing)
                restarted = await restart(stack, cluster, largest)
                meter = Meter(stack, cluster)
                meter.start()
                await asyncio.sleep(idle)
                quiet = meter.stop()
                report["seeded"] = {**seeded, "restart": restarted, **rss_mb(stack.operator.pid),  # type: ignore[union-attr]
                                    "idle_cpu_core_fraction": round(quiet["operator_cpu_s"] / quiet["seconds"], 4),
                                    "idle_requests": quiet["requests_by_verb"]}
                if trace_frames:
                    report["seeded"]["tracemalloc"] = await tracemalloc_report(stack, trace_file)
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,10000", help="session counts, ascending (comma-separated)")
    parser.add_argument("--idle", type=float, default=30, help="seconds of idle measurement at each size")
    parser.add_argument("--inputs", type=int, default=0, help="then create this many inputs and measure RSS")
    parser.add_argument("--follow-ups", type=int, default=100, help="follow-ups for CPU and requests per input")
    parser.add_argument("--seed-inputs", type=int, default=0, metavar="M",
                        help="then give the sessions about M inputs (with their runs and Jobs) and restart")
    parser.add_argument("--tracemalloc", type=int, nargs="?", const=1, default=0, metavar="FRAMES",
                        help="trace the operator's allocations and report the largest at the largest size")
    args = parser.parse_args()
    with pgserver.database_url():
        print(json.dumps(asyncio.run(main([int(s) for s in args.sizes.split(",")], args.idle, args.inputs,
                                          args.follow_ups, args.tracemalloc, args.seed_inputs)), indent=2))

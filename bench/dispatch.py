"""Input created -> Job created latency with N active sessions, and API writes per accepted
follow-up on the happy path (counting kopf's own bookkeeping writes).

    python bench/dispatch.py [--sessions 100] [--workers]

Prints JSON. Runs the local stack without the pod runner, so every run stays Pending and
each session keeps one active turn. Targets (issue): p99 <= 300 ms with 100 active
sessions; <= 8 API writes per accepted follow-up; the operator's own cost per accepted
follow-up (issue 17): <= 20 ms CPU, <= 15 requests and <= 6 object writes (Events apart). Writes are reported with the
transcript's apart: with ``--workers`` the pod runner runs every turn to its end (use
fewer sessions: each is a worker process), so the workers' transcript writes per step
and the shortest gap between two transcript writes of a run (<= 1 per 250 ms) show too.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import apiwrites  # noqa: E402
from bench.scale import WRITES, cpu_seconds, product_defaults, verb  # noqa: E402
from tests import pgserver  # noqa: E402
from tests.e2e import manifests as m  # noqa: E402
from tests.stack import Stack, running_stack  # noqa: E402

API = "/apis/sessionops.dev/v1alpha1/namespaces/team-a"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))] * 1000, 1)


async def main(sessions: int, workers: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        async with running_stack(Path(tmp), pod_runner=workers, operator=False) as (stack, cluster), \
                aiohttp.ClientSession(headers=cluster.admin_headers,
                                      connector=aiohttp.TCPConnector(ssl=cluster.client_ssl())) as http:
            product_defaults(stack)
            await stack.start_operator()
            await stack.apply(m.agent("bench"))
            for i in range(sessions):
                async with http.post(cluster.api_url + API + "/agentsessions", json=m.session(f"s{i}", "bench")) as r:
                    assert r.status == 201, await r.text()
            await asyncio.sleep(2)  # let the operator settle the new sessions' status
            jobs_seen: dict[str, float] = {}

            async def watch_jobs() -> None:
                url = cluster.api_url + "/apis/batch/v1/namespaces/team-a/jobs?watch=true"
                async with http.get(url, timeout=aiohttp.ClientTimeout(total=None)) as r:
                    async for line in r.content:
                        event = json.loads(line)
                        if event.get("type") == "ADDED":
                            jobs_seen.setdefault(event["object"]["metadata"]["name"], time.perf_counter())

            watcher = asyncio.create_task(watch_jobs())
            await asyncio.sleep(0.5)
            log = apiwrites.record(cluster)
            start_requests = len(log)
            # The operator's own cost (the test cluster runs in this process: reported apart).
            assert stack.operator is not None
            served_from, operator_cpu, cluster_cpu = len(cluster.served), cpu_seconds(stack.operator.pid), \
                time.process_time()
            sent: dict[str, float] = {}

            async def send(i: int) -> None:
                sent[f"s{i}-t1-1"] = time.perf_counter()
                async with http.post(cluster.api_url + API + "/agentinputs",
                                     json=m.message(f"s{i}-1", f"s{i}", "go", delivery="FollowUp")) as r:
                    assert r.status == 201, await r.text()

            for i in range(sessions):  # one follow-up per session, spread over ~2 s
                asyncio.create_task(send(i))
                await asyncio.sleep(2 / sessions)
            deadline = time.monotonic() + 120
            while len([j for j in sent if j in jobs_seen]) < sessions and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            if workers:  # every turn to its end: the workers' writes are part of the count
                while time.monotonic() < deadline and len(await finished_runs(stack)) < sessions:
                    await asyncio.sleep(0.5)
            await asyncio.sleep(3)  # trailing status writes of the happy path
            operator_cpu = cpu_seconds(stack.operator.pid) - operator_cpu
            cluster_cpu = time.process_time() - cluster_cpu
            mine = collections.Counter(verb(r) for r in cluster.served[served_from:]
                                       if r.user == stack.operator_user and "watch" not in r.query)
            watcher.cancel()
            latencies = [jobs_seen[j] - t for j, t in sent.items() if j in jobs_seen]
            written = apiwrites.writes(log, start_requests)
            steps = sum(len(c["spec"].get("steps") or [])
                        for c in cluster.list_objects("sessionops.dev", "v1alpha1", "agenttranscripts"))
            return {
                "benchmark": "dispatch", "active_sessions": sessions, "jobs_created": len(latencies),
                "workers_ran": workers, "turns_finished": len(await finished_runs(stack)) if workers else 0,
                "input_to_job_p50_ms": pct(latencies, 0.5), "input_to_job_p99_ms": pct(latencies, 0.99),
                "operator_cpu_ms_per_input": round(operator_cpu * 1000 / sessions, 1),
                "cluster_cpu_ms_per_input": round(cluster_cpu * 1000 / sessions, 1),
                "operator_requests_per_input": round(sum(mine.values()) / sessions, 2),
                "operator_object_writes_per_input": round(sum(v for k, v in mine.items() if k.split()[0] in WRITES
                                                              and not k.endswith(" events")) / sessions, 2),
                "operator_requests_by_verb_per_input": {k: round(v / sessions, 2) for k, v in mine.most_common()},
                "api_writes_per_follow_up": round((written["transcript_writes"] + written["other_writes"])
                                                  / sessions, 2),
                "other_writes_per_follow_up": round(written["other_writes"] / sessions, 2),
                "writes_by_kind_per_follow_up": {k: round(v / sessions, 2)
                                                 for k, v in written["other_writes_by_kind"].items()},
                "transcript": {"steps": steps, "writes": written["transcript_writes"],
                               "writes_per_step": round(written["transcript_writes"] / steps, 3) if steps else None,
                               "min_write_gap_seconds": written["min_transcript_write_gap_seconds"],
                               "coalesced_250ms": apiwrites.coalesced(written)},
                "targets": {"input_to_job_p99_ms": 300, "api_writes_per_follow_up": 8,
                            "operator_cpu_ms_per_input": 20, "operator_requests_per_input": 15,
                            "operator_object_writes_per_input": 6},
            }


async def finished_runs(stack: Stack) -> list[dict]:
    out = await stack.kubectl("get", "arun", "-o", "json")
    return [r for r in json.loads(out.stdout)["items"]
            if (r.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Cancelled")]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--workers", action="store_true", help="run every turn with the pod runner")
    args = parser.parse_args()
    with pgserver.database_url():
        print(json.dumps(asyncio.run(main(args.sessions, args.workers)), indent=2))

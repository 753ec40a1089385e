"""Admission latency: an AgentInput create through the API server, both webhooks and the
session compare-and-swap, at 1 and 16 concurrent clients (one session per client).

    python bench/admission.py [--inputs 200]

Prints JSON. Runs the local stack without the pod runner (runs stay Pending). Target (issue):
p99 <= 25 ms at 16 clients on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import pgserver  # noqa: E402
from tests.e2e import manifests as m  # noqa: E402
from tests.stack import running_stack  # noqa: E402

API = "/apis/sessionops.dev/v1alpha1/namespaces/team-a"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))] * 1000, 1)


async def measure(cluster, http: aiohttp.ClientSession, clients: int, total: int, tag: str) -> dict:
    latencies: list[float] = []
    per_client = total // clients

    async def client(c: int) -> None:
        for i in range(per_client):
            body = m.message(f"{tag}-{c}-{i}", f"{tag}-{c}", f"m{i}", delivery="FollowUp")
            t0 = time.perf_counter()
            async with http.post(cluster.api_url + API + "/agentinputs", json=body) as r:
                assert r.status == 201, await r.text()
            latencies.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    wall = time.perf_counter() - t0
    return {"clients": clients, "inputs": len(latencies), "p50_ms": pct(latencies, 0.5),
            "p99_ms": pct(latencies, 0.99), "mean_ms": round(statistics.mean(latencies) * 1000, 1),
            "throughput_per_s": round(len(latencies) / wall, 1)}


async def main(total: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        async with running_stack(Path(tmp), pod_runner=False) as (stack, cluster), aiohttp.ClientSession() as http:
            await stack.apply(m.agent("bench"))
            results = []
            for clients in (1, 16):
                tag = f"c{clients}"
                for c in range(clients):
                    await stack.apply(m.session(f"{tag}-{c}", "bench"))
                results.append(await measure(cluster, http, clients, total, tag))
            return {"benchmark": "admission", "target": "p99 <= 25 ms at 16 clients", "results": results}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=160, help="inputs per concurrency level")
    with pgserver.database_url():
        print(json.dumps(asyncio.run(main(parser.parse_args().inputs)), indent=2))

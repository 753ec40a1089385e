"""A delegation tree end to end: six parallel children under the default bound of four.

    python bench/delegation.py [--rounds 3]

Prints JSON: the whole turn (input to the parent's Succeeded), each child's turn, the
operator's reaction from the last child's end to the parent's Resume segment (polled every
50 ms), the most
turns of the tree observed running at once, and the API requests the tree cost. Runs the
local stack with the pod runner (real worker processes) and the replay model
(``replay/delegate-six``: each child's model call takes 2 s).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sessionops.api.timestamps import parse  # noqa: E402
from tests import pgserver  # noqa: E402
from tests.e2e import manifests as m  # noqa: E402
from tests.stack import running_stack  # noqa: E402

API = "/apis/sessionops.dev/v1alpha1/namespaces/team-a"
DONE = ("Succeeded", "Failed", "Cancelled")


async def one_tree(http: aiohttp.ClientSession, cluster, name: str) -> dict:
    start_requests = len(cluster._requests)
    started = time.perf_counter()
    async with http.post(cluster.api_url + API + "/agentinputs",
                         json=m.message(f"{name}-1", name, "go", delivery="FollowUp")) as r:
        assert r.status == 201, await r.text()
    ended: dict[str, float] = {}
    resumed_at = None
    most = 0
    while True:
        async with http.get(cluster.api_url + API + f"/agentruns?labelSelector=sessionops.dev/tree={name}") as r:
            runs = (await r.json())["items"]
        now = time.perf_counter()
        running = 0
        for run in runs:
            phase = (run.get("status") or {}).get("phase") or "Pending"
            if phase in DONE:
                ended.setdefault(run["metadata"]["name"], now)
            elif phase != "Waiting":
                running += 1
        most = max(most, running)
        root = next((r for r in runs if r["metadata"]["name"] == f"{name}-t1"), None)
        segments = ((root or {}).get("status") or {}).get("segments") or []
        if resumed_at is None and any(s["kind"] == "Resume" for s in segments):
            resumed_at = now
        if root is not None and (root.get("status") or {}).get("phase") in DONE:
            break
        await asyncio.sleep(0.05)
    total = time.perf_counter() - started
    children = [r for r in runs if r["metadata"]["name"] != f"{name}-t1"]
    last_child_end = max(ended[r["metadata"]["name"]] for r in children)
    resume_segment = root["status"]["segments"][-1]
    # Segment timestamps have second precision: the reaction is measured by polling instead.
    child_turns = [(parse(c["status"]["segments"][-1]["finishedAt"]) - parse(c["metadata"]["creationTimestamp"]))
                   .total_seconds() for c in children]
    requests = collections.Counter(req.method for req in cluster._requests[start_requests:])
    return {"phase": root["status"]["phase"], "total_s": round(total, 2), "children": len(children),
            "most_running_at_once": most, "child_turn_s_median": round(statistics.median(child_turns), 2),
            "last_child_end_to_resume_segment_s": round((resumed_at or now) - last_child_end, 2),
            "last_child_end_to_parent_end_s": round(ended[f"{name}-t1"] - last_child_end, 2),
            "resume_segment": resume_segment["kind"], "api_requests": dict(requests)}


async def main(rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        async with running_stack(Path(tmp)) as (stack, cluster), aiohttp.ClientSession() as http:
            await stack.apply(m.agent("bench"))
            results = []
            for i in range(rounds):
                name = f"tree{i}"
                async with http.post(cluster.api_url + API + "/agentsessions",
                                     json=m.session(name, "bench", model="replay/delegate-six")) as r:
                    assert r.status == 201, await r.text()
                await asyncio.sleep(1)
                results.append(await one_tree(http, cluster, name))
    return {"benchmark": "delegation", "bound": 4, "rounds": results,
            "total_s_median": statistics.median(r["total_s"] for r in results),
            "resume_reaction_s_median": statistics.median(r["last_child_end_to_resume_segment_s"] for r in results),
            "parent_end_after_last_child_s_median": statistics.median(r["last_child_end_to_parent_end_s"]
                                                                      for r in results)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    with pgserver.database_url():
        print(json.dumps(asyncio.run(main(parser.parse_args().rounds)), indent=2))

"""Many sessions against the running operator: its own writes never collide with each other
and never fail (counted at the test cluster by the operator's identity), and a restart over
idle sessions writes nothing."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from sessionops.api.names import SESSION_FINALIZER as FINALIZER
from tests.e2e import manifests as m
from tests.stack import Stack, running_stack

pytestmark = pytest.mark.asyncio(loop_scope="module")

API = "/apis/sessionops.dev/v1alpha1/namespaces/team-a"
WRITES = {"POST", "PUT", "PATCH", "DELETE"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def scale(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Stack, Any]]:
    # No pod runner: these tests are about the operator's own requests.
    async with running_stack(Path(tmp_path_factory.mktemp("stack")), pod_runner=False) as (stack, cluster):
        await stack.apply(m.agent("scale"))
        yield stack, cluster


def operator_requests(stack: Stack, cluster: Any, since: int) -> list[Any]:
    return [r for r in cluster.served[since:] if r.user == stack.operator_user]


async def create_sessions(cluster: Any, names: list[str], parallel: int = 8) -> None:
    """All at once (``parallel`` requests in flight): the operator sees a burst of new sessions.
    A creation whose admission timed out on this shared machine is retried, as a client would
    (nothing was stored); the operator's own requests are what the tests count."""
    gate = asyncio.Semaphore(parallel)
    async with aiohttp.ClientSession(headers=cluster.admin_headers,
                                     connector=aiohttp.TCPConnector(ssl=cluster.client_ssl(), limit=parallel)) as http:
        async def one(name: str) -> None:
            async with gate:
                for attempt in range(10):
                    async with http.post(cluster.api_url + API + "/agentsessions",
                                         json=m.session(name, "scale")) as r:
                        text = await r.text()
                        if r.status == 201:
                            return
                        assert r.status == 500 and "context deadline exceeded" in text, text
                    await asyncio.sleep(1 + attempt)
                raise AssertionError(f"{name}: admission timed out ten times")
        await asyncio.gather(*(one(n) for n in names))


async def wait_until(predicate: Any, timeout: float, what: Any) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached in {timeout}s: {what() if callable(what) else what}")
        await asyncio.sleep(2)


def sessions(cluster: Any) -> list[dict[str, Any]]:
    """As stored, read-only (no copy: 1,000 deep copies per poll would slow the cluster)."""
    return cluster.store.list(("sessionops.dev", "agentsessions"), "team-a")


def settled(items: list[dict[str, Any]], count: int) -> bool:
    """Every session has the finalizer and a status the operator wrote (phase Idle)."""
    done = [s for s in items if FINALIZER in (s["metadata"].get("finalizers") or [])
            and (s.get("status") or {}).get("phase") == "Idle"]
    return len(done) >= count


def shapes(items: list[dict[str, Any]]) -> collections.Counter[tuple[Any, ...]]:
    """(finalizers, phase) -> how many sessions: what an unsettled session looks like."""
    return collections.Counter((tuple(s["metadata"].get("finalizers") or []), (s.get("status") or {}).get("phase"))
                               for s in items)


@pytest.mark.timeout(900)
async def test_a_thousand_new_sessions_get_their_finalizer_without_a_failed_request(scale) -> None:
    stack, cluster = scale
    since = len(cluster.served)
    names = [f"burst{i}" for i in range(1000)]
    await create_sessions(cluster, names)
    await wait_until(lambda: settled(sessions(cluster), len(names)), 600,
                     lambda: f"1,000 sessions settled: {shapes(sessions(cluster))}")
    await asyncio.sleep(2)  # writes still in flight would show below
    items = {s["metadata"]["name"]: s for s in sessions(cluster)}
    missing = [n for n in names if FINALIZER not in (items[n]["metadata"].get("finalizers") or [])]
    assert not missing, f"{len(missing)} sessions without the finalizer, e.g. {missing[:5]}"
    mine = operator_requests(stack, cluster, since)
    failed = collections.Counter(f"{r.status} {r.method} {r.path.rsplit('/', 2)[-2:]}" for r in mine
                                 if r.status >= 400)
    assert not failed, f"the operator's requests answered with errors: {failed.most_common(10)}"
    # One status write per new session settles it: no finalizer patch, no retry of a collision.
    writes = collections.Counter(f"{r.method} {r.path.split('/')[-1] if r.path.endswith('status') else 'object'}"
                                 for r in mine if r.method in WRITES and "/agentsessions/" in r.path)
    assert writes == {"PATCH status": len(names)}, writes


@pytest.mark.timeout(900)
async def test_a_restart_over_idle_sessions_writes_nothing(scale) -> None:
    stack, cluster = scale
    await create_sessions(cluster, [f"idle{i}" for i in range(300)])
    await wait_until(lambda: settled(sessions(cluster), len(sessions(cluster))), 600,
                     lambda: f"sessions settled: {shapes(sessions(cluster))}")
    await stack.stop_operator()
    since = len(cluster.served)
    await stack.start_operator()
    # Every session seen again: the operator has listed them (its watch's initial listing; the
    # watch itself is recorded only when it ends).
    await wait_until(lambda: any(r.method == "GET" and r.path.endswith("/agentsessions") and "watch" not in r.query
                                 for r in operator_requests(stack, cluster, since)), 120, "sessions listed")
    await asyncio.sleep(15)  # long enough for resyncs and recovery scans to have run
    mine = operator_requests(stack, cluster, since)
    writes = collections.Counter(f"{r.method} {r.path}" for r in mine if r.method in WRITES
                                 and "clusterkopfpeerings" not in r.path and "/events" not in r.path)
    events = [r for r in mine if r.method == "POST" and r.path.endswith("/events")]
    assert not writes, f"writes after a restart over idle sessions: {writes.most_common(10)}"
    assert not events, f"{len(events)} Events posted after a restart over idle sessions"

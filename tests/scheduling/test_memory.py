"""Nothing the operator keeps per object outlives the object: lock entries go when no one holds
or waits for them, a session's queue gauge goes with the session."""

from __future__ import annotations

import asyncio
import dataclasses
import types
from typing import Any

import prometheus_client as prom
import pytest

from sessionops.manager.handlers.sessions import session_changed
from sessionops.platform import locks, metrics
from sessionops.platform.cache import Cache
from sessionops.scheduling.reconcile import reconcile_session


async def test_a_lock_entry_lives_only_while_it_is_held_or_awaited() -> None:
    inside: list[str] = []
    release = asyncio.Event()

    async def hold(who: str) -> None:
        async with locks.lock("run", "ns", "r1"):
            inside.append(who)
            assert len(inside) == 1, "two holders at once"
            await release.wait()
            inside.remove(who)

    first = asyncio.create_task(hold("first"))
    second = asyncio.create_task(hold("second"))
    cancelled = asyncio.create_task(hold("cancelled"))
    await asyncio.sleep(0)
    assert inside == ["first"] and len(locks._locks) == 1
    cancelled.cancel()  # a waiter that gives up leaves too
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(first, second, cancelled, return_exceptions=True)
    assert locks._locks == {}
    for i in range(100):
        async with locks.lock("session", "ns", f"s{i}"):
            pass
    assert locks._locks == {}


async def test_coalesced_passes_leave_nothing_behind_and_a_cancelled_queued_pass_blocks_nothing() -> None:
    passes: list[int] = []
    gate = asyncio.Event()

    async def work() -> int:
        passes.append(len(passes))
        await gate.wait()
        return len(passes)

    running = asyncio.create_task(locks.coalesced("session", "ns", "s1", work))
    await asyncio.sleep(0)
    queued = asyncio.create_task(locks.coalesced("session", "ns", "s1", work))
    await asyncio.sleep(0)
    assert await locks.coalesced("session", "ns", "s1", work) is None  # a pass is already queued
    queued.cancel()
    gate.set()
    await asyncio.gather(running, queued, return_exceptions=True)
    assert passes == [0]
    # The cancelled pass left no mark: the next event runs its pass.
    assert await locks.coalesced("session", "ns", "s1", work) == 2
    assert locks._locks == {} and locks._queued == set()


def _depth(namespace: str, session: str) -> float | None:
    return prom.REGISTRY.get_sample_value("sessionops_queue_depth", {"namespace": namespace, "session": session})


async def test_a_deleted_sessions_queue_gauge_is_removed_on_its_deleted_event() -> None:
    metrics.QUEUE_DEPTH.labels(namespace="ns", session="gone").set(2)
    metrics.QUEUE_DEPTH.labels(namespace="ns", session="kept").set(1)
    memo = types.SimpleNamespace(runtime=types.SimpleNamespace(cache=Cache(), kube=None))
    body = {"kind": "AgentSession", "metadata": {"namespace": "ns", "name": "gone"}, "status": {"phase": "Idle"}}
    await session_changed(body=body, type="DELETED", memo=memo)
    assert _depth("ns", "gone") is None and _depth("ns", "kept") == 1
    metrics.forget_session("ns", "gone")  # repeating it is harmless
    metrics.forget_session("ns", "kept")


class Gone:
    async def cached_get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return None


async def test_a_pass_that_finds_its_session_gone_removes_its_queue_gauge() -> None:
    # The DELETED event may be handled before a concurrent pass wrote the gauge; the next
    # pass (an input's deletion by the garbage collector) finds the session gone.
    metrics.QUEUE_DEPTH.labels(namespace="ns", session="late").set(1)
    assert await reconcile_session(Gone(), "ns", "late") is None  # type: ignore[arg-type]
    assert _depth("ns", "late") is None


async def test_a_frozen_exception_passes_through_a_lock_unchanged() -> None:
    """Admission's ``Rejection`` is a frozen dataclass: raised under the receipt lock it must
    reach the webhook as itself (contextlib's context managers set ``__traceback__`` on it)."""
    @dataclasses.dataclass(frozen=True)
    class Refused(Exception):
        why: str

    with pytest.raises(Refused):
        async with locks.lock("receipt", "ns", "s"):
            raise Refused("no")
    assert ("receipt", "ns", "s") not in locks._locks

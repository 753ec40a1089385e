"""Per-object asyncio locks and coalesced passes: one writer per session and per run inside
this process (kopf peering keeps other replicas passive).

An object's lock exists only while someone holds it or waits for it: the registry would
otherwise keep one entry per object ever reconciled, for the life of the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
Key = tuple[str, str, str]


@dataclasses.dataclass(slots=True)
class _Entry:
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    users: int = 0
    """Holders and waiters: the entry goes when the last of them leaves."""


_locks: dict[Key, _Entry] = {}
_queued: set[Key] = set()


@contextlib.asynccontextmanager
async def lock(kind: str, namespace: str, name: str) -> AsyncIterator[None]:
    """``async with lock(kind, namespace, name):`` holds the object's lock."""
    key = (kind, namespace, name)
    entry = _locks.setdefault(key, _Entry())
    entry.users += 1
    try:
        async with entry.lock:
            yield
    finally:
        # Cancelled while waiting counts as leaving too: the entry never outlives its users.
        entry.users -= 1
        if entry.users == 0:
            del _locks[key]


async def coalesced(kind: str, namespace: str, name: str, fn: Callable[[], Awaitable[T]]) -> T | None:
    """Run ``fn`` under the object's lock, skipping it when a pass is already queued.

    Safe because passes are level-triggered: a queued pass has not read anything yet, so it
    will see the state that caused this call. A burst of events costs two passes, not one each.
    """
    key = (kind, namespace, name)
    if key in _queued:
        return None
    _queued.add(key)
    running = False
    try:
        async with lock(*key):
            _queued.discard(key)
            running = True
            return await fn()
    finally:
        if not running:  # cancelled while queued: later events must not be skipped forever
            _queued.discard(key)

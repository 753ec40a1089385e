"""Per-object asyncio locks and coalesced passes: one writer per session and per run inside
this process (kopf peering keeps other replicas passive)."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
_locks: collections.defaultdict[tuple[str, str, str], asyncio.Lock] = collections.defaultdict(asyncio.Lock)
_queued: set[tuple[str, str, str]] = set()


def lock(kind: str, namespace: str, name: str) -> asyncio.Lock:
    return _locks[(kind, namespace, name)]


async def coalesced(kind: str, namespace: str, name: str, fn: Callable[[], Awaitable[T]]) -> T | None:
    """Run ``fn`` under the object's lock, skipping it when a pass is already queued.

    Safe because passes are level-triggered: a queued pass has not read anything yet, so it
    will see the state that caused this call. A burst of events costs two passes, not one each.
    """
    key = (kind, namespace, name)
    if key in _queued:
        return None
    _queued.add(key)
    async with _locks[key]:
        _queued.discard(key)
        return await fn()

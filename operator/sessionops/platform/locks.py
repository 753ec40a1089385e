"""Per-object asyncio locks and coalesced passes: one writer per session and per run inside
this process (kopf peering keeps other replicas passive).

An object's lock exists only while someone holds it or waits for it: the registry would
otherwise keep one entry per object ever reconciled, for the life of the process.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
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


class lock:  # noqa: N801 - used like a function: ``async with lock(kind, namespace, name):``
    """Holds the object's lock. A class, not ``contextlib.asynccontextmanager``: that one sets
    ``__traceback__`` on the exception passing through, which a frozen dataclass exception
    (an admission ``Rejection``) refuses, turning a clear rejection into a webhook error."""

    __slots__ = ("key", "entry")

    def __init__(self, kind: str, namespace: str, name: str) -> None:
        self.key: Key = (kind, namespace, name)
        self.entry = _locks.setdefault(self.key, _Entry())
        self.entry.users += 1

    async def __aenter__(self) -> None:
        try:
            await self.entry.lock.acquire()
        except BaseException:  # cancelled while waiting counts as leaving too
            self._leave()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self.entry.lock.release()
        self._leave()

    def _leave(self) -> None:
        # The entry never outlives its users.
        self.entry.users -= 1
        if self.entry.users == 0:
            del _locks[self.key]


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

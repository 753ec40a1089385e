"""Per-object asyncio locks: one writer per session and per run inside this process
(kopf peering keeps other replicas passive)."""

from __future__ import annotations

import asyncio
import collections

_locks: collections.defaultdict[tuple[str, str, str], asyncio.Lock] = collections.defaultdict(asyncio.Lock)


def lock(kind: str, namespace: str, name: str) -> asyncio.Lock:
    return _locks[(kind, namespace, name)]

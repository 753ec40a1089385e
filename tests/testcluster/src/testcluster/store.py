"""The object store: one global resourceVersion counter, objects by (group, plural), a bounded event history.

All mutations are synchronous (no ``await`` inside), so each one is atomic for the asyncio server.
Stored dicts are never mutated in place after being stored: writers store fresh copies.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
from typing import Any

from . import errors

STORED_MAX = 1536 * 1024
"""etcd's default ``--max-request-bytes`` (1.5 MiB): no object larger than this can be written."""

GP = tuple[str, str]          # (group, plural)
Key = tuple[str, str]         # (namespace or '', name)


@dataclasses.dataclass(frozen=True)
class Event:
    rv: int
    gp: GP
    type: str                         # ADDED | MODIFIED | DELETED
    obj: dict[str, Any]               # the new (or the final, for DELETED) object
    old: dict[str, Any] | None        # the previous object (None for ADDED)


def stored_size(obj: dict[str, Any]) -> int:
    """Bytes of the object as kube-apiserver writes a custom resource to etcd: compact JSON from Go's
    encoder, which escapes ``<``, ``>``, ``&``, U+2028 and U+2029 as six-byte ``\\uXXXX`` sequences."""
    text = json.dumps(obj, separators=(',', ':'), ensure_ascii=False)
    return len(text.encode()) + 5 * sum(text.count(c) for c in '<>&') + 3 * sum(text.count(c) for c in '\u2028\u2029')


class Subscription:
    def __init__(self, gp: GP) -> None:
        self.gp = gp
        self.queue: asyncio.Queue[Event] = asyncio.Queue()


class TooOld(Exception):
    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(requested, oldest)
        self.requested = requested
        self.oldest = oldest


class Store:
    def __init__(self, history_size: int = 10_000) -> None:
        self.rv = 0
        self.objects: dict[GP, dict[Key, dict[str, Any]]] = collections.defaultdict(dict)
        self.uids: dict[str, tuple[GP, Key]] = {}
        self.history: collections.deque[Event] = collections.deque()
        self.history_size = history_size
        self.compacted_rv = 0
        self.subscriptions: set[Subscription] = set()

    # Reading.
    def get(self, gp: GP, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects[gp].get((namespace or '', name))

    def list(self, gp: GP, namespace: str | None = None) -> list[dict[str, Any]]:
        items = self.objects.get(gp, {})
        keys = sorted(k for k in items if namespace is None or k[0] == namespace)
        return [items[k] for k in keys]

    def by_uid(self, uid: str) -> dict[str, Any] | None:
        where = self.uids.get(uid)
        if where is None:
            return None
        return self.objects[where[0]].get(where[1])

    def all_objects(self) -> list[tuple[GP, dict[str, Any]]]:
        return [(gp, obj) for gp, items in self.objects.items() for obj in items.values()]

    # Writing.
    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def put(self, gp: GP, obj: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
        """Store a new version (assigns a fresh resourceVersion) and record ADDED/MODIFIED."""
        if stored_size(obj) > STORED_MAX:
            raise errors.storage_too_large()
        rv = self.next_rv()
        meta = obj['metadata']
        meta['resourceVersion'] = str(rv)
        key = (meta.get('namespace') or '', meta['name'])
        self.objects[gp][key] = obj
        self.uids[meta['uid']] = (gp, key)
        self._record(Event(rv, gp, 'MODIFIED' if old is not None else 'ADDED', obj, old))
        return obj

    def remove(self, gp: GP, obj: dict[str, Any]) -> dict[str, Any]:
        """Remove an object; the DELETED event carries the final object with a fresh resourceVersion."""
        rv = self.next_rv()
        meta = obj['metadata']
        key = (meta.get('namespace') or '', meta['name'])
        self.objects[gp].pop(key, None)
        self.uids.pop(meta.get('uid', ''), None)
        final = dict(obj)
        final['metadata'] = dict(meta, resourceVersion=str(rv))
        self._record(Event(rv, gp, 'DELETED', final, obj))
        return final

    def _record(self, event: Event) -> None:
        self.history.append(event)
        while len(self.history) > self.history_size:
            dropped = self.history.popleft()
            self.compacted_rv = dropped.rv
        for sub in list(self.subscriptions):
            if sub.gp == event.gp:
                sub.queue.put_nowait(event)

    def compact(self) -> None:
        """Forget the whole event history (as etcd compaction does): older watches get 410 Gone."""
        if self.history:
            self.compacted_rv = self.history[-1].rv
        self.compacted_rv = max(self.compacted_rv, self.rv)
        self.history.clear()

    # Watching.
    def subscribe(self, gp: GP) -> Subscription:
        sub = Subscription(gp)
        self.subscriptions.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self.subscriptions.discard(sub)

    def events_since(self, gp: GP, rv: int) -> list[Event]:
        if rv < self.compacted_rv:
            raise TooOld(rv, self.compacted_rv + 1)
        return [e for e in self.history if e.rv > rv and e.gp == gp]

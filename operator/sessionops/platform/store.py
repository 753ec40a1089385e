"""Watch-fed copies of the objects the reconciles decide on, with the operator's own writes.

Each event of a session, input or run used to cost a GET and two LISTs (72 requests and 184 ms
of operator CPU per accepted follow-up): the decisions now read this store instead, the way a
controller-runtime client reads its informer cache. Two rules keep it as good as a read:

- **Complete before use.** The operator lists every kept kind before kopf starts watching
  (``prime``), so a reconcile never sees a partial list (a missing active run would let a
  second turn start). An object deleted between that listing and kopf's own is not in kopf's
  listing, so no event removes it: ``unconfirmed`` names what no watch event has shown since,
  and the operator checks those once with a fresh read.
- **Our own writes go in at once.** The write's response is stored, so a pass that runs
  before the watch delivers that write still sees it (input 1 Consumed and run 1 created:
  a pass that saw only the first would claim input 2). An event older than what is stored
  (a lower resourceVersion) is ignored: the store never goes back in time.

Objects are stored slim, compact, read-only and shared: ``managedFields`` and the last-applied
annotation are dropped (nothing decides on them), pods and Jobs keep no spec, keys and short
strings are interned, and the frozen context snapshots are shared, so a thousand inputs of one
Agent hold one copy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections.abc import Iterable
from typing import Any

Key = tuple[str, str]
"""(namespace, name)."""

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
FROZEN_SNAPSHOTS = ("agentinputs", "agentruns")
"""Kinds whose ``spec.contextSnapshot`` the API server keeps immutable (the CRDs' CEL rules)."""

def _rv(obj: dict[str, Any]) -> int | None:
    """resourceVersion as a number when it is one (etcd's revision; the API calls it opaque,
    so a non-number is never compared and the newer event simply wins)."""
    value = (obj.get("metadata") or {}).get("resourceVersion")
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class _Snapshots:
    """Interned frozen snapshots, counted by their holders, dropped with the last one.

    Keyed by a digest of the canonical JSON, not the JSON itself: each holder keeps its key, and
    a key as long as the snapshot would cost every input the copy interning saves."""

    def __init__(self) -> None:
        self._by_digest: dict[bytes, list[Any]] = {}  # digest -> [shared dict, holders]

    def take(self, snapshot: Any) -> tuple[Any, bytes | None]:
        if not isinstance(snapshot, dict):
            return snapshot, None
        text = json.dumps(snapshot, sort_keys=True, separators=(",", ":"))
        digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
        entry = self._by_digest.get(digest)
        if entry is None:
            entry = self._by_digest[digest] = [_compact(snapshot), 0]
        entry[1] += 1
        return entry[0], digest

    def again(self, digest: bytes) -> tuple[Any, bytes]:
        """One more holder of a snapshot already held."""
        entry = self._by_digest[digest]
        entry[1] += 1
        return entry[0], digest

    def release(self, digest: bytes | None) -> None:
        if digest is None:
            return
        entry = self._by_digest.get(digest)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del self._by_digest[digest]

    def __len__(self) -> int:
        return len(self._by_digest)


@dataclasses.dataclass(slots=True)
class _Entry:
    obj: dict[str, Any]
    rv: int | None
    snapshot: bytes | None  # the interned snapshot's key, released when the entry goes
    confirmed: bool  # a watch event (not only the priming list or our own write) showed it


INTERNED_MAX = 64
"""Strings up to this long are interned in stored objects: names, phases, reasons, timestamps."""


def _compact(value: Any, previous: Any = None) -> Any:
    """A copy whose keys and short strings are interned. Each parsed event has its own copy of
    every key ("metadata", "lastTransitionTime", ...) and of every repeated value ("Pending",
    "False", the namespace): half of a stored object's memory (5.5 KB -> 2.8 KB per object).
    A part equal to the same part of the stored version (``previous``) is that part: a C-level
    comparison instead of a copy (an update changes little: the version, a phase, a condition)."""
    if previous is not None and type(previous) is type(value) and previous == value:
        return previous
    if isinstance(value, dict):
        before = previous if isinstance(previous, dict) else {}
        return {sys.intern(k): _compact(v, before.get(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_compact(v) for v in value]
    if isinstance(value, str) and len(value) <= INTERNED_MAX:
        return sys.intern(value)
    return value


def slim(plural: str, obj: dict[str, Any], previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """The stored form: a compact copy without what no decision reads (never mutates ``obj``).
    A context snapshot is left as it is: the store shares one copy (``_Snapshots``).
    ``previous``: the stored version, whose unchanged parts are reused."""
    before = previous or {}
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if key == "metadata":
            meta = {k: v for k, v in (value or {}).items() if k != "managedFields"}
            annotations = meta.get("annotations")
            if annotations and LAST_APPLIED in annotations:
                meta["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
            out["metadata"] = _compact(meta, before.get("metadata"))
        elif key == "spec" and plural in ("pods", "jobs"):
            continue  # the pod template is most of it; decisions read metadata and status
        elif key == "spec" and isinstance(value, dict) and "contextSnapshot" in value:
            rest = {k: v for k, v in value.items() if k != "contextSnapshot"}
            out["spec"] = {**_compact(rest, {k: v for k, v in (before.get("spec") or {}).items()
                                            if k != "contextSnapshot"}),
                           "contextSnapshot": value["contextSnapshot"]}
        else:
            out[sys.intern(key)] = _compact(value, before.get(key))
    out.setdefault("metadata", {})
    return out


class Store:
    """Slim copies of the tracked kinds, by (namespace, name) and by indexed label."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[Key, _Entry]] = {}
        self._by_label: dict[str, dict[tuple[str, str, str], set[str]]] = {}
        self._labels: dict[str, tuple[str, ...]] = {}
        self._snapshots = _Snapshots()

    def track(self, plural: str, labels: Iterable[str] = ()) -> None:
        """Keep ``plural`` here, answering ``k=v`` selectors for these label keys."""
        self._objects.setdefault(plural, {})
        self._by_label.setdefault(plural, {})
        self._labels[plural] = tuple(labels)

    def tracks(self, plural: str) -> bool:
        return plural in self._objects

    # Feeding: watch events and the operator's own write responses.
    def see(self, plural: str, obj: dict[str, Any], *, confirmed: bool = False) -> None:
        """Store ``obj`` unless what is stored is newer. Safe to repeat: the same version twice
        stores the same thing. ``confirmed``: it comes from a watch event."""
        objects = self._objects.get(plural)
        if objects is None:
            return
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        rv = _rv(obj)
        current = objects.get(key)
        if current is not None and current.rv is not None and rv is not None and rv < current.rv:
            current.confirmed = current.confirmed or confirmed
            return  # an event older than our own write's response
        stored = slim(plural, obj, current.obj if current is not None else None)
        snapshot_key = None
        spec = stored.get("spec")
        if isinstance(spec, dict) and "contextSnapshot" in spec:
            if current is not None and current.snapshot is not None and plural in FROZEN_SNAPSHOTS \
                    and current.obj["metadata"].get("uid") == stored["metadata"].get("uid"):
                # The same object's snapshot cannot have changed: no canonical JSON to digest again.
                shared, snapshot_key = self._snapshots.again(current.snapshot)
            else:
                shared, snapshot_key = self._snapshots.take(spec["contextSnapshot"])
            stored["spec"] = {**spec, "contextSnapshot": shared}
        if current is not None:
            self._unindex(plural, key, current)
            confirmed = confirmed or current.confirmed
        objects[key] = _Entry(stored, rv, snapshot_key, confirmed)
        self._index(plural, key, stored)

    def forget(self, plural: str, obj: dict[str, Any]) -> None:
        """The object is gone (a DELETED event). Safe to repeat."""
        objects = self._objects.get(plural)
        if objects is None:
            return
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        current = objects.pop(key, None)
        if current is not None:
            self._unindex(plural, key, current)

    def _index(self, plural: str, key: Key, obj: dict[str, Any]) -> None:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        index = self._by_label[plural]
        for label in self._labels[plural]:
            if label in labels:
                index.setdefault((key[0], label, labels[label]), set()).add(key[1])

    def _unindex(self, plural: str, key: Key, entry: _Entry) -> None:
        self._snapshots.release(entry.snapshot)
        labels = (entry.obj.get("metadata") or {}).get("labels") or {}
        index = self._by_label[plural]
        for label in self._labels[plural]:
            if label in labels:
                names = index.get((key[0], label, labels[label]))
                if names is not None:
                    names.discard(key[1])
                    if not names:
                        del index[(key[0], label, labels[label])]

    # Reading: shared objects, never to be mutated by the caller.
    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        entry = self._objects[plural].get((namespace, name))
        return None if entry is None else entry.obj

    def answers(self, plural: str, selector: str) -> bool:
        """Whether ``list(plural, ..., selector)`` can be answered from memory."""
        if plural not in self._objects:
            return False
        if not selector:
            return True
        label, sep, value = selector.partition("=")
        return bool(sep) and "," not in selector and "!" not in label and label in self._labels[plural]

    def list(self, plural: str, namespace: str, selector: str = "") -> list[dict[str, Any]]:
        objects = self._objects[plural]
        if not selector:
            return [e.obj for (ns, _), e in objects.items() if ns == namespace]
        label, _, value = selector.partition("=")
        names = self._by_label[plural].get((namespace, label, value.lstrip("=")), ())
        return [objects[(namespace, n)].obj for n in sorted(names)]

    def unconfirmed(self, plural: str) -> list[Key]:
        """Objects no watch event has shown (see the module docstring)."""
        return [key for key, entry in self._objects.get(plural, {}).items() if not entry.confirmed]

    def count(self, plural: str) -> int:
        return len(self._objects.get(plural, ()))

    @property
    def snapshots(self) -> int:
        """Distinct frozen snapshots held (the interned copies)."""
        return len(self._snapshots)

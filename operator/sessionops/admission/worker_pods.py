"""Worker pods as the status webhook sees them: read once per pod uid, then cached.

A worker writes its run's status many times per turn (running, waitpoints, progress,
result). Reading its pod on each write would put an API read on that path; the facts the
webhook needs (run and session labels) are set by the operator when it creates the Job and
never change for a pod uid, so one read per worker pod is enough. The cache is keyed by the
bound token's pod uid, so a pod recreated under the same name is read afresh; a pod that was
deleted is not cached (its token stops working anyway). Bounded: oldest entries go first.
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable
from typing import Any

from sessionops.admission.status import Pod
from sessionops.api.names import RUN_LABEL, SESSION_LABEL

GetPod = Callable[[str, str], Awaitable[dict[str, Any] | None]]


class WorkerPods:
    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self.pods: collections.OrderedDict[str, Pod] = collections.OrderedDict()
        self.reads = 0  # API reads made (the tests and bench check the cache works)

    async def lookup(self, get_pod: GetPod, namespace: str, name: str, uid: str) -> Pod | None:
        """The pod the token is bound to, or None when no pod of that name and uid exists."""
        if (found := self.pods.get(uid)) is not None:
            self.pods.move_to_end(uid)
            return found
        self.reads += 1
        raw = await get_pod(namespace, name)
        meta = (raw or {}).get("metadata") or {}
        if meta.get("uid") != uid:
            return None
        labels = meta.get("labels") or {}
        pod = Pod(namespace=namespace, name=name, uid=uid, run=labels.get(RUN_LABEL),
                  session=labels.get(SESSION_LABEL))
        self.pods[uid] = pod
        while len(self.pods) > self.size:
            self.pods.popitem(last=False)
        return pod

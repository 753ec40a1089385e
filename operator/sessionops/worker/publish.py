"""Publishes the turn's transcript as AgentTranscript chunks while the graph runs.

Writes are coalesced: ``update`` only records the latest projection and wakes a
background thread, which writes at most once per ``interval`` (a tool that runs for a
minute still has its call published within one interval). Only chunks whose steps
changed are written, so a step costs about one write of the open (last) chunk.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from urllib3.exceptions import HTTPError

from sessionops import GROUP, VERSION
from sessionops.api.names import RUN_LABEL, SESSION_LABEL, owner_reference
from sessionops.api.transcript import chunk_name, chunks
from sessionops.platform.errors import ApiException, Conflict
from sessionops.platform.worker_kube import WorkerKube
from sessionops.views import RunView
from sessionops.views.transcript import ChunkView, in_order
from sessionops.worker import transcript

logger = logging.getLogger("sessionops.worker")

INTERVAL = 0.25
"""Seconds between two transcript writes of one run (the issue's bound: 4 writes/s)."""


class Publisher:
    def __init__(self, kube: WorkerKube, run: dict[str, Any], segment: str, *,
                 now: Callable[[], str], interval: float = INTERVAL) -> None:
        self.kube = kube
        self.namespace = run["metadata"]["namespace"]
        self.run = run
        self.segment = segment
        self.now = now
        self.interval = interval
        self.writes = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = False
        self._steps: list[transcript.Step] = []
        self._written: dict[int, list[transcript.Step]] = {}
        self._versions: dict[int, str] = {}
        self._thread: threading.Thread | None = None
        self._last_write = float("-inf")
        self._load()

    def _load(self) -> None:
        """Start from what earlier segments (or an earlier try of this one) published."""
        for chunk in in_order(self.kube.list_transcripts(self.namespace, self.run["metadata"]["name"])):
            index, steps = ChunkView(chunk).index, list(ChunkView(chunk).steps)
            self._written[index] = steps
            self._versions[index] = chunk["metadata"]["resourceVersion"]
            self._steps.extend(steps)

    @property
    def steps(self) -> list[transcript.Step]:
        with self._lock:
            return list(self._steps)

    def start(self) -> Publisher:
        self._thread = threading.Thread(target=self._loop, name="transcript", daemon=True)
        self._thread.start()
        return self

    def update(self, projected: Sequence[transcript.Step]) -> list[transcript.Step]:
        """Merge a fresh projection; the background thread writes it (coalesced).
        Returns the steps that are new to the transcript."""
        with self._lock:
            known = {s["id"] for s in self._steps}
            self._steps = transcript.merge(self._steps, projected, segment=self.segment, at=self.now())
            new = [s for s in self._steps if s["id"] not in known]
        self._wake.set()
        return new

    def stop(self) -> None:
        """Stop the background thread without writing (the error path; idempotent)."""
        self._stop = True
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def close(self) -> None:
        """Stop the thread and write what is left (the segment's last word), no sooner than one
        interval after the previous write: the bound holds for the last write too."""
        self.stop()
        if self._changed():
            time.sleep(max(0.0, self.interval - (time.monotonic() - self._last_write)))
            self._flush()

    def _loop(self) -> None:
        while not self._stop:
            self._wake.wait()
            if self._stop:
                return
            self._wake.clear()
            started = time.monotonic()
            try:
                self._flush()
            except (ApiException, HTTPError, Conflict) as e:
                # Progress is best effort while the turn runs; close() writes the final state.
                logger.warning("run %s segment %s: transcript write failed (%s); retried at the next step",
                               self.run["metadata"]["name"], self.segment, type(e).__name__)
            time.sleep(max(0.0, self.interval - (time.monotonic() - started)))

    def _changed(self) -> list[tuple[int, list[transcript.Step]]]:
        """(index, steps) of every chunk that differs from what we last wrote."""
        with self._lock:
            steps = list(self._steps)
        return [(index, chunk) for index, chunk in enumerate(chunks(steps)) if self._written.get(index) != chunk]

    def _flush(self) -> None:
        """Write every chunk that differs from what we last wrote. Safe to repeat: each
        write is the chunk's whole content."""
        for index, chunk in self._changed():
            written = self.kube.put_transcript(self.namespace, self._body(index, chunk))
            self.writes += 1
            self._last_write = time.monotonic()
            self._written[index] = chunk
            self._versions[index] = written["metadata"]["resourceVersion"]

    def _body(self, index: int, steps: list[transcript.Step]) -> dict[str, Any]:
        meta = self.run["metadata"]
        session = RunView(self.run).session_name
        metadata: dict[str, Any] = {
            "name": chunk_name(meta["name"], index), "namespace": self.namespace,
            "labels": {SESSION_LABEL: session, RUN_LABEL: meta["name"]},
            "ownerReferences": [owner_reference(self.run, kind="AgentRun")],
        }
        if index in self._versions:
            metadata["resourceVersion"] = self._versions[index]
        return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "AgentTranscript", "metadata": metadata,
                "spec": {"run": meta["name"], "session": session, "index": index, "steps": steps}}

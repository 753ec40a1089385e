"""Steer delivery: the steering middleware's ``fetch_steers`` / ``on_delivered`` over the API.

At each safe point the middleware asks for steers. This adapter lists the session's
inputs, claims the pending Steer inputs for this run (status ``Consumed``,
``run: <run>``; a CAS, so an input the scheduler or a cancellation got first is never
injected), records their names in the run's ``status.steered``, and returns them with
the ones it claimed earlier: the middleware injects those the thread does not hold yet
(claim before inject; after a crash the state, not the claim, says what was delivered).
Nothing is claimed for a run that is being cancelled.
"""

from __future__ import annotations

import logging
from typing import Any

from sessionops.platform.worker_kube import WorkerKube
from sessionops.views import RunView
from sessionops.worker.plan import steer_candidates, steer_text

logger = logging.getLogger(__name__)


class SteerDelivery:
    def __init__(self, kube: WorkerKube, namespace: str, session: str, run: str, run_inputs: list[str]) -> None:
        self.kube = kube
        self.namespace = namespace
        self.session = session
        self.run = run
        self.run_inputs = list(run_inputs)
        self.confirmed: set[str] = set()
        self.delivered_names: list[str] = []

    def fetch(self) -> list[tuple[str, str]]:
        candidates = [inp for inp in steer_candidates(self.kube.list_inputs(self.namespace, self.session),
                                                      self.run, self.run_inputs)
                      if inp["metadata"]["uid"] not in self.confirmed]
        if not candidates:
            return []
        run = self.kube.get("agentruns", self.namespace, self.run)
        if run is None or not RunView(run).writable_by_worker:
            return []  # cancelled or ended: steers stay pending for the scheduler
        claimed = [inp for inp in candidates if self.kube.claim_input(inp, self.run)]
        if claimed:
            self._record([inp["metadata"]["name"] for inp in claimed])
        return [(inp["metadata"]["uid"], steer_text(inp)) for inp in claimed]

    def _record(self, names: list[str]) -> None:
        """Add names to ``status.steered`` (a CAS on the run; a union, so repeating is safe)."""
        def change(run: dict[str, Any]) -> dict[str, Any] | None:
            steered = list(RunView(run).steered)
            new = [n for n in names if n not in steered]
            return {"steered": steered + new} if new else None

        self.kube.update_run_status(self.namespace, self.run, change)
        for name in names:
            if name not in self.delivered_names:
                self.delivered_names.append(name)
                logger.info("steer %s claimed for run %s", name, self.run)

    def confirm(self, uids: list[str]) -> None:
        """The thread holds these steers durably: stop offering them."""
        self.confirmed.update(uids)

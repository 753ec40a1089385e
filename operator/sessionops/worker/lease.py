"""The session Lease: one writer per thread (``coordination.k8s.io/v1``).

Name ``sessionops-<session>`` in the run's namespace; ``holderIdentity`` is
``pod:<pod name>`` when the worker runs in a pod it can see (its host name names a
pod), else ``host:<host name>:<pid>``. Timings, for a duration D
(``SESSIONOPS_LEASE_SECONDS``, the config's ``worker.leaseDurationSeconds``):

- acquire: create it, or take it over when it is free: no holder, expired
  (``renewTime + leaseDurationSeconds < now``), ours, or held by a ``pod:`` holder whose
  pod no longer runs (phase Succeeded/Failed, or deleted: a crashed worker's Retry need
  not wait D; reading pods needs ``get pods``, without it only expiry counts).
  While another live holder has it, poll every ``POLL_SECONDS`` up to the wait bound
  (default 2 D), then give up (``LeaseUnavailable``: the worker exits non-zero and the
  operator retries).
- renew every D/3 in a background thread; when renewing has failed for longer than
  the Lease can cover, or someone else holds it, the Lease is lost: ``on_lost`` runs.
- release on exit (also on SIGTERM): clear ``holderIdentity``.

Every write is a create or a replace carrying the read resourceVersion (a CAS), so two
workers racing for a free Lease cannot both win.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from urllib3.exceptions import HTTPError

from sessionops.api.names import lease_name
from sessionops.platform.errors import ApiException, Conflict
from sessionops.platform.worker_kube import WorkerKube
from sessionops.views.lease import Holder, LeaseView

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.25
"""Poll interval while another holder has the Lease: releases are seen within it."""
TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed", "Gone"})
POD_IDENTITY = "pod:"


def worker_identity(kube: WorkerKube, namespace: str, hostname: str, pid: int) -> str:
    """``pod:<name>`` when our host name is a running pod of the namespace, else a
    process identity that nobody can mistake for a pod (and so never declares dead)."""
    if kube.pod_phase(namespace, hostname) not in (None, *TERMINAL_POD_PHASES):
        return f"{POD_IDENTITY}{hostname}"
    return f"host:{hostname}:{pid}"


class LeaseUnavailable(Exception):
    """Another live holder kept the Lease for longer than we wait."""


class LeaseLost(Exception):
    """We held the Lease and no longer do: another worker may be writing the thread."""


def micro_time(t: datetime.datetime) -> str:
    """Kubernetes MicroTime: RFC 3339 with microseconds, in UTC."""
    return t.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class SessionLease:
    def __init__(self, kube: WorkerKube, namespace: str, session: str, identity: str, duration: int, *,
                 clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = lease_name(session)
        self.identity = identity
        self.duration = duration
        self.clock = clock
        self._lease: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.lost = threading.Event()

    @property
    def held(self) -> bool:
        return self._lease is not None and not self.lost.is_set()

    def _spec(self, previous: dict[str, Any] | None, now: datetime.datetime) -> dict[str, Any]:
        old = (previous or {}).get("spec") or {}
        transitions = int(old.get("leaseTransitions") or 0)
        if old.get("holderIdentity") != self.identity:
            transitions += 1 if previous is not None else 0
        return {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration,
                "acquireTime": micro_time(now), "renewTime": micro_time(now), "leaseTransitions": transitions}

    def _holder_dead(self, holder: str) -> bool:
        """A holder whose pod has ended cannot write any more, whatever its renewTime says."""
        if not holder.startswith(POD_IDENTITY):
            return False
        return self.kube.pod_phase(self.namespace, holder.removeprefix(POD_IDENTITY)) in TERMINAL_POD_PHASES

    def try_acquire(self) -> bool:
        """One attempt: True when we hold the Lease now. Safe to repeat (a CAS each time)."""
        now = self.clock()
        lease = self.kube.get_lease(self.namespace, self.name)
        try:
            if lease is None:
                body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": self._spec(None, now)}
                self._lease = self.kube.create_lease(self.namespace, body)
                return True
            view = LeaseView.of(lease)
            state = view.holder_state(self.identity, now)
            if state is Holder.OTHER and not self._holder_dead(view.holder or ""):
                return False
            if state is Holder.OTHER:
                logger.info("lease %s: holder %s has ended; taking over", self.name, view.holder)
            self._lease = self.kube.replace_lease(self.namespace, {**lease, "spec": self._spec(lease, now)})
            return True
        except Conflict:
            return False  # someone else wrote it between our read and write: look again

    def acquire(self, wait_seconds: float) -> None:
        deadline = time.monotonic() + wait_seconds
        logged = False
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                raise LeaseUnavailable(f"lease {self.name} is held by another worker (waited {wait_seconds:.0f}s)")
            if not logged:
                logger.info("lease %s is held by another worker: waiting up to %.0fs", self.name, wait_seconds)
                logged = True
            time.sleep(POLL_SECONDS)
        logger.info("lease %s acquired by %s", self.name, self.identity)

    def renew(self) -> None:
        """Extend the Lease. Raises LeaseLost when someone else holds it now."""
        with self._lock:
            if self._lease is None:
                raise LeaseLost(f"lease {self.name} is not held")
            lease = self.kube.get_lease(self.namespace, self.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                raise LeaseLost(f"lease {self.name} was taken over or deleted")
            spec = {**lease["spec"], "renewTime": micro_time(self.clock())}
            try:
                self._lease = self.kube.replace_lease(self.namespace, {**lease, "spec": spec})
            except Conflict:
                raise LeaseLost(f"lease {self.name} changed under us") from None

    def start_renewing(self, on_lost: Callable[[LeaseLost], None]) -> None:
        def loop() -> None:
            last_ok = time.monotonic()
            while not self._stop.wait(self.duration / 3):
                try:
                    self.renew()
                    last_ok = time.monotonic()
                except LeaseLost as e:
                    self.lost.set()
                    on_lost(e)
                    return
                except (ApiException, HTTPError, OSError) as e:
                    # The API server may be briefly unreachable: keep trying while the
                    # last renewal still covers us, with a third of D as safety margin.
                    if time.monotonic() - last_ok > self.duration * 2 / 3:
                        self.lost.set()
                        on_lost(LeaseLost(f"lease {self.name} could not be renewed: {e}"))
                        return
                    logger.warning("lease %s: renewal failed, retrying: %s", self.name, e)

        self._thread = threading.Thread(target=loop, name="lease-renewer", daemon=True)
        self._thread.start()

    def stop_renewing(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def release(self) -> None:
        """Clear holderIdentity if we still hold it. Safe to repeat; failures are logged only
        (an unreleased Lease simply expires after D)."""
        self.stop_renewing()
        with self._lock:
            if self._lease is None:
                return
            try:
                lease = self.kube.get_lease(self.namespace, self.name)
                if lease is not None and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                    spec = {**lease["spec"], "holderIdentity": None}
                    self.kube.replace_lease(self.namespace, {**lease, "spec": spec})
                    logger.info("lease %s released", self.name)
            except (Conflict, ApiException, HTTPError, OSError) as e:
                logger.warning("lease %s: release failed (it expires in %ss): %s", self.name, self.duration, e)
            finally:
                self._lease = None

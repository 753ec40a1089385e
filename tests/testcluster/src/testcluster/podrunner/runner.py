"""The pod runner: the kubelet and the Job controller for the test cluster, on this machine.

For every new ``batch/v1`` Job (all namespaces) it creates a Pod object as the Job
controller does (``<job>-<5 chars>``, labels ``job-name``, ``batch.kubernetes.io/job-name``,
``controller-uid``, ``batch.kubernetes.io/controller-uid``, a controller ownerReference
with ``blockOwnerDeletion``), sets the Job's ``startTime`` and ``active: 1``, and runs
the container's command as a real subprocess (``python`` is ``sys.executable``) with
the environment resolved from the pod spec (``envresolve``), ``KUBECONFIG`` pointing
at the test cluster and ``HOSTNAME`` = the pod name. The process authenticates as the pod's
ServiceAccount, as with a projected token: the runner asks for a token bound to the pod (a
TokenRequest with ``boundObjectRef``) and writes it into a kubeconfig of the pod's own, so
the process is ``system:serviceaccount:<ns>:<sa>`` with the pod's name in its user info and
the token dies with the pod. Every container gets it unless ``automountServiceAccountToken:
false``; then only a container mounting a projected ``serviceAccountToken`` volume does (the
volume's files, token, ca.crt and namespace, are written too).

Containers: the first of ``containers`` is the main one, its exit the pod's phase. Native
sidecars (``initContainers`` with ``restartPolicy: Always``) start before it, are restarted if
they exit while it runs, and get SIGTERM (SIGKILL after the grace period) once it has exited.
Each container is a process of its own with only its own spec's environment (plus the few
variables standing in for the image's: ``BASE_ENV_KEYS``). When the runner is root, a container
whose ``runAsUser`` differs from the pod's runs as that UID (``runAsGroup``, the pod's
``fsGroup`` as supplementary group), and the volumes it mounts are group-shared as with fsGroup
(setgid, group rwx); the other containers run as the runner's UID, standing for the pod's.
Not root: every container runs as the runner's UID (the split of users is then not played
locally; a sidecar still gets a scrubbed environment and no token). The
runner itself, playing the kubelet and the Job controller, uses the kubeconfig it was given.
When the process exits the Pod
gets phase ``Succeeded`` / ``Failed`` with a terminated container status (exit code,
reason ``Completed`` / ``Error`` / ``OOMKilled``) and the Job ``succeeded`` / ``failed``,
``active: 0`` and the conditions of a Job with ``backoffLimit: 0`` (``Complete`` after
``SuccessCriteriaMet``, or ``Failed`` after ``FailureTarget``, reason
``BackoffLimitExceeded``) with ``completionTime``.

Volumes: the ``emptyDir`` named ``work`` maps to ``<workdirs>/<namespace>/<key>`` (when root, a
symlink to a directory other UIDs can reach, moved back when the runner stops), where the key is
the value of the Job's ``workdir_label`` (a constructor argument, e.g. a label naming the session
a Job works for), else the Job's name. It is KEPT across the Jobs with the same key, so a Retry finds the
files of the crashed Job. A real cluster's emptyDir lives and dies with one pod: there a new Job
starts with an empty work directory.
Other emptyDirs map to a per-pod directory. Env values naming a mount path (e.g.
``WORKDIR=/work``) and the workingDir are rewritten to the host directory.

Deletion: pods carry the finalizer ``podrunner.testcluster.dev/process`` while their
process runs, so a deleted pod (directly, or by the garbage collector after a
foreground or background Job deletion) stays until the process has stopped: SIGTERM,
then SIGKILL after the grace period (``terminationGracePeriodSeconds``, capped by
``max_grace_seconds``), as a kubelet does. A deleted Job's process is stopped and its
pod deleted.

Pods that cannot start stay Pending with the status a real cluster shows: a missing Secret,
ConfigMap or key in the env -> container waiting ``CreateContainerConfigError`` with the
kubelet's message (``secret "x" not found``); a missing Secret of a ``secret`` volume
(``volumes``: files per key, ``items``, ``defaultMode``, only the container's user reads
them) -> ``ContainerCreating`` and a ``FailedMount`` Event; a ``nodeSelector`` the one node (labels
``NODE_LABELS``) does not match -> ``PodScheduled`` False, reason ``Unschedulable``.

Test hooks: ``executions`` (one ``Execution`` per started container), ``log`` (one line
per action), ``kill(job, signal)``, ``hold(prefix)`` (matching Jobs never start: "a Job
whose pod never runs"), ``wait_execution(job)``, ``wait_idle()``.
Memory limits (``resources.limits.memory``) are enforced by sampling the RSS of the
process tree: over the limit, the tree is SIGKILLed and the reason is ``OOMKilled``.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import kubernetes
import yaml
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from testcluster.podrunner import volumes
from testcluster.podrunner.envresolve import EnvResolutionError, expand, quantity, resolve_env
from testcluster.podrunner.kube import Conflict, Kube, api_client

logger = logging.getLogger("podrunner")

FINALIZER = "podrunner.testcluster.dev/process"
NODE_NAME = "podrunner"
NODE_LABELS = {"kubernetes.io/hostname": NODE_NAME, "kubernetes.io/os": "linux"}
"""The one node's labels: a pod whose nodeSelector asks for others is unschedulable."""
UNSCHEDULABLE = ("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 "
                 "nodes are available: 1 Preemption is not helpful for scheduling.")
_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"
WATCH_SECONDS = 30
"""Server-side timeout of one watch request; the watch is restarted after it."""
TOKEN_SECONDS = 3607
"""Lifetime of a container's token (a kubelet's default projected token lifetime)."""
MEMORY_SAMPLE_SECONDS = 0.1
BASE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TZ", "PYTHONPATH", "VIRTUAL_ENV", "COVERAGE_PROCESS_START")
"""Host variables a container inherits (a real container gets its image's env, not the host's)."""


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _iso(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclasses.dataclass
class Execution:
    """One container run: what the runner did, for assertions."""

    namespace: str
    job: str
    pod: str
    argv: list[str]
    env_names: list[str]
    workdir: Path
    log_path: Path
    started: datetime.datetime
    pid: int | None = None
    finished: datetime.datetime | None = None
    exit_code: int | None = None
    reason: str | None = None
    signals: list[int] = dataclasses.field(default_factory=list)
    """Signals the runner sent (kill(), deletion, memory limit), in order."""
    container: str = ""
    user: int | None = None
    """The UID the process ran as (None: the runner's own)."""
    mounts: dict[str, Path] = dataclasses.field(default_factory=dict)
    """The container's mount paths and the host directories the runner used for them."""
    kubeconfig: Path | None = None
    """The container's kubeconfig (its ServiceAccount token), None when it got no token."""
    sidecars: list[Execution] = dataclasses.field(default_factory=list)
    """The pod's native sidecars (initContainers with restartPolicy Always), one per start."""

    @property
    def running(self) -> bool:
        return self.finished is None

    def output(self) -> str:
        """The container's stdout and stderr (the pod log)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


@dataclasses.dataclass
class _Sidecar:
    """A native sidecar's process; restarted while the main container runs (restartPolicy Always)."""

    container: dict[str, Any]
    spawn: Callable[[], tuple[Execution, subprocess.Popen[bytes]]]
    popen: subprocess.Popen[bytes] | None = None


@dataclasses.dataclass
class _Process:
    execution: Execution
    popen: subprocess.Popen[bytes]
    job_uid: str
    memory_limit: int | None
    grace_seconds: float
    oom: bool = False
    stopping: bool = False
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    sidecars: list[_Sidecar] = dataclasses.field(default_factory=list)


class PodRunner:
    def __init__(self, kubeconfig: str | os.PathLike[str], workdirs: str | os.PathLike[str], *,
                 log_dir: str | os.PathLike[str] | None = None, python: str = sys.executable,
                 max_grace_seconds: float = 5.0, extra_env: dict[str, str] | None = None,
                 python_path: Sequence[str | os.PathLike[str]] = (), workdir_label: str | None = None) -> None:
        """``python_path``: directories put first on ``PYTHONPATH`` of a container whose interpreter is
        not the runner's (another UID's, see ``_python_for``): that interpreter reads none of the
        runner's site-packages, so the image's code must be found by path. ``workdir_label``: the Job
        label whose value names the ``work`` volume's directory (shared by the Jobs with that value)."""
        self.kubeconfig = Path(kubeconfig).resolve()
        self.workdirs = Path(workdirs).resolve()
        self._own_log_dir = log_dir is None
        self.log_dir = Path(log_dir).resolve() if log_dir else Path(tempfile.mkdtemp(prefix="podrunner-logs-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.scratch = Path(tempfile.mkdtemp(prefix="podrunner-pods-"))
        self.split_users = os.geteuid() == 0
        self._pythons: dict[int, str] = {}
        """Root: a container whose runAsUser differs from the pod's runs as that UID."""
        # The volumes containers of other UIDs share live under a traversable (not listable)
        # node directory; nothing else of the runner's is reachable by those UIDs.
        self.node = Path(tempfile.mkdtemp(prefix="podrunner-node-"))
        self.node.chmod(0o711)
        self.python = python
        self.max_grace_seconds = max_grace_seconds
        self.extra_env = dict(extra_env or {})
        self.python_path = [str(Path(p).resolve()) for p in python_path]
        self.workdir_label = workdir_label
        self.executions: list[Execution] = []
        self.log: list[str] = []
        self.held: list[str] = []
        """Names of the Jobs a hold kept from starting."""
        self.not_started: dict[str, str] = {}
        """Job name -> why its container could not start (e.g. CreateContainerConfigError)."""
        self._holds: set[str] = set()
        self._seen: dict[str, str] = {}  # job uid -> state ("held", "starting", "started", "deleted")
        self._procs: dict[str, _Process] = {}  # job uid -> process
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._busy = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watches: list[kubernetes.watch.Watch] = []
        self.api_client = api_client(self.kubeconfig)
        self.kube = Kube(self.api_client)
        self.core = kubernetes.client.CoreV1Api(self.api_client)
        self.batch = kubernetes.client.BatchV1Api(self.api_client)

    # Lifecycle.
    def start(self) -> PodRunner:
        """Start watching Jobs and Pods; returns once both watches are established."""
        ready = [threading.Event(), threading.Event()]
        for target, event in ((self._watch_jobs, ready[0]), (self._watch_pods, ready[1])):
            thread = threading.Thread(target=target, args=(event,), name=f"podrunner-{target.__name__}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)
        for event in ready:
            if not event.wait(10):
                raise TimeoutError("the pod runner could not list Jobs and Pods")
        self._note("started: watching batch/v1 jobs and v1 pods in all namespaces")
        return self

    def stop(self) -> None:
        """Kill every running process (SIGKILL: the cluster may be gone already) and stop watching."""
        self._stop.set()
        for watch in list(self._watches):
            watch.stop()
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            proc.stopping = True
            self._signal(proc, signal.SIGKILL, sidecars=True)
        for proc in procs:
            proc.done.wait(5)
        for thread in self._threads:
            thread.join(timeout=2)
        self.api_client.close()
        self._restore_workdirs()
        shutil.rmtree(self.scratch, ignore_errors=True)
        shutil.rmtree(self.node, ignore_errors=True)
        self._note("stopped")

    def __enter__(self) -> PodRunner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Test hooks.
    def hold(self, job_prefix: str) -> None:
        """Jobs whose name starts with ``job_prefix`` are never started (until ``unhold``)."""
        with self._lock:
            self._holds.add(job_prefix)

    def unhold(self, job_prefix: str) -> None:
        """Lift a hold; Jobs it kept waiting start now."""
        with self._lock:
            self._holds.discard(job_prefix)
            waiting = [uid for uid, state in self._seen.items() if state == "held"]
            for uid in waiting:
                del self._seen[uid]
        for job in self._list_jobs():
            if job["metadata"]["uid"] in waiting:
                self._on_job("ADDED", job)

    def kill(self, job: str, sig: int = signal.SIGKILL, *, namespace: str | None = None) -> Execution:
        """Send ``sig`` to the running container of ``job`` (its whole process tree)."""
        proc = self._running(job, namespace)
        self._note(f"kill {proc.execution.namespace}/{proc.execution.pod} with {signal.Signals(sig).name}")
        self._signal(proc, sig)
        return proc.execution

    def executions_of(self, job: str, namespace: str | None = None) -> list[Execution]:
        with self._lock:
            return [e for e in self.executions if e.job == job and namespace in (None, e.namespace)]

    def wait_execution(self, job: str, *, namespace: str | None = None, timeout: float = 60,
                       finished: bool = True) -> Execution:
        """The (latest) execution of ``job``, once it has started (and, by default, finished)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = self.executions_of(job, namespace)
                if found and (not finished or not found[-1].running):
                    return found[-1]
                if not found and job in self.not_started:
                    raise RuntimeError(f"job {job}: the container did not start: {self.not_started[job]}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    state = f"running: {found[-1].pod}" if found else "never started"
                    raise TimeoutError(f"job {job}: no {'finished ' if finished else ''}execution "
                                       f"within {timeout}s ({state})")
                self._changed.wait(remaining)

    def wait_idle(self, timeout: float = 60) -> None:
        """Until nothing is starting or running."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._busy or self._procs:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"pod runner still busy after {timeout}s: "
                                       f"{[p.execution.pod for p in self._procs.values()]}")
                self._changed.wait(remaining)

    # Watching.
    def _list_jobs(self) -> list[dict[str, Any]]:
        return self.kube.request("GET", "/apis/batch/v1/jobs").get("items") or []

    def _watch(self, ready: threading.Event, list_fn: Callable[..., Any],
               handle: Callable[[str, dict[str, Any]], None]) -> None:
        while not self._stop.is_set():
            try:
                response = list_fn(_preload_content=False)
                listed = json.loads(response.data)
                for item in listed.get("items") or []:
                    handle("ADDED", item)
                ready.set()
                version = listed["metadata"]["resourceVersion"]
                while not self._stop.is_set():
                    watch = kubernetes.watch.Watch()
                    self._watches.append(watch)
                    try:
                        # Plain JSON events: the typed models reject objects the API server accepts.
                        for event in watch.stream(list_fn, resource_version=version, timeout_seconds=WATCH_SECONDS,
                                                  allow_watch_bookmarks=True, deserialize=False):
                            obj = event["object"]
                            version = obj.get("metadata", {}).get("resourceVersion") or version
                            if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                                handle(event["type"], obj)
                    finally:
                        self._watches.remove(watch)
            except (ApiException, HTTPError, OSError, ValueError) as e:
                if self._stop.is_set():
                    return
                # 410 Gone or a dropped connection: list again (handlers are idempotent).
                logger.debug("watch restarts after %s", e)
                time.sleep(0.2)

    def _watch_jobs(self, ready: threading.Event) -> None:
        self._watch(ready, self.batch.list_job_for_all_namespaces, self._on_job)

    def _watch_pods(self, ready: threading.Event) -> None:
        self._watch(ready, self.core.list_pod_for_all_namespaces, self._on_pod)

    def _on_job(self, kind: str, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        uid = meta["uid"]
        deleting = kind == "DELETED" or bool(meta.get("deletionTimestamp"))
        with self._lock:
            state = self._seen.get(uid)
            if deleting:
                proc = self._procs.get(uid)
                if state != "deleted":
                    self._seen[uid] = "deleted"
                    if proc is not None:
                        self._note(f"job {meta['namespace']}/{meta['name']} deleted: stopping its pod")
                        threading.Thread(target=self._terminate, args=(proc, True), daemon=True).start()
                return
            if state is not None or _finished(job):
                return
            if any(meta["name"].startswith(p) for p in self._holds):
                self._seen[uid] = "held"
                self.held.append(meta["name"])
                self._note(f"job {meta['namespace']}/{meta['name']} held: not starting it")
                return
            self._seen[uid] = "starting"
            self._busy += 1
        threading.Thread(target=self._launch, args=(job,), name=f"launch-{meta['name']}", daemon=True).start()

    def _on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        if kind == "DELETED" or not meta.get("deletionTimestamp"):
            return
        with self._lock:
            proc = next((p for p in self._procs.values() if p.execution.pod == meta["name"]
                         and p.execution.namespace == meta.get("namespace")), None)
        if proc is not None and not proc.stopping:
            self._note(f"pod {meta.get('namespace')}/{meta['name']} is being deleted: stopping it")
            threading.Thread(target=self._terminate, args=(proc, False), daemon=True).start()

    # Starting.
    def _launch(self, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        try:
            self._start_pod(job)
        except Exception as e:  # one broken Job must not stop the runner: report and carry on
            self._note(f"job {meta['namespace']}/{meta['name']}: could not start: {type(e).__name__}: {e}")
            logger.exception("launch failed")
            with self._lock:
                self.not_started[meta["name"]] = f"{type(e).__name__}: {e}"
        finally:
            with self._changed:
                self._busy -= 1
                self._changed.notify_all()

    def _start_pod(self, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
        template = (job.get("spec") or {}).get("template") or {}
        pod_name = f"{name}-{''.join(random.choices(_SUFFIX_CHARS, k=5))}"
        labels = {**((template.get("metadata") or {}).get("labels") or {}), "job-name": name,
                  "batch.kubernetes.io/job-name": name, "controller-uid": uid,
                  "batch.kubernetes.io/controller-uid": uid}
        pod_body = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name, "namespace": namespace, "labels": labels, "finalizers": [FINALIZER],
                         "annotations": (template.get("metadata") or {}).get("annotations") or {},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid,
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": dict(template.get("spec") or {}),
        }
        selector = pod_body["spec"].get("nodeSelector") or {}
        schedulable = all(NODE_LABELS.get(k) == v for k, v in selector.items())
        if schedulable:
            pod_body["spec"]["nodeName"] = NODE_NAME
        pod = self.kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod_body)
        started = _now()
        self._patch_job(namespace, name, {"startTime": _iso(started), "active": 1, "ready": 0})
        self._note(f"job {namespace}/{name}: created pod {pod_name}")
        if not schedulable:
            # As the scheduler reports it: the pod stays Pending, unbound, with PodScheduled False.
            self._patch_pod(namespace, pod_name, {"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": UNSCHEDULABLE,
                "lastProbeTime": None, "lastTransitionTime": _iso(started)}]})
            self._note(f"pod {namespace}/{pod_name}: Unschedulable (nodeSelector {selector})")
            self._never_started(uid, name, namespace, pod_name, f"Unschedulable: {UNSCHEDULABLE}")
            return

        container = pod["spec"]["containers"][0]
        sidecars = [c for c in pod["spec"].get("initContainers") or [] if c.get("restartPolicy") == "Always"]
        if len(sidecars) != len(pod["spec"].get("initContainers") or []):
            raise ValueError("init containers that run to completion are not supported (native sidecars are)")
        envs: dict[str, dict[str, str]] = {}
        for spec in [*sidecars, container]:
            try:
                envs[spec["name"]] = resolve_env(spec, pod, secrets=self._lookup("secret"),
                                                 configmaps=self._lookup("configmap"))
            except EnvResolutionError as e:
                # As a kubelet reports it: imageID is "" (never absent) while the container waits.
                key = "containerStatuses" if spec is container else "initContainerStatuses"
                self._patch_pod(namespace, pod_name, {"phase": "Pending", key: [{
                    "name": spec["name"], "image": spec.get("image", ""), "imageID": "", "ready": False,
                    "restartCount": 0, "started": False,
                    "state": {"waiting": {"reason": e.reason, "message": str(e)}}}]})
                self._note(f"pod {namespace}/{pod_name}: {e.reason}: {e}")
                self._never_started(uid, name, namespace, pod_name, f"{e.reason}: {e}")
                return

        # Secret volumes first, as a kubelet mounts them before any container starts.
        secret_base = self._secret_volumes(namespace, pod_name)
        try:
            for spec in [*sidecars, container]:
                volumes.materialize(pod, spec, self._lookup("secret"), secret_base)
        except volumes.VolumeMountError as e:
            self._mount_failed(pod, container, e)
            return
        pod_volumes = {**self._volumes(pod, job),
                       **{v["name"]: secret_base / v["name"] for v in pod["spec"].get("volumes") or []
                          if "secret" in v and (secret_base / v["name"]).exists()}}
        token_path: list[Path] = []  # the pod's token, asked for once, by the first container that gets one

        def kubeconfig_for(spec: dict[str, Any]) -> Path | None:
            if not _gets_token(pod, spec):
                return None
            if not token_path:
                token_path.append(self._pod_kubeconfig(pod))
            return token_path[0]

        # Native sidecars first, as a kubelet starts them (it does not wait: no startup probe).
        runs: list[_Sidecar] = []
        sidecar_executions: list[Execution] = []
        for spec in sidecars:
            def spawn(spec: dict[str, Any] = spec) -> tuple[Execution, subprocess.Popen[bytes]]:
                return self._spawn(pod, job, spec, envs[spec["name"]], pod_volumes, kubeconfig_for(spec), started)
            sidecar = _Sidecar(spec, spawn)
            execution, sidecar.popen = spawn()
            runs.append(sidecar)
            sidecar_executions.append(execution)
        execution, popen = self._spawn(pod, job, container, envs[container["name"]], pod_volumes,
                                       kubeconfig_for(container), started)
        execution.sidecars.extend(sidecar_executions)
        limits = (container.get("resources") or {}).get("limits") or {}
        proc = _Process(execution, popen, uid, int(quantity(limits["memory"])) if "memory" in limits else None,
                        min(float(pod["spec"].get("terminationGracePeriodSeconds", 30)), self.max_grace_seconds),
                        sidecars=runs)
        with self._changed:
            self._procs[uid] = proc
            self.executions.append(execution)
            deleted = self._seen.get(uid) == "deleted"
            self._seen[uid] = "deleted" if deleted else "started"
            self._changed.notify_all()
        self._patch_pod(namespace, pod_name, {
            "phase": "Running", "startTime": _iso(started), "hostIP": "127.0.0.1", "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}],
            "conditions": _pod_conditions(True, started),
            "initContainerStatuses": [_running_status(r.container, r.popen, started) for r in runs if r.popen],
            "containerStatuses": [_running_status(container, popen, started)]})
        self._patch_job(namespace, name, {"ready": 1})
        threading.Thread(target=self._wait, args=(proc, container), name=f"wait-{pod_name}", daemon=True).start()
        for sidecar in runs:
            threading.Thread(target=self._keep_sidecar, args=(proc, sidecar), name=f"sidecar-{pod_name}",
                             daemon=True).start()
        if proc.memory_limit is not None:
            threading.Thread(target=self._watch_memory, args=(proc,), daemon=True).start()
        if deleted:  # the Job was deleted while we were starting it
            self._terminate(proc, True)

    def _mount_failed(self, pod: dict[str, Any], container: dict[str, Any], error: volumes.VolumeMountError) -> None:
        """As a kubelet: the pod stays Pending (ContainerCreating) with a FailedMount Event."""
        namespace, pod_name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        job = pod["metadata"]["labels"]["job-name"]
        self._patch_pod(namespace, pod_name, {"phase": "Pending",
                                              "containerStatuses": [volumes.waiting_status(container)]})
        with contextlib.suppress(ApiException):
            self.kube.request("POST", f"/api/v1/namespaces/{namespace}/events",
                              body=volumes.failed_mount_event(pod, error, NODE_NAME))
        self._note(f"pod {namespace}/{pod_name}: {volumes.EVENT_REASON}: {error}")
        self._never_started(pod["metadata"]["labels"]["controller-uid"], job, namespace, pod_name,
                            f"{volumes.EVENT_REASON}: {error}")

    def _never_started(self, job_uid: str, job: str, namespace: str, pod_name: str, why: str) -> None:
        """The Job's pod stays Pending for good (its status says why): recorded once, and the pod
        is deletable (no process to wait for)."""
        with self._lock:
            self._seen[job_uid] = "failed-to-start"
            self.not_started[job] = why
        self._remove_finalizer(namespace, pod_name)

    def _secret_volumes(self, namespace: str, pod_name: str) -> Path:
        """Where a pod's secret volumes are written (and removed when the pod ends)."""
        return self.scratch / namespace / pod_name / "secret-volumes"

    def _spawn(self, pod: dict[str, Any], job: dict[str, Any], container: dict[str, Any], env: dict[str, str],
               pod_volumes: dict[str, Path], kubeconfig: Path | None,
               started: datetime.datetime) -> tuple[Execution, subprocess.Popen[bytes]]:
        """One container's process: its own env (resolved from its spec, paths mapped to the host),
        its mounts, its token if it mounts one, and its UID when it asks for one of its own."""
        namespace, pod_name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        mounts = {m["mountPath"].rstrip("/") or "/": pod_volumes[m["name"]]
                  for m in container.get("volumeMounts") or [] if m["name"] in pod_volumes}
        workdir = _host_path(container.get("workingDir") or "", mounts) or self._shared_work_dir(job)
        real = {k: Path(os.path.realpath(v)) for k, v in mounts.items()}
        env = {k: str(p) if (p := _host_path(v, real)) else v for k, v in env.items()}
        tmp = real.get("/tmp") or self.scratch / namespace / pod_name / container["name"] / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        # A real container gets its image's env, not the host's: the few variables that make the
        # image's python run, then the pod spec's.
        process_env = {k: os.environ[k] for k in BASE_ENV_KEYS if k in os.environ}
        process_env.update(HOME=str(workdir), HOSTNAME=pod_name, TMPDIR=str(tmp), PYTHONUNBUFFERED="1",
                           **self.extra_env)
        if kubeconfig is not None:
            process_env["KUBECONFIG"] = str(kubeconfig)
        process_env.update(env)
        argv = [*(container.get("command") or []), *(container.get("args") or [])]
        if not argv:
            raise ValueError(f"container {container['name']} has no command (image entrypoints are unknown here)")
        argv = [expand(a, env) for a in argv]
        user = self._user_of(pod, container)
        if argv[0] in ("python", "python3"):
            argv[0] = self._python_for(user[0], user[1]) if user else self.python
            if argv[0] != self.python:
                # That interpreter has none of the runner's site-packages (an editable install
                # included): the image's code is found by path (``python_path``).
                process_env["PYTHONPATH"] = os.pathsep.join(
                    p for p in (*self.python_path, process_env.get("PYTHONPATH")) if p)
        log_path = self.log_dir / f"{namespace}_{pod_name}{'' if container is pod['spec']['containers'][0] else '_' + container['name']}.log"
        workdir.mkdir(parents=True, exist_ok=True)
        execution = Execution(namespace=namespace, job=job["metadata"]["name"], pod=pod_name, argv=argv,
                              env_names=sorted(env), workdir=workdir, log_path=log_path, started=started,
                              container=container["name"], user=user[0] if user else None, mounts=mounts,
                              kubeconfig=kubeconfig)
        ids: dict[str, Any] = {"user": user[0], "group": user[1], "extra_groups": user[2]} if user else {}
        with open(log_path, "ab") as log_file:
            popen = subprocess.Popen(argv, cwd=os.path.realpath(workdir), env=process_env, stdin=subprocess.DEVNULL,
                                     stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True, **ids)
        execution.pid = popen.pid
        self._note(f"pod {namespace}/{pod_name}: container {container['name']} started pid {popen.pid}"
                   f"{f' as uid {user[0]}' if user else ''}: {' '.join(argv)}")
        return execution, popen

    def _user_of(self, pod: dict[str, Any], container: dict[str, Any]) -> tuple[int, int, list[int]] | None:
        """(uid, gid, supplementary groups) for a container that asks for a UID other than the pod's,
        when the runner is root; None: the runner's own (the pod's UID plays the runner's)."""
        pod_ctx = pod["spec"].get("securityContext") or {}
        ctx = container.get("securityContext") or {}
        uid = ctx.get("runAsUser", pod_ctx.get("runAsUser"))
        if not self.split_users or uid is None or uid == pod_ctx.get("runAsUser") or uid == 0:
            return None
        gid = ctx.get("runAsGroup", pod_ctx.get("runAsGroup", uid))
        groups = [g for g in [pod_ctx.get("fsGroup"), *(pod_ctx.get("supplementalGroups") or [])] if g is not None]
        return int(uid), int(gid), [int(g) for g in groups]

    def _python_for(self, uid: int, gid: int) -> str:
        """An interpreter ``uid`` may run: the runner's, else the system's python3 (the runner's may
        live under an unreachable home, e.g. pyenv in /root). Such a container gets no site-packages
        of the runner's: fine for the tools process, which uses the standard library only."""
        with self._lock:
            if uid in self._pythons:
                return self._pythons[uid]
        for candidate in dict.fromkeys([self.python, shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")]):
            with contextlib.suppress(OSError):
                if candidate and subprocess.run([candidate, "-c", "pass"], user=uid, group=gid, capture_output=True,
                                                cwd="/", check=False).returncode == 0:
                    break
        else:
            raise RuntimeError(f"no python interpreter that uid {uid} may run (tried {self.python} and python3)")
        with self._lock:
            self._pythons[uid] = candidate
        return candidate

    def _keep_sidecar(self, proc: _Process, sidecar: _Sidecar) -> None:
        """restartPolicy Always: a sidecar that exits while the main container runs starts again."""
        while sidecar.popen is not None:
            code = sidecar.popen.wait()
            with self._lock:
                if proc.stopping or proc.done.is_set() or proc.popen.poll() is not None:
                    return
            self._note(f"pod {proc.execution.namespace}/{proc.execution.pod}: sidecar "
                       f"{sidecar.container['name']} exited {code}: restarting it")
            time.sleep(1.0)  # a kubelet backs off too
            with self._lock:
                if proc.stopping or proc.popen.poll() is not None:
                    return
            execution, sidecar.popen = sidecar.spawn()
            with self._changed:
                proc.execution.sidecars.append(execution)

    def _stop_sidecars(self, proc: _Process) -> None:
        """After the main container: SIGTERM each sidecar (reverse order), SIGKILL after the grace period."""
        for sidecar in reversed(proc.sidecars):
            popen = sidecar.popen
            if popen is None or popen.poll() is not None:
                continue
            for pid in [*_descendants(popen.pid), popen.pid]:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)
            try:
                popen.wait(proc.grace_seconds)
            except subprocess.TimeoutExpired:
                for pid in [*_descendants(popen.pid), popen.pid]:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                popen.wait()
            with self._changed:
                for ex in proc.execution.sidecars:
                    if ex.pid == popen.pid:
                        ex.finished, ex.exit_code = _now(), popen.returncode
    def _pod_kubeconfig(self, pod: dict[str, Any]) -> Path:
        """A kubeconfig with a token for the pod's ServiceAccount, bound to the pod (the projected token)."""
        meta, spec = pod["metadata"], pod["spec"]
        path = self.scratch / meta["namespace"] / meta["name"] / "kubeconfig"
        if path.exists():  # one token per pod, as one kubelet-projected volume
            return path
        config = yaml.safe_load(self.kubeconfig.read_text())
        context = next(c for c in config["contexts"] if c["name"] == config["current-context"])["context"]
        account = spec.get("serviceAccountName") or "default"
        issued = self.kube.request(
            "POST", f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{account}/token",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                  "spec": {"expirationSeconds": TOKEN_SECONDS,
                           "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": meta["name"],
                                              "uid": meta["uid"]}}})
        user = {"token": issued["status"]["token"]}
        cluster = next(c for c in config["clusters"] if c["name"] == context["cluster"])
        own = {"apiVersion": "v1", "kind": "Config", "clusters": [cluster],
               "users": [{"name": "pod", "user": user}],
               "contexts": [{"name": "pod", "context": {"cluster": cluster["name"], "user": "pod",
                                                        "namespace": meta["namespace"]}}],
               "current-context": "pod"}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(yaml.safe_dump(own))
        return path

    def _volumes(self, pod: dict[str, Any], job: dict[str, Any]) -> dict[str, Path]:
        """Volume name -> host directory, for the pod's emptyDir volumes and projected token volumes.

        A volume a container of another UID mounts is group-shared as with fsGroup (group = the
        pod's fsGroup, setgid, rwx for owner and group); any other stays the runner's alone (0700).
        """
        spec, meta = pod["spec"], pod["metadata"]
        containers = [*(spec.get("initContainers") or []), *spec["containers"]]
        others = [c for c in containers if self._user_of(pod, c)]
        shared = {m["name"] for c in others for m in c.get("volumeMounts") or []}
        group = (spec.get("securityContext") or {}).get("fsGroup")
        if group is None and others:
            group = self._user_of(pod, others[0])[1]  # type: ignore[index]
        pod_dir = self.node / meta["namespace"] / meta["name"]
        found: dict[str, Path] = {}
        for volume in spec.get("volumes") or []:
            name = volume["name"]
            if "emptyDir" in volume:
                path = self._work_volume(job) if name == "work" else pod_dir / name
            elif _token_volume(volume):
                path = pod_dir / name
            else:
                continue  # only emptyDir and token volumes exist on this "node"
            if path.is_relative_to(self.node):
                _make_dirs(path, self.node)
            else:
                path.mkdir(parents=True, exist_ok=True)
            if name in shared and group is not None:
                os.chown(path, -1, group)
                path.chmod(0o2770)
            elif self.split_users:
                path.chmod(0o700)
            if _token_volume(volume):
                self._write_token_volume(pod, volume, path)
            found[name] = self._shared_work_dir(job) if name == "work" else path
        return found

    def _work_volume(self, job: dict[str, Any]) -> Path:
        """The shared work directory: ``<workdirs>/<ns>/<key>``, kept across the Jobs with that key. When
        containers may run as other UIDs it lives in the node directory (reachable by them),
        ``<workdirs>/<ns>/<key>`` a symlink to it until the runner stops."""
        visible = self._shared_work_dir(job)
        if not self.split_users:
            return visible
        real = self.node / "work" / visible.relative_to(self.workdirs)
        if visible.is_symlink():
            if Path(os.path.realpath(visible)) == real:
                return real
            visible.unlink()  # a dangling link of an earlier runner
        _make_dirs(real, self.node)
        if visible.is_dir():  # an earlier runner's files: they move along
            for child in visible.iterdir():
                shutil.move(str(child), real / child.name)
            visible.rmdir()
        visible.parent.mkdir(parents=True, exist_ok=True)
        visible.symlink_to(real, target_is_directory=True)
        return real

    def _restore_workdirs(self) -> None:
        """The work directories come back to ``<workdirs>`` (the node directory goes with the runner)."""
        root = self.node / "work"
        if not root.is_dir():
            return
        for real in sorted(p for p in root.glob("*/*") if p.is_dir()):
            visible = self.workdirs / real.relative_to(root)
            if visible.is_symlink() and Path(os.path.realpath(visible)) == real:
                visible.unlink()
                shutil.move(str(real), visible)

    def _write_token_volume(self, pod: dict[str, Any], volume: dict[str, Any], path: Path) -> None:
        """As the kubelet fills a projected kube-api-access volume: the pod-bound token, the CA, the namespace."""
        kubeconfig = yaml.safe_load(self._pod_kubeconfig(pod).read_text())
        files = {"token": kubeconfig["users"][0]["user"]["token"], "namespace": pod["metadata"]["namespace"]}
        ca = kubeconfig["clusters"][0]["cluster"].get("certificate-authority-data")
        if ca:
            files["ca.crt"] = base64.b64decode(ca).decode()
        for source in volume["projected"].get("sources") or []:
            if "serviceAccountToken" in source:
                files[source["serviceAccountToken"].get("path", "token")] = files.pop("token")
        for name, text in files.items():
            (path / name).write_text(text)
            (path / name).chmod(0o600)

    def _shared_work_dir(self, job: dict[str, Any]) -> Path:
        meta = job["metadata"]
        key = (meta.get("labels") or {}).get(self.workdir_label or "") or meta["name"]
        return self.workdirs / meta["namespace"] / key

    def _lookup(self, kind: str) -> Callable[[str, str], dict[str, Any] | None]:
        plural = "secrets" if kind == "secret" else "configmaps"

        def lookup(namespace: str, name: str) -> dict[str, Any] | None:
            return self.kube.read(f"/api/v1/namespaces/{namespace}/{plural}/{name}")

        return lookup

    # Stopping.
    def _signal(self, proc: _Process, sig: int, *, sidecars: bool = False) -> None:
        if proc.done.is_set():
            return
        proc.execution.signals.append(sig)
        pids = [proc.popen.pid, *(s.popen.pid for s in proc.sidecars if sidecars and s.popen)]
        for pid in [p for top in pids for p in [*_descendants(top), top]]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def _terminate(self, proc: _Process, delete_pod: bool) -> None:
        """As a kubelet stops a pod: SIGTERM, SIGKILL after the grace period; then the pod goes.
        Once per process: a Job deletion and its pod's deletion both lead here."""
        with self._lock:
            first = not proc.stopping
            proc.stopping = True
        if first:
            self._signal(proc, signal.SIGTERM)
            if not proc.done.wait(proc.grace_seconds):
                self._note(f"pod {proc.execution.namespace}/{proc.execution.pod}: grace period over, SIGKILL")
                self._signal(proc, signal.SIGKILL)
        proc.done.wait(10)
        if delete_pod:
            with contextlib.suppress(ApiException):
                self.kube.request("DELETE", f"/api/v1/namespaces/{proc.execution.namespace}/pods/"
                                  f"{proc.execution.pod}", body={"gracePeriodSeconds": 0})

    def _watch_memory(self, proc: _Process) -> None:
        assert proc.memory_limit is not None
        while not proc.done.wait(MEMORY_SAMPLE_SECONDS):
            rss = sum(_rss(pid) for pid in [proc.popen.pid, *_descendants(proc.popen.pid)])
            if rss > proc.memory_limit:
                proc.oom = True
                self._note(f"pod {proc.execution.namespace}/{proc.execution.pod}: RSS {rss} over the memory "
                           f"limit {proc.memory_limit}: OOMKilled")
                self._signal(proc, signal.SIGKILL)
                return

    def _wait(self, proc: _Process, container: dict[str, Any]) -> None:
        code = proc.popen.wait()
        ex = proc.execution
        finished = _now()
        exit_code = code if code >= 0 else 128 - code
        reason = "OOMKilled" if proc.oom else ("Completed" if code == 0 else "Error")
        with self._changed:
            ex.exit_code, ex.reason = exit_code, reason
        # The pod's phase is the main container's; its sidecars stop once it has exited.
        self._stop_sidecars(proc)
        self._note(f"pod {ex.namespace}/{ex.pod}: exited {exit_code} ({reason})")
        try:
            self._patch_pod(ex.namespace, ex.pod, {
                "phase": "Succeeded" if code == 0 else "Failed",
                "conditions": _pod_conditions(False, finished),
                "containerStatuses": [{"name": container["name"], "image": container.get("image", ""),
                                       "imageID": "", "containerID": f"podrunner://{ex.pid}", "ready": False,
                                       "restartCount": 0, "started": False,
                                       "state": {"terminated": {"exitCode": exit_code, "reason": reason,
                                                                "startedAt": _iso(ex.started),
                                                                "finishedAt": _iso(finished),
                                                                "containerID": f"podrunner://{ex.pid}"}}}]})
            self._finish_job(proc, code == 0, finished)
            self._remove_finalizer(ex.namespace, ex.pod)
        except (ApiException, HTTPError, OSError) as e:  # the cluster may be stopping: the record stays right
            self._note(f"pod {ex.namespace}/{ex.pod}: status update failed: {e}")
        finally:
            volumes.remove(self._secret_volumes(ex.namespace, ex.pod))
            with self._changed:
                ex.finished = finished
                self._procs.pop(proc.job_uid, None)
                proc.done.set()
                self._changed.notify_all()

    def _finish_job(self, proc: _Process, succeeded: bool, at: datetime.datetime) -> None:
        ex = proc.execution
        stamp = _iso(at)
        if succeeded:
            conditions = [
                {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                 "message": "Reached expected number of succeeded pods", "lastProbeTime": stamp,
                 "lastTransitionTime": stamp},
                {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                 "message": "Reached expected number of succeeded pods", "lastProbeTime": stamp,
                 "lastTransitionTime": stamp}]
            status = {"active": 0, "ready": 0, "succeeded": 1, "completionTime": stamp, "conditions": conditions}
        else:
            conditions = [
                {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded",
                 "message": "Job has reached the specified backoff limit", "lastProbeTime": stamp,
                 "lastTransitionTime": stamp},
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                 "message": "Job has reached the specified backoff limit", "lastProbeTime": stamp,
                 "lastTransitionTime": stamp}]
            status = {"active": 0, "ready": 0, "failed": 1, "conditions": conditions}
        with self._lock:
            deleted = self._seen.get(proc.job_uid) == "deleted"
        if not deleted:
            self._patch_job(ex.namespace, ex.job, status)
            self._note(f"job {ex.namespace}/{ex.job}: {'Complete' if succeeded else 'Failed'}")

    # API helpers (each write is idempotent: absolute values; 404 means the object is gone).
    def _merge(self, path: str, body: dict[str, Any]) -> None:
        try:
            self.kube.request("PATCH", path, body=body, content_type="application/merge-patch+json")
        except ApiException as e:
            if e.status != 404:
                raise

    def _patch_job(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self._merge(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}/status", {"status": status})

    def _patch_pod(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self._merge(f"/api/v1/namespaces/{namespace}/pods/{name}/status", {"status": status})

    def _remove_finalizer(self, namespace: str, name: str) -> None:
        for _ in range(5):
            try:
                pod = self.kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
            except ApiException as e:
                if e.status == 404:
                    return
                raise
            finalizers = [f for f in pod["metadata"].get("finalizers") or [] if f != FINALIZER]
            try:
                self.kube.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}", body={"metadata": {
                    "finalizers": finalizers or None, "resourceVersion": pod["metadata"]["resourceVersion"]}},
                    content_type="application/merge-patch+json")
                return
            except Conflict:
                continue  # the pod changed since our read (a status update): read it again
            except ApiException as e:
                if e.status == 404:
                    return
                raise

    def _running(self, job: str, namespace: str | None) -> _Process:
        with self._lock:
            for proc in self._procs.values():
                if proc.execution.job == job and namespace in (None, proc.execution.namespace):
                    return proc
        raise LookupError(f"job {job} has no running container")

    def _note(self, line: str) -> None:
        stamped = f"{_now().strftime('%H:%M:%S.%f')[:-3]} {line}"
        with self._lock:
            self.log.append(stamped)
        logger.info("%s", line)
        with contextlib.suppress(OSError), open(self.log_dir / "podrunner.log", "a") as f:
            f.write(stamped + "\n")


def _finished(job: dict[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)


def _pod_conditions(ready: bool, at: datetime.datetime) -> list[dict[str, Any]]:
    stamp = _iso(at)
    value = "True" if ready else "False"
    return [{"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp},
            {"type": "Initialized", "status": "True", "lastTransitionTime": stamp},
            {"type": "ContainersReady", "status": value, "lastTransitionTime": stamp},
            {"type": "Ready", "status": value, "lastTransitionTime": stamp}]


def _token_volume(volume: dict[str, Any]) -> bool:
    return any("serviceAccountToken" in source for source in (volume.get("projected") or {}).get("sources") or [])


def _gets_token(pod: dict[str, Any], container: dict[str, Any]) -> bool:
    """A container gets the pod's token when the kubelet automounts it (into every container) or
    when it mounts a projected serviceAccountToken volume itself."""
    if pod["spec"].get("automountServiceAccountToken") is not False:
        return True
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    return any(_token_volume(volumes.get(m["name"]) or {}) for m in container.get("volumeMounts") or [])


def _make_dirs(path: Path, top: Path) -> None:
    """``path`` and its parents below ``top``: parents traversable by any UID, not listable."""
    path.mkdir(parents=True, exist_ok=True)
    for parent in path.relative_to(top).parents:
        if parent != Path("."):
            (top / parent).chmod(0o711)


def _running_status(container: dict[str, Any], popen: subprocess.Popen[bytes],
                    started: datetime.datetime) -> dict[str, Any]:
    return {"name": container["name"], "image": container.get("image", ""), "imageID": "",
            "containerID": f"podrunner://{popen.pid}", "ready": True, "restartCount": 0, "started": True,
            "state": {"running": {"startedAt": _iso(started)}}}


def _host_path(value: str, mounts: dict[str, Path]) -> Path | None:
    """The host path of a container path under one of the mounts (longest mount first)."""
    for mount in sorted(mounts, key=len, reverse=True):
        if value == mount or value.startswith(mount.rstrip("/") + "/"):
            return mounts[mount] / value[len(mount):].lstrip("/")
    return None


def _children(pid: int) -> Iterator[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            yield from (int(p) for p in f.read().split())
    except OSError:
        return


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in _children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0

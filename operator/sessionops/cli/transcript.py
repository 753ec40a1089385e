"""``kubectl sessionops transcript``: a turn's (or a whole session's) steps, read from the
run's AgentTranscript chunks, and followed through the watch API (no polling)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import yaml
from rich.console import Console

from sessionops import GROUP, VERSION
from sessionops.api.names import RUN_LABEL, SESSION_LABEL
from sessionops.cli.client import INPUTS, REQUEST_TIMEOUT, RUNS, SESSIONS, Kube
from sessionops.cli.errors import EXIT_NOT_FOUND, EXIT_OK, EXIT_TIMEOUT, CliError
from sessionops.views import InputView, RunView
from sessionops.views.transcript import steps_in_order

TRANSCRIPTS = "agenttranscripts"
EXCERPT = 200
"""Characters of a tool result shown per line (``-o json`` prints it whole, as stored)."""
DECIDED = {"Approve": "approved", "Reject": "rejected"}
WATCH_ROUND = 5
"""Seconds of one watch request; between rounds the run's phase is re-read (did it end?)."""


def runs_of(kube: Kube, ref: str) -> tuple[str | None, list[dict[str, Any]]]:
    """(session, runs in turn order) for a run name or a session name."""
    run = kube.find(RUNS, ref)
    if run is not None:
        return None, [run]
    if kube.find(SESSIONS, ref) is None:
        raise CliError(f'AgentRun "{ref}" not found in namespace {kube.namespace} (nor a session of that name)',
                       EXIT_NOT_FOUND)
    return ref, sorted(kube.list(RUNS, ref), key=lambda r: r["metadata"].get("creationTimestamp") or "")


def steps_of(chunks: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [dict(s) for s in steps_in_order(chunks)]


def read(kube: Kube, run: dict[str, Any]) -> list[dict[str, Any]]:
    name = run["metadata"]["name"]
    result = kube.api.list_namespaced_custom_object(GROUP, VERSION, kube.namespace, TRANSCRIPTS,
                                                    label_selector=f"{RUN_LABEL}={name}",
                                                    _request_timeout=REQUEST_TIMEOUT)
    # A cancelled turn's closed calls are stored steps too: the cancellation appends them.
    return steps_of(result.get("items") or [])


def _args(args: dict[str, Any] | None) -> str:
    return " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in (args or {}).items())


def _one_line(text: str | None, limit: int | None = None) -> str:
    text = (text or "").replace("\n", "\\n")
    return text if limit is None or len(text) <= limit else text[:limit] + "..."


def line(step: dict[str, Any]) -> str:
    """One step as a line: time, segment, kind and what matters for it."""
    at = (step.get("at") or "")[11:19]
    head = f"{at} [{step.get('segment') or '-'}]"
    kind, tool = step["kind"], step.get("tool") or ""
    usage = step.get("usage")
    tokens = f" ({usage['inputTokens']} in / {usage['outputTokens']} out tokens)" if usage else ""
    body = {
        "UserMessage": lambda: f"user: {_one_line(step.get('text'))}",
        "Steer": lambda: f"steer: {_one_line(step.get('text'))}",
        "AssistantMessage": lambda: f"assistant: {_one_line(step.get('text'))}{tokens}",
        "ToolCall": lambda: f"call {tool} {_args(step.get('args'))}",
        "Decision": lambda: f"{DECIDED.get(step.get('status') or '', step.get('status'))} {tool} "
                            f"by {step.get('decidedBy') or '?'}"
                            + (f": {step['text']}" if step.get("text") else ""),
        "ToolResult": lambda: f"result {tool} ({step.get('status')}): {_one_line(step.get('text'), EXCERPT)}",
        "Question": lambda: f"question {_args(step.get('args'))}",
        "Answer": lambda: f"answer by {step.get('decidedBy') or '?'}: {_one_line(step.get('text'))}",
        "Child": lambda: f"child ({step.get('status')}): {_one_line(step.get('text'), EXCERPT)}",
        "Wait": lambda: _one_line(step.get("text")),
        "FinalAnswer": lambda: f"final answer: {_one_line(step.get('text'))}{tokens}",
    }.get(kind, lambda: kind)()
    return f"{head} {body}"


def document(run: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    view = RunView(run)
    return {"run": view.name, "session": view.session_name, "phase": view.phase, "usage": view.usage or None,
            "steps": steps}


def show(kube: Kube, out: Console, ref: str, output: str | None) -> int:
    _, runs = runs_of(kube, ref)
    docs = [document(run, read(kube, run)) for run in runs]
    if output == "json":
        out.print(json.dumps(docs if len(docs) != 1 else docs[0], indent=2, ensure_ascii=False))
    elif output == "yaml":
        out.print(yaml.safe_dump(docs if len(docs) != 1 else docs[0], sort_keys=False, allow_unicode=True).rstrip())
    else:
        for doc in docs:
            out.print(f"turn {doc['run']} ({doc['phase']})")
            for step in doc["steps"]:
                out.print(f"  {line(step)}")
    return EXIT_OK


def follow(kube: Kube, out: Console, ref: str, *, timeout: float | None,
           clock: Callable[[], float] | None = None) -> int:
    """Print steps as the worker publishes them, through watch events on the transcript
    chunks, until the run (or, for a session, its latest run) has ended."""
    import time

    from kubernetes import watch

    now = clock or time.monotonic
    deadline = None if timeout is None else now() + timeout
    session, runs = runs_of(kube, ref)
    selector = f"{SESSION_LABEL}={session}" if session else f"{RUN_LABEL}={runs[0]['metadata']['name']}"
    printed: set[str] = set()
    chunks: dict[str, dict[str, Any]] = {}

    def emit() -> None:
        for step in steps_of(chunks.values()):
            if step["id"] not in printed:
                printed.add(step["id"])
                out.print(line(step))

    listed = kube.api.list_namespaced_custom_object(GROUP, VERSION, kube.namespace, TRANSCRIPTS,
                                                    label_selector=selector, _request_timeout=REQUEST_TIMEOUT)
    for c in listed.get("items") or []:
        chunks[c["metadata"]["name"]] = c
    emit()
    version = listed["metadata"].get("resourceVersion")
    while True:
        if _ended(kube, session, runs):
            emit()
            return EXIT_OK
        if deadline is not None and now() >= deadline:
            return EXIT_TIMEOUT
        round_seconds = WATCH_ROUND if deadline is None else max(1, min(WATCH_ROUND, int(deadline - now()) + 1))
        stream = watch.Watch().stream(kube.api.list_namespaced_custom_object, GROUP, VERSION, kube.namespace,
                                      TRANSCRIPTS, label_selector=selector, resource_version=version,
                                      timeout_seconds=round_seconds, allow_watch_bookmarks=True)
        for event in stream:
            obj = event["object"]
            version = obj["metadata"].get("resourceVersion") or version
            if event["type"] in ("ADDED", "MODIFIED"):
                chunks[obj["metadata"]["name"]] = obj
                emit()


def _ended(kube: Kube, session: str | None, runs: list[dict[str, Any]]) -> bool:
    """The followed run has a final phase or waits for an answer nobody has sent yet (nothing
    happens until then). A waitpoint already answered (say, just approved) is not an end: the
    operator has not resumed the run yet."""
    if session is not None:
        current = kube.list(RUNS, session)
        if not current:
            return False
        latest = max(current, key=lambda r: r["metadata"].get("creationTimestamp") or "")
    else:
        latest = kube.get(RUNS, runs[0]["metadata"]["name"])
    view = RunView(latest)
    if view.terminal:
        return True
    return view.phase == "Waiting" and not _answered(kube, latest, view.waitpoint_id)


def _answered(kube: Kube, run: dict[str, Any], waitpoint: str | None) -> bool:
    """A Resume input for the run's current waitpoint exists and was not refused."""
    if not waitpoint:
        return False
    view = RunView(run)
    return any(i.kind == "Resume" and i.resume_run == view.name and i.waitpoint_id == waitpoint
               and i.phase not in ("Rejected", "Cancelled")
               for i in map(InputView, kube.list(INPUTS, view.session_name)))


class StepFollower:
    """Prints a run's new transcript steps from watch events, in a thread, while ``watch``
    follows the run's phases. ``stop`` lists once more, so every step is printed (in order)
    before the watcher prints the result."""

    def __init__(self, kube: Kube, out: Console, run: str) -> None:
        import threading

        self.kube, self.out, self.run = kube, out, run
        self.selector = f"{RUN_LABEL}={run}"
        self.printed: set[str] = set()
        self.chunks: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"steps-{run}", daemon=True)

    def start(self) -> StepFollower:
        self._version = self._list()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Idempotent: the first call ends the watch and prints what is left."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=2 * WATCH_STOP)
        self._list()

    def _list(self) -> str | None:
        listed = self.kube.api.list_namespaced_custom_object(GROUP, VERSION, self.kube.namespace, TRANSCRIPTS,
                                                             label_selector=self.selector,
                                                             _request_timeout=REQUEST_TIMEOUT)
        for c in listed.get("items") or []:
            self._take(c)
        return listed["metadata"].get("resourceVersion")

    def _take(self, chunk: dict[str, Any]) -> None:
        with self._lock:
            self.chunks[chunk["metadata"]["name"]] = chunk
            for step in steps_of(self.chunks.values()):
                if step["id"] not in self.printed:
                    self.printed.add(step["id"])
                    self.out.print(f"  {line(step)}")

    def _loop(self) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        while not self._stop.is_set():
            try:
                for event in watch.Watch().stream(
                        self.kube.api.list_namespaced_custom_object, GROUP, VERSION, self.kube.namespace, TRANSCRIPTS,
                        label_selector=self.selector, resource_version=self._version, timeout_seconds=WATCH_STOP,
                        allow_watch_bookmarks=True):
                    obj = event["object"]
                    self._version = obj["metadata"].get("resourceVersion") or self._version
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._take(obj)
                    if self._stop.is_set():
                        return
            except ApiException as e:
                if e.status != 410:  # anything but an expired version: the phases go on without steps
                    return
                self._version = self._list()  # 410 Gone: list again and watch from there


WATCH_STOP = 1
"""Seconds of one watch request of ``StepFollower``: how long ``stop`` may wait for it."""

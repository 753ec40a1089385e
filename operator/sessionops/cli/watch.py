"""Following a run until it waits for the user or ends (``watch``, ``send --watch``, ...).

The watcher polls (one GET per interval; a list of the session's inputs only while a run
waits), prints what changed (phases, segments, steered inputs, cleanup steps) and ends:

- when the run waits at a waitpoint nobody has answered yet: the waitpoint table and the
  commands that complete it are printed (exit 0), unless ``until_done``;
- when the run ends: the result (exit 0), or the failure / cancellation (exit 4);
- at the timeout (exit 5) or on Ctrl-C (exit 130).

A waitpoint that a Resume input already answers (the input exists and is not rejected) does
not stop the watch: the run is about to continue. A session is followed through its active
run (from its status, or a run of it that has not ended: the session's status lags a
moment behind its runs); without one, through the run its queued inputs become; a paused queue with nothing
that resumes it ends the watch (exit 0, with the hint).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from rich.console import Console
from rich.text import Text

from sessionops.cli import render
from sessionops.cli.client import INPUTS, RUNS, SESSIONS, Kube
from sessionops.cli.errors import (
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_TIMEOUT,
    CliError,
)
from sessionops.views import InputView, RunView, SessionView


class _TimedOut(Exception):
    pass


def run_events(prev: dict[str, Any] | None, cur: dict[str, Any]) -> list[Text]:
    """What changed between two reads of a run, as printable lines. Pure."""
    name = cur["metadata"]["name"]
    before, now = RunView(prev), RunView(cur)
    lines: list[Text] = []
    old_phase, new_phase = before.stored_phase, now.phase
    if prev is None or old_phase != new_phase:
        line = Text(f"{name}: ")
        if prev is not None:
            line.append_text(render.phase(old_phase)).append(" -> ")
        lines.append(line.append_text(render.phase(new_phase)))
    old_segments = {s.get("name"): s for s in before.segments}
    for seg in now.segments:
        known = old_segments.get(seg.get("name"))
        if known is None and (prev is not None or not seg.get("outcome")):
            lines.append(Text(f"  segment {seg.get('name')} ({seg.get('kind')}) started", style="dim"))
        if seg.get("outcome") and (known or {}).get("outcome") != seg.get("outcome"):
            lines.append(Text(f"  segment {seg.get('name')} ({seg.get('kind')}): {seg.get('outcome')}", style="dim"))
    for steered in now.steered:
        if steered not in before.steered:
            lines.append(Text(f"  steered into the turn: {steered}", style="dim"))
    done = before.completed_steps
    for step in now.completed_steps:
        if step not in done:
            lines.append(Text(f"  cancellation step done: {step}", style="dim"))
    return lines


class Watcher:
    def __init__(self, kube: Kube, out: Console, *, timeout: float | None = None, interval: float = 0.5,
                 until_done: bool = False, show_waitpoints: bool = True, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, steps: Callable[[str], Any] | None = None) -> None:
        self.kube, self.out = kube, out
        self.timeout, self.interval, self.until_done = timeout, interval, until_done
        self.show_waitpoints = show_waitpoints
        self.final_phase: str | None = None  # the phase of the followed run when the watch ended
        self.clock, self._sleep = clock, sleep
        self.deadline = None if timeout is None else clock() + timeout
        self.ns = f" -n {kube.namespace}" if kube.namespace_explicit else ""
        self._status: Any = None
        self.current = ""
        self.steps = steps  # run name -> a started follower of its transcript (``stop()`` ends it)

    # -- entry points ----------------------------------------------------------------------------------------

    def watch(self, name: str) -> int:
        """A run, a session or an input, found by name (in that order)."""
        return self._guarded(lambda: self._dispatch(name))

    def watch_run(self, name: str, ignore_waitpoints: Iterable[str] = ()) -> int:
        return self._guarded(lambda: self._follow_run(name, set(ignore_waitpoints)))

    def watch_input(self, name: str) -> int:
        return self._guarded(lambda: self._follow_input(name))

    # -- plumbing ---------------------------------------------------------------------------------------------

    def _guarded(self, body: Callable[[], int]) -> int:
        try:
            with self.out.status("watching...") as status:
                self._status = status
                return body()
        except _TimedOut:
            self.out.print(f"timed out after {self.timeout:g}s" + (f": {self.current}" if self.current else ""))
            return EXIT_TIMEOUT
        except KeyboardInterrupt:
            self.out.print("interrupted" + (f": {self.current}" if self.current else ""))
            return EXIT_INTERRUPTED
        finally:
            self._status = None

    def _progress(self, text: str) -> None:
        self.current = text
        if self._status is not None:
            self._status.update(text)

    def _wait(self) -> None:
        if self.deadline is not None and self.clock() >= self.deadline:
            raise _TimedOut
        self._sleep(self.interval)

    def _dispatch(self, name: str) -> int:
        if self.kube.find(RUNS, name) is not None:
            return self._follow_run(name, set())
        if self.kube.find(SESSIONS, name) is not None:
            return self._follow_session(name)
        if self.kube.find(INPUTS, name) is not None:
            return self._follow_input(name)
        raise CliError(f'no AgentRun, AgentSession or AgentInput "{name}" in namespace {self.kube.namespace}',
                       EXIT_NOT_FOUND)

    # -- following --------------------------------------------------------------------------------------------

    def _answered(self, run: dict[str, Any], waitpoint_id: str) -> str | None:
        """The Resume input that answers this waitpoint, if one was received and not refused."""
        view = RunView(run)
        for inp in map(InputView, self.kube.list(INPUTS, view.session_name)):
            if (inp.kind == "Resume" and inp.resume_run == view.name and inp.waitpoint_id == waitpoint_id
                    and inp.phase not in ("Rejected", "Cancelled")):
                return inp.name
        return None

    def _follow_run(self, name: str, ignore: set[str]) -> int:
        follower = self.steps(name) if self.steps is not None else None
        try:
            return self._follow_phases(name, ignore, follower)
        finally:
            if follower is not None:
                follower.stop()

    def _follow_phases(self, name: str, ignore: set[str], follower: Any) -> int:
        def steps_done() -> None:
            """Every step is printed before the result or the waitpoint."""
            if follower is not None:
                follower.stop()

        prev: dict[str, Any] | None = None
        shown: set[str] = set()
        answered: dict[str, str] = {}
        while True:
            run = self.kube.get(RUNS, name)
            for line in run_events(prev, run):
                self.out.print(line)
            prev = run
            view = RunView(run)
            value = view.phase
            self.final_phase = value
            self._progress(f"run {name} is {value}")
            if value in ("Succeeded", "Failed", "Cancelled"):
                steps_done()
            if value == "Succeeded":
                self.out.print(render.result_block(run))
                return EXIT_OK
            if value == "Failed":
                self.out.print(Text(f"{name} failed: {render.failure(run) or 'no reason recorded'}", style="red"))
                return EXIT_RUN_FAILED
            if value == "Cancelled":
                self.out.print(Text(f"{name} was cancelled: {render.outcome_line(run)}", style="yellow"))
                return EXIT_RUN_FAILED
            waitpoint = view.waitpoint
            if value == "Waiting" and waitpoint:
                wp_id = view.waitpoint_id or ""
                if wp_id not in ignore and wp_id not in answered:
                    by = self._answered(run, wp_id)
                    if by:
                        answered[wp_id] = by
                        self.out.print(Text(f"  {wp_id} answered by {by}; resuming", style="dim"))
                if wp_id in ignore or wp_id in answered:
                    self._progress(f"run {name}: resuming from {wp_id}")
                else:
                    if not self.until_done:
                        steps_done()
                    if wp_id not in shown and self.show_waitpoints:
                        shown.add(wp_id)
                        self.out.print(render.waitpoint_table(waitpoint))
                        for hint in render.waitpoint_hints(name, waitpoint, self.ns):
                            self.out.print(Text(hint, style="dim"), soft_wrap=True)
                    if not self.until_done:
                        return EXIT_OK
                    self._progress(f"run {name} is waiting at {wp_id}")
            self._wait()

    def _follow_input(self, name: str) -> int:
        announced = False
        while True:
            inp = self.kube.get(INPUTS, name)
            view = InputView(inp)
            value = view.phase
            if view.consumed_by:
                ignore = {view.waitpoint_id} if view.kind == "Resume" and view.waitpoint_id else set()
                if announced or view.kind != "Resume":
                    self.out.print(f"{name}: {value} by run {view.consumed_by}")
                return self._follow_run(view.consumed_by, ignore)
            if value in ("Rejected", "Cancelled"):
                reason = next((c.get("message") for c in view.conditions if c.get("message")), "")
                self.out.print(Text(f"{name}: {value}" + (f": {reason}" if reason else ""), style="red"))
                return EXIT_RUN_FAILED
            if value == "Consumed":  # e.g. a Continue: the session goes on with its queue
                return self._follow_session(view.session_name)
            if not announced:
                self.out.print(f"{name}: queued (sequence {view.stored_sequence or '?'})")
                announced = True
            self._progress(f"input {name} is queued")
            self._wait()

    def _follow_session(self, name: str) -> int:
        seen: set[str] = set()
        while True:
            session = SessionView(self.kube.get(SESSIONS, name))
            active = session.active_run
            runs = sorted(self.kube.list(RUNS, name), key=render.sequence_of) if not active else []
            if not active:  # the session's status follows its runs a moment later: ask the runs too
                active = next((r["metadata"]["name"] for r in reversed(runs)
                               if RunView(r).phase not in render.TERMINAL), None)
            if active:
                self.out.print(f"session {name}: active run {active}")
                return self._follow_run(active, set())
            inputs = self.kube.list(INPUTS, name)
            messages = [i for i in inputs if InputView(i).kind == "Message"]
            for inp in messages:
                run = InputView(inp).consumed_by
                if inp["metadata"]["name"] in seen and run:
                    self.out.print(f"session {name}: {inp['metadata']['name']} became run {run}")
                    return self._follow_run(run, set())
            pending = [i for i in messages if InputView(i).pending]
            resuming = any(InputView(i).kind == "Continue" and InputView(i).pending for i in inputs)
            if session.paused and not resuming:
                self.out.print(Text(f"session {name} is Paused ({len(pending)} queued): "
                                    f"{session.paused_reason or 'the queue is paused'}", style="yellow"))
                self.out.print(Text(f"resume it: {render.PLUGIN} continue {name}{self.ns}", style="dim"))
                return EXIT_OK
            if not pending and not resuming:
                self.out.print(f"session {name} is {session.phase or 'Idle'}: nothing is running or queued")
                if runs:
                    last = runs[-1]
                    self.out.print(f"last run {last['metadata']['name']} "
                                   f"{RunView(last).stored_phase}: {render.outcome_line(last)}")
                return EXIT_OK
            seen |= {i["metadata"]["name"] for i in pending}
            self._progress(f"session {name}: {len(pending)} input(s) queued, waiting for a run")
            self._wait()

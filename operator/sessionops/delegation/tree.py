"""A delegation tree as pure views: what a waiting parent sees of its children, when it
may resume, what its delegate calls return, and how many turns of a tree run.

A child is one delegate call: a child session, its delegated input (named by
``names.child_input_name``) and, once the child's queue claimed that input, its run.
A child *ended* when that run is terminal, when the input will never run (Cancelled,
Rejected) or when the child session is gone.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from sessionops.api.input import InputPhase
from sessionops.api.run import TERMINAL_PHASES, ChildStatus, RunPhase, WaitpointKind
from sessionops.api.timestamps import parse
from sessionops.views import InputView, RunView, SessionView

QUEUED = "Queued"
"""A child's phase before its queue claims the delegated input."""
GONE = "Deleted"
"""A child whose session was deleted before its turn ended."""
NOT_RUN = frozenset({InputPhase.CANCELLED.value, InputPhase.REJECTED.value})


@dataclasses.dataclass(frozen=True)
class Child:
    """What the operator (or a resuming worker) read about one awaited child."""

    session_name: str
    session: Mapping[str, Any] | None
    input: Mapping[str, Any] | None
    run: Mapping[str, Any] | None


def run_of(inp: Mapping[str, Any] | None) -> str | None:
    return InputView(inp).consumed_by


def phase(child: Child) -> str:
    """The child turn's phase as the parent reports it."""
    if child.session is None or child.input is None:
        return GONE
    input_phase = InputView(child.input).phase
    if input_phase in NOT_RUN:
        return input_phase
    if child.run is None:
        return QUEUED
    return RunView(child.run).phase


def ended(child: Child) -> bool:
    return phase(child) in TERMINAL_PHASES | NOT_RUN | {GONE}


def waiting_at(session: str, run: Mapping[str, Any] | None) -> str | None:
    """``session/run/waitpoint`` of an approval or question that waits inside this turn or,
    through Delegation waitpoints, inside a grandchild (the path goes on down)."""
    view = RunView(run)
    if run is None or view.phase != RunPhase.WAITING.value:
        return None
    here = f"{session}/{view.name}"
    if view.waitpoint_kind != WaitpointKind.DELEGATION.value:
        return f"{here}/{view.waitpoint_id}" if view.waitpoint_id else None
    for grandchild in view.children:
        if grandchild.get("waitingAt"):
            return f"{here}/{grandchild['waitingAt']}"
    return None


def child_status(name: str, child: Child, *, cut_off: bool = False) -> ChildStatus:
    """``cut_off``: the parent stopped waiting for it at the deadline (sticky: the resuming
    worker reads it, whatever the child's phase is by then)."""
    return ChildStatus(name=name, session=child.session_name, run=run_of(child.input), phase=phase(child),
                       waiting_at=waiting_at(child.session_name, child.run),
                       held_back=SessionView(child.session).held_back
                       if phase(child) == QUEUED else None,
                       cut_off=cut_off or None)


def waiting_since(run: Mapping[str, Any]) -> datetime.datetime | None:
    """When the parent started waiting: the end of the segment that reported Waiting."""
    last = RunView(run).last_segment or {}
    if last.get("outcome") != RunPhase.WAITING.value or not last.get("finishedAt"):
        return None
    return parse(last["finishedAt"])


@dataclasses.dataclass(frozen=True)
class ResumeDue:
    due: bool
    deadline_passed: bool = False


def resume_due(children: Iterable[Child], *, since: datetime.datetime | None, now: datetime.datetime,
               timeout_seconds: int) -> ResumeDue:
    """A Delegation waitpoint resumes when every child ended, or when the deadline passed."""
    if all(ended(c) for c in children):
        return ResumeDue(True)
    if since is not None and (now - since).total_seconds() >= timeout_seconds:
        return ResumeDue(True, deadline_passed=True)
    return ResumeDue(False)


def result(child: Child, *, cut_off: bool = False) -> dict[str, Any]:
    """The resume value of one delegate call: the child turn's outcome, for the tool result.
    ``cut_off``: the parent stopped waiting for this child at its deadline."""
    value: dict[str, Any] = {"session": child.session_name, "phase": phase(child)}
    if run := run_of(child.input):
        value["run"] = run
    turn = RunView(child.run)
    if value["phase"] == RunPhase.SUCCEEDED.value:
        value["text"] = turn.result_text
    elif value["phase"] == RunPhase.FAILED.value:
        failed = [c for c in turn.conditions if c.get("type") == "Failed" and c.get("status") == "True"]
        value["message"] = failed[-1].get("message", "") if failed else ""
    elif value["phase"] in NOT_RUN:
        conds = InputView(child.input).conditions
        value["message"] = conds[-1].get("message", "") if conds else ""
    if cut_off or not ended(child):
        value["deadlinePassed"] = True
    return value


def running_turns(runs: Iterable[Mapping[str, Any]]) -> int:
    """Turns of a tree that hold (or are about to hold) a pod: neither finished nor waiting."""
    return sum(1 for r in runs if RunView(r).phase not in TERMINAL_PHASES | {RunPhase.WAITING.value})


def held_back(root: str, running: int, bound: int) -> str | None:
    """Why a child's queue may not claim now, or None when the tree has room."""
    if running < bound:
        return None
    return f'delegation tree "{root}" runs {running} turns (bound {bound}): waiting for one to finish'

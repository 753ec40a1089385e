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
from sessionops.platform.timestamps import parse

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


def _status(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("status") or {}


def run_of(inp: Mapping[str, Any] | None) -> str | None:
    return _status(inp).get("run")


def phase(child: Child) -> str:
    """The child turn's phase as the parent reports it."""
    if child.session is None or child.input is None:
        return GONE
    input_phase = _status(child.input).get("phase") or InputPhase.PENDING.value
    if input_phase in NOT_RUN:
        return input_phase
    if child.run is None:
        return QUEUED
    return _status(child.run).get("phase") or RunPhase.PENDING.value


def ended(child: Child) -> bool:
    return phase(child) in TERMINAL_PHASES | NOT_RUN | {GONE}


def waiting_at(session: str, run: Mapping[str, Any] | None) -> str | None:
    """``session/run/waitpoint`` of an approval or question that waits inside this turn or,
    through Delegation waitpoints, inside a grandchild (the path goes on down)."""
    if run is None or _status(run).get("phase") != RunPhase.WAITING.value:
        return None
    waitpoint = _status(run).get("waitpoint") or {}
    here = f"{session}/{run['metadata']['name']}"
    if waitpoint.get("kind") != WaitpointKind.DELEGATION.value:
        return f"{here}/{waitpoint.get('id')}" if waitpoint.get("id") else None
    for grandchild in _status(run).get("children") or []:
        if grandchild.get("waitingAt"):
            return f"{here}/{grandchild['waitingAt']}"
    return None


def child_status(name: str, child: Child, *, cut_off: bool = False) -> ChildStatus:
    """``cut_off``: the parent stopped waiting for it at the deadline (sticky: the resuming
    worker reads it, whatever the child's phase is by then)."""
    return ChildStatus(name=name, session=child.session_name, run=run_of(child.input), phase=phase(child),
                       waiting_at=waiting_at(child.session_name, child.run),
                       held_back=(_status(child.session).get("queue") or {}).get("heldBack")
                       if phase(child) == QUEUED else None,
                       cut_off=cut_off or None)


def waiting_since(run: Mapping[str, Any]) -> datetime.datetime | None:
    """When the parent started waiting: the end of the segment that reported Waiting."""
    segments = _status(run).get("segments") or []
    last = segments[-1] if segments else {}
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
    status = _status(child.run)
    if value["phase"] == RunPhase.SUCCEEDED.value:
        value["text"] = (status.get("result") or {}).get("text", "")
    elif value["phase"] == RunPhase.FAILED.value:
        failed = [c for c in status.get("conditions") or [] if c.get("type") == "Failed" and c.get("status") == "True"]
        value["message"] = failed[-1].get("message", "") if failed else ""
    elif value["phase"] in NOT_RUN:
        conds = _status(child.input).get("conditions") or []
        value["message"] = conds[-1].get("message", "") if conds else ""
    if cut_off or not ended(child):
        value["deadlinePassed"] = True
    return value


def running_turns(runs: Iterable[Mapping[str, Any]]) -> int:
    """Turns of a tree that hold (or are about to hold) a pod: neither finished nor waiting."""
    return sum(1 for r in runs if (_status(r).get("phase") or RunPhase.PENDING.value)
               not in TERMINAL_PHASES | {RunPhase.WAITING.value})


def held_back(root: str, running: int, bound: int) -> str | None:
    """Why a child's queue may not claim now, or None when the tree has room."""
    if running < bound:
        return None
    return f'delegation tree "{root}" runs {running} turns (bound {bound}): waiting for one to finish'

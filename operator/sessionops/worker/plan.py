"""What a segment runs (pure): the turn's input messages, the steers to deliver, and the
action for the segment kind and the thread's state.

Message ids derive from input uids (``input:<uid>:<index>``), so a Retry that adds the
start inputs again replaces them instead of duplicating them (``add_messages`` replaces
by id).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import HumanMessage

from sessionops.api.input import Delivery, InputKind, InputPhase
from sessionops.api.run import SegmentKind
from sessionops.views import InputView

INPUT_ID_PREFIX = "input:"


def input_message_id(uid: str, index: int) -> str:
    return f"{INPUT_ID_PREFIX}{uid}:{index}"


def _messages(inp: Mapping[str, Any]) -> list[str]:
    return [m.get("content", "") for m in InputView(inp).messages]


def _sequence(inp: Mapping[str, Any]) -> int:
    return InputView(inp).sequence


def start_messages(inputs: Iterable[Mapping[str, Any]]) -> list[HumanMessage]:
    """The turn's inputs as human messages, in sequence order, one per input message."""
    ordered = sorted(inputs, key=_sequence)
    return [HumanMessage(content=text, id=input_message_id(inp["metadata"]["uid"], i))
            for inp in ordered for i, text in enumerate(_messages(inp))]


def turn_start_ids(inputs: Iterable[Mapping[str, Any]]) -> set[str]:
    """Ids of the first message of each start input: where the turn begins in the thread."""
    return {input_message_id(inp["metadata"]["uid"], 0) for inp in inputs}


def steer_text(inp: Mapping[str, Any]) -> str:
    return "\n\n".join(_messages(inp))


def steer_candidates(inputs: Iterable[Mapping[str, Any]], run: str, exclude: Iterable[str]) -> list[dict[str, Any]]:
    """Steers to deliver into ``run``, in sequence order: Message inputs with Steer delivery that
    are pending, or that this run claimed already (a crash may have come between the claim and
    the checkpoint). ``exclude``: the run's own inputs (its start messages)."""
    excluded = set(exclude)
    found = []
    for inp in inputs:
        view = InputView(inp)
        if view.name in excluded or view.deleting:
            continue
        if view.kind != InputKind.MESSAGE.value:
            continue
        if view.delivery != Delivery.STEER.value or view.stored_sequence is None:
            continue
        phase = view.phase
        if phase == InputPhase.PENDING.value or (phase == InputPhase.CONSUMED.value and view.consumed_by == run):
            found.append(dict(inp))
    return sorted(found, key=_sequence)


class Action(enum.StrEnum):
    START = "Start"
    """Add the start inputs and run the turn (after closing leftovers of an earlier turn)."""
    RESUME = "Resume"
    """Answer the pending interrupts with a Resume input (``Command(resume=...)``)."""
    CONTINUE = "Continue"
    """Run the pending tasks of the last checkpoint (``invoke(None)``)."""
    REPORT = "Report"
    """The thread has nothing to run: report what the state says."""


@dataclasses.dataclass(frozen=True)
class SegmentPlan:
    action: Action
    resume_input: str | None = None


def plan_segment(kind: SegmentKind | str, *, turn_started: bool, has_next: bool, waitpoint_id: str | None,
                 resume_input: Mapping[str, Any] | None) -> SegmentPlan:
    """The action of a segment.

    - Start, and Retry of a turn not yet in the thread: START.
    - Resume: RESUME with its input (invalid ones fail the turn when the command is built).
    - Retry with a Resume input that answers the current waitpoint: RESUME with it (the
      crashed Resume segment never got its answer into the thread).
    - Otherwise CONTINUE when tasks pend (completed tasks keep their writes: nothing done
      runs again), else REPORT.
    """
    kind = SegmentKind(kind)
    resume_name = resume_input["metadata"]["name"] if resume_input else None
    if not turn_started and kind != SegmentKind.RESUME:
        return SegmentPlan(Action.START)
    if kind == SegmentKind.RESUME:
        return SegmentPlan(Action.RESUME, resume_name)
    if resume_input is not None and waitpoint_id is not None \
            and InputView(resume_input).waitpoint_id == waitpoint_id:
        return SegmentPlan(Action.RESUME, resume_name)
    return SegmentPlan(Action.CONTINUE if has_next else Action.REPORT)


def last_resume_input(segments: Iterable[Mapping[str, Any]]) -> str | None:
    """The input of the run's latest Resume segment: what a Retry may still have to deliver."""
    for seg in reversed(list(segments)):
        if seg.get("kind") == SegmentKind.RESUME.value and seg.get("input"):
            return str(seg["input"])
    return None


def delivers_outcomes(step: SegmentPlan, resume_input: Mapping[str, Any] | None,
                      segments: Iterable[Mapping[str, Any]]) -> bool:
    """This segment answers a Delegation waitpoint with the children's outcomes: a Resume
    without an input, or the Retry of one that was lost (resuming it directly instead of
    re-running the delegate calls, which would only wait again)."""
    if resume_input is not None or step.action not in (Action.RESUME, Action.CONTINUE):
        return False
    latest = next((s for s in reversed(list(segments)) if s.get("kind") != SegmentKind.RETRY.value), {})
    return step.action == Action.RESUME or (latest.get("kind") == SegmentKind.RESUME.value
                                            and not latest.get("input"))

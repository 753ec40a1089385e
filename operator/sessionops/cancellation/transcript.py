"""The cancelled calls as transcript steps (pure), written when cleanup has closed them.

The worker is gone when cleanup runs (ARCHITECTURE.md 5, step 2), so it never publishes the
results cleanup adds; the operator appends them to the run's transcript instead. A step
here is exactly what the worker's projection makes of a cancellation result
(``result:<tool_call_id>``, status ``cancelled``), so the transcript reads the same whoever
wrote it, and appending is idempotent: a call that already has a result step gets none.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sessionops.api.transcript import StepKind, TranscriptStep, chunks
from sessionops.views.transcript import ChunkView

Step = dict[str, Any]
CALL_KINDS = (StepKind.TOOL_CALL.value, StepKind.QUESTION.value)
RESULT_KINDS = (StepKind.TOOL_RESULT.value, StepKind.CHILD.value)
DELEGATE_TOOL = "delegate"


def cancelled_steps(published: Sequence[Step], closed: Collection[str], *, text: str, segment: str | None,
                    at: str) -> list[Step]:
    """Result steps for the run's published calls that the cleanup closed (``closed``: their
    tool_call_ids) and that have no result step yet, in the calls' order. Calls of earlier
    turns are not in this run's transcript, so their cancellation results never show here."""
    answered = {s.get("toolCallId") for s in published if s["kind"] in RESULT_KINDS}
    out: list[Step] = []
    for call in published:
        tcid = call.get("toolCallId")
        if call["kind"] not in CALL_KINDS or tcid not in closed or tcid in answered:
            continue
        answered.add(tcid)  # a call published twice (never, by id) still gets one result
        kind = StepKind.CHILD if call.get("tool") == DELEGATE_TOOL else StepKind.TOOL_RESULT
        fields = {"tool": call.get("tool"), "toolCallId": tcid, "status": "cancelled", "text": text,
                  "at": at, "segment": segment, "args": call.get("args") if kind == StepKind.CHILD else None}
        out.append(TranscriptStep.model_validate({"id": f"result:{tcid}", "kind": kind.value,
                                                  **{k: v for k, v in fields.items() if v is not None}}).dump())
    return out


def chunk_writes(items: Sequence[dict[str, Any]], new: Sequence[Step]) -> list[tuple[int, list[Step]]]:
    """(index, steps) of every chunk that changes when ``new`` steps are appended to the
    stored chunks ``items``. The chunking is the worker's (deterministic), so a retry after
    a crash between two writes computes the same chunks and writes only what is missing."""
    stored = {(chunk := ChunkView(c)).index: list(chunk.steps) for c in items}
    published = [s for i in sorted(stored) for s in stored[i]]
    return [(index, steps) for index, steps in enumerate(chunks([*published, *new]))
            if stored.get(index) != steps]

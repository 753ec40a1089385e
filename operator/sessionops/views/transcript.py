"""What readers take from an AgentTranscript chunk (``sessionops.api.transcript``): its place in
the turn and its steps. The worker, the cancellation cleanup and the plugin all read chunks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sessionops.views.fields import Field, View


class ChunkView(View):
    """An AgentTranscript chunk's fields by their API names."""

    __slots__ = ()

    run_name: Field[str] = Field("spec", "run", default="")
    session_name: Field[str] = Field("spec", "session", default="")
    stored_index: Field[int] = Field("spec", "index", default=0)
    steps: Field[Sequence[Mapping[str, Any]]] = Field("spec", "steps", default=())

    @property
    def index(self) -> int:
        """The chunk's position in the turn's transcript (0, 1, ...)."""
        return int(self.stored_index)


def in_order(chunks: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The chunks by their index."""
    return sorted(chunks, key=lambda c: ChunkView(c).index)


def steps_in_order(chunks: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every step of the chunks, in the turn's order."""
    return [step for chunk in in_order(chunks) for step in ChunkView(chunk).steps]

"""Events on real phase transitions only: never for a phase reached before this process."""

from __future__ import annotations

from typing import Any

from sessionops.manager import phases


class Events:
    def __init__(self) -> None:
        self.posted: list[str] = []

    async def post_event(self, involved: dict[str, Any], *, type_: str, reason: str, message: str) -> None:
        self.posted.append(f"{involved['metadata']['name']}: {reason}")


def obj(name: str, phase: str | None, generation: int = 1) -> dict[str, Any]:
    return {"kind": "AgentSession", "metadata": {"namespace": "ns", "name": name, "generation": generation},
            "status": {"phase": phase} if phase else {}}


async def test_a_restart_announces_nothing_and_later_transitions_are_announced() -> None:
    events = Events()
    await phases.observe(events, obj("listed", "Idle"), listed=True)  # type: ignore[arg-type]
    await phases.observe(events, obj("listed", "Idle"))  # type: ignore[arg-type]
    await phases.observe(events, obj("edited", "Idle", generation=2))  # type: ignore[arg-type]
    assert events.posted == []
    await phases.observe(events, obj("listed", "Running"))  # type: ignore[arg-type]
    await phases.observe(events, obj("new", None))  # type: ignore[arg-type]
    await phases.observe(events, obj("new", "Idle"))  # type: ignore[arg-type]
    assert events.posted == ["listed: Running", "new: Idle"]
    await phases.observe(events, obj("new", "Idle"), deleted=True)  # type: ignore[arg-type]
    await phases.observe(events, obj("listed", "Running"), deleted=True)  # type: ignore[arg-type]

"""Steer delivery into a running turn, at safe points only.

Safe points: before a model call, and after a model call that requested no tools (the
steers are added and the graph jumps back to the model, so the turn answers them
instead of ending). Never between a tool call and its result.

Idempotence: a steer becomes ``HumanMessage(id="steer:<input uid>")``; the
``add_messages`` reducer replaces by id, so a retried delivery replaces instead of
duplicating. The uids delivered are also recorded in the private channel
``delivered_steers`` in the same write, so a steer summarized away is still known as
delivered.

Claim before inject: ``claim(uids)`` is called before the messages are returned to the
graph (e.g. the worker marks the inputs consumed by this run). After a crash between
the claim and the checkpoint, ``fetch_steers`` still returns the claimed uids (the
worker returns pending steers *and* the ones claimed by this run but not yet
confirmed) and they are injected again: the state, not the claim, says what was
delivered. ``on_delivered(uids)`` confirms uids the state already holds, i.e. after
their checkpoint is durable.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import AgentMiddleware, AgentState, PrivateStateAttr, hook_config
from langchain_core.messages import AIMessage, HumanMessage

SteerFetcher = Callable[[], Sequence[tuple[str, str]]]
"""Steers to deliver, in sequence order: ``(input_uid, text)``, pending or claimed by this run."""
UidsCallback = Callable[[list[str]], None]

STEER_ID_PREFIX = "steer:"


def steer_message_id(input_uid: str) -> str:
    return f"{STEER_ID_PREFIX}{input_uid}"


def delivered_steer_uids(state: Mapping[str, Any]) -> list[str]:
    """Uids of the steers the state holds, in delivery order (the worker's end-of-turn check)."""
    uids = list(state.get("delivered_steers") or [])
    for message in state.get("messages") or []:
        if (mid := getattr(message, "id", None) or "").startswith(STEER_ID_PREFIX):
            uids.append(mid.removeprefix(STEER_ID_PREFIX))
    return list(dict.fromkeys(uids))


class SteeringState(AgentState):
    delivered_steers: NotRequired[Annotated[list[str], operator.add, PrivateStateAttr]]


class SteeringMiddleware(AgentMiddleware):
    """Present in every graph (a no-op without ``fetch_steers``) so the topology never varies."""

    state_schema = SteeringState

    def __init__(
        self,
        fetch_steers: SteerFetcher | None = None,
        on_delivered: UidsCallback | None = None,
        claim: UidsCallback | None = None,
    ) -> None:
        super().__init__()
        self.fetch_steers = fetch_steers
        self.on_delivered = on_delivered
        self.claim = claim

    @property
    def name(self) -> str:
        return "steering"

    def _deliver(self, state: Mapping[str, Any]) -> dict[str, Any] | None:
        if self.fetch_steers is None:
            return None
        steers = dict(_unique(self.fetch_steers()))
        present = set(delivered_steer_uids(state))
        if (confirmed := [uid for uid in steers if uid in present]) and self.on_delivered is not None:
            self.on_delivered(confirmed)
        new = [(uid, text) for uid, text in steers.items() if uid not in present]
        if not new:
            return None
        uids = [uid for uid, _ in new]
        if self.claim is not None:
            self.claim(uids)
        return {
            "messages": [HumanMessage(content=text, id=steer_message_id(uid)) for uid, text in new],
            "delivered_steers": uids,
        }

    def before_model(self, state: SteeringState, runtime: Any) -> dict[str, Any] | None:
        return self._deliver(state)

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: SteeringState, runtime: Any) -> dict[str, Any] | None:
        last = state["messages"][-1] if state["messages"] else None
        if not isinstance(last, AIMessage) or last.tool_calls:
            # Tools come next: steers wait for the next model call (a result must directly
            # follow its call, so nothing may be inserted here).
            return None
        update = self._deliver(state)
        if update is not None:
            update["jump_to"] = "model"
        return update


def _unique(steers: Iterable[tuple[str, str]]) -> Iterable[tuple[str, str]]:
    seen: set[str] = set()
    for uid, text in steers:
        if uid not in seen:
            seen.add(uid)
            yield uid, text

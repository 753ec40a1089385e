"""The worker's dispatcher (delegate tool side) against a recording stand-in for the API:
idempotent creates, refusals as tool errors, and no creation while delivering outcomes."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from langchain_core.tools import ToolException

from sessionops.api.snapshot import ContextSnapshot, SnapshotSource
from sessionops.delegation.names import child_input_name, child_session_name
from sessionops.platform.errors import Conflict
from sessionops.worker.delegation import Dispatcher

SNAP = ContextSnapshot(system_prompt="p", model="replay/hello", approval_mode="Default",
                       source=SnapshotSource(agent_name="helper", agent_uid="u", agent_generation=1, config_version="v"))


class Api:
    """Objects by (plural, name); create raises like the API server (409 exists, or a rejection)."""

    def __init__(self, reject: dict[str, ApiException] | None = None) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.created: list[tuple[str, str]] = []
        self.reject = reject or {}

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((plural, name))

    def create(self, plural: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        if plural in self.reject:
            raise self.reject[plural]
        if (plural, name) in self.objects:
            raise Conflict(f'{plural} "{name}" already exists')
        self.objects[(plural, name)] = body
        self.created.append((plural, name))
        return body


class Access:
    def __init__(self, allowed: bool = True) -> None:
        self.allowed = allowed

    def review(self, check: Any) -> tuple[bool, str]:
        return (True, "") if self.allowed else (False, f"alice may not get agents.sessionops.dev {check.name!r}")


def dispatcher(api: Api, allowed: bool = True) -> Dispatcher:
    return Dispatcher(api, "team-a", "p-t1", SNAP, Access(allowed))  # type: ignore[arg-type]


def test_a_repeated_dispatch_finds_its_child_instead_of_creating_another() -> None:
    api = Api()
    child = dispatcher(api).dispatch("call_1", "kid", "do it", None)
    assert child == child_session_name("p-t1", "call_1", "kid")
    session = api.objects[("agentsessions", child)]
    assert session["spec"] == {"agentRef": {"name": "helper"}, "delegation": {
        "parentRun": "p-t1", "toolCallId": "call_1", "name": "kid", "inherit": True}}
    delegated = api.objects[("agentinputs", child_input_name(child))]
    assert delegated["metadata"]["labels"] == {"sessionops.dev/parent-run": "p-t1"}
    assert dispatcher(api).dispatch("call_1", "kid", "do it", None) == child  # a retried segment
    assert api.created == [("agentsessions", child), ("agentinputs", child_input_name(child))]


def test_a_name_taken_by_another_call_is_an_error_result() -> None:
    api = Api()
    child = child_session_name("p-t1", "call_1", "kid")
    api.objects[("agentsessions", child)] = {"metadata": {"name": child},
                                             "spec": {"delegation": {"parentRun": "x-t1", "toolCallId": "call_1"}}}
    with pytest.raises(ToolException, match="is not this call's child"):
        dispatcher(api).dispatch("call_1", "kid", "do it", None)


def test_a_target_agent_missing_or_refused_creates_nothing() -> None:
    api = Api()
    with pytest.raises(ToolException, match="agent 'ghost' does not exist"):
        dispatcher(api).dispatch("call_1", "kid", "m", "ghost")
    api.objects[("agents", "secret")] = {"metadata": {"name": "secret"}}
    with pytest.raises(ToolException, match="refused: alice may not get agents"):
        dispatcher(api, allowed=False).dispatch("call_1", "kid", "m", "secret")
    assert api.created == []


def test_an_admission_refusal_is_told_to_the_model() -> None:
    rejection = ApiException(status=422, reason="Unprocessable Entity")
    rejection.body = '{"kind": "Status", "message": "spec.delegation.parentRun: too deep"}'
    with pytest.raises(ToolException, match="delegate: spec.delegation.parentRun: too deep"):
        dispatcher(Api(reject={"agentsessions": rejection})).dispatch("call_1", "kid", "m", None)
    with pytest.raises(ToolException, match="delegate: spec.delegation.parentRun: too deep"):
        dispatcher(Api(reject={"agentinputs": rejection})).dispatch("call_1", "kid", "m", None)


def test_delivering_outcomes_never_creates_a_child_again() -> None:
    api = Api()
    d = dispatcher(api)
    child = child_session_name("p-t1", "call_1", "kid")
    # The child was deleted while its parent waited: the outcome says so, and the re-run tool
    # (the resume) must not start a new child that nobody would wait for.
    assert d.outcomes([child]) == {child: {"session": child, "phase": "Deleted"}}
    assert d.dispatch("call_1", "kid", "m", None) == child and api.created == []


def test_the_operators_view_says_what_was_awaited_and_what_was_cut_off() -> None:
    child = child_session_name("p-t1", "call_1", "kid")
    d = Dispatcher(Api(), "team-a", "p-t1", SNAP, Access(),  # type: ignore[arg-type]
                   [{"name": "kid", "session": child, "phase": "Cancelled", "cutOff": True}])
    assert d.awaited == {child} and d.cut_off == {child}
    assert d.outcomes([child])[child]["deadlinePassed"] is True

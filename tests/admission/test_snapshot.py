"""Snapshot resolution: schema defaults, then the Agent, then the session; models from the catalog."""

from __future__ import annotations

import pytest

from sessionops.admission.errors import Rejection
from sessionops.admission.sessions import session_snapshot_on_create, session_snapshot_on_update
from tests import factories

CONFIG = factories.config()
SCHEMA = [
    {"name": "team", "type": "string", "enum": ["red", "blue"], "default": "red"},
    {"name": "budget", "type": "integer", "required": True},
    {"name": "ratio", "type": "number"},
    {"name": "verbose", "type": "boolean", "default": False},
]


def create(spec: dict, agent: dict | None = None, config=CONFIG):
    return session_snapshot_on_create(spec, agent if agent is not None else factories.agent(), config)


def test_empty_session_freezes_the_system_default_model_and_approval() -> None:
    snap = create({"agentRef": {"name": "helper"}})
    assert snap.model == "replay/hello"
    assert snap.approval_mode == "Default"
    assert snap.max_execution_steps == CONFIG.defaults.max_execution_steps
    assert snap.source.agent_name == "helper" and snap.source.config_version == CONFIG.version


def test_agent_values_win_over_defaults_and_session_values_win_over_agent() -> None:
    agent = factories.agent(model="replay/steer", approvalMode="AlwaysTrust", maxExecutionSteps=7)
    snap = create({"agentRef": {"name": "helper"}}, agent)
    assert (snap.model, snap.approval_mode, snap.max_execution_steps) == ("replay/steer", "AlwaysTrust", 7)
    snap = create({"agentRef": {"name": "helper"}, "model": "replay/hello", "approvalMode": "Default"}, agent)
    assert (snap.model, snap.approval_mode) == ("replay/hello", "Default")


def test_context_fields_get_schema_defaults_and_session_values() -> None:
    agent = factories.agent(contextSchema=SCHEMA)
    snap = create({"agentRef": {"name": "helper"}, "context": {"budget": 3, "ratio": 1}}, agent)
    assert snap.context == {"team": "red", "budget": 3, "ratio": 1, "verbose": False}


@pytest.mark.parametrize(("context", "field", "words"), [
    ({}, "spec.context.budget", "Required"),
    ({"budget": "3"}, "spec.context.budget", "integer"),
    ({"budget": True}, "spec.context.budget", "integer"),
    ({"budget": 1, "team": "green"}, "spec.context.team", "Unsupported value"),
    ({"budget": 1, "ratio": "x"}, "spec.context.ratio", "number"),
    ({"budget": 1, "verbose": 1}, "spec.context.verbose", "boolean"),
    ({"budget": 1, "nope": 1}, "spec.context.nope", "not declared"),
], ids=["required field missing", "string for integer", "bool for integer", "value outside enum",
        "string for number", "int for boolean", "undeclared field"])
def test_context_values_are_checked_against_the_agent_schema(context: dict, field: str, words: str) -> None:
    with pytest.raises(Rejection) as e:
        create({"agentRef": {"name": "helper"}, "context": context}, factories.agent(contextSchema=SCHEMA))
    assert e.value.field == field and words in e.value.message and e.value.code == 422


def test_missing_agent_is_not_found() -> None:
    with pytest.raises(Rejection) as e:
        session_snapshot_on_create({"agentRef": {"name": "ghost"}}, None, CONFIG)
    assert (e.value.field, e.value.code) == ("spec.agentRef.name", 404)
    assert '"ghost" not found' in e.value.message


@pytest.mark.parametrize(("spec", "agent_spec", "field", "words"), [
    ({"model": ""}, {}, "spec.model", "blank"),
    ({"model": "  "}, {}, "spec.model", "blank"),
    ({"model": "gpt-9"}, {}, "spec.model", "not available"),
    ({}, {"model": "gpt-9"}, "spec.agentRef.name", "not available"),
], ids=["blank model", "whitespace model", "unknown model", "agent names an unavailable model"])
def test_model_must_be_explicitly_available(spec: dict, agent_spec: dict, field: str, words: str) -> None:
    with pytest.raises(Rejection) as e:
        create({"agentRef": {"name": "helper"}, **spec}, factories.agent(**agent_spec))
    assert e.value.field == field and words in e.value.message


def _stored(**spec):
    snap = create({"agentRef": {"name": "helper"}, **spec}).dump()
    return factories.session(snapshot=snap, **spec)


def test_update_changes_only_model_and_approval_in_the_snapshot() -> None:
    old = _stored()
    new = factories.session(snapshot=old["spec"]["contextSnapshot"], model="replay/steer",
                            approvalMode="AlwaysTrust")
    snap = session_snapshot_on_update(old, new, CONFIG)
    before = old["spec"]["contextSnapshot"]
    after = snap.dump()
    assert (after["model"], after["approvalMode"]) == ("replay/steer", "AlwaysTrust")
    assert {k: v for k, v in after.items() if k not in ("model", "approvalMode")} == \
        {k: v for k, v in before.items() if k not in ("model", "approvalMode")}


def test_update_carries_the_stored_snapshot_when_the_client_omits_or_forges_it() -> None:
    old = _stored()
    omitted = factories.session()
    assert session_snapshot_on_update(old, omitted, CONFIG).dump() == old["spec"]["contextSnapshot"]
    forged = factories.session(snapshot={**old["spec"]["contextSnapshot"], "systemPrompt": "evil"})
    assert session_snapshot_on_update(old, forged, CONFIG).system_prompt == "You are helpful."


@pytest.mark.parametrize(("old_spec", "new_spec", "field", "words"), [
    ({"model": "replay/hello"}, {}, "spec.model", "omit the field to keep the current value"),
    ({"approvalMode": "Default"}, {}, "spec.approvalMode", "omit the field"),
    ({}, {"model": ""}, "spec.model", "blank"),
    ({}, {"model": "gpt-9"}, "spec.model", "not available"),
    ({}, {"agentRef": {"name": "other"}}, "spec.agentRef", "immutable"),
    ({}, {"context": {"x": 1}}, "spec.context", "immutable"),
], ids=["model removed", "approval removed", "blank model", "unavailable model", "agent changed",
        "context changed"])
def test_update_rejections_name_the_field(old_spec: dict, new_spec: dict, field: str, words: str) -> None:
    old = _stored(**old_spec)
    new = factories.session(snapshot=old["spec"]["contextSnapshot"], **new_spec)
    with pytest.raises(Rejection) as e:
        session_snapshot_on_update(old, new, CONFIG)
    assert e.value.field == field and words in e.value.message


def test_update_of_a_deleting_session_is_a_conflict_but_metadata_updates_pass() -> None:
    old = _stored()
    old["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    with pytest.raises(Rejection) as e:
        session_snapshot_on_update(old, factories.session(model="replay/steer"), CONFIG)
    assert e.value.code == 409
    same = factories.session(snapshot=old["spec"]["contextSnapshot"])
    assert session_snapshot_on_update(old, same, CONFIG) is not None

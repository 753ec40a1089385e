"""An Agent is Ready when a session of it could run now; every problem names its field."""

from __future__ import annotations

import datetime
from typing import Any

from sessionops.api.config import OperatorConfig
from sessionops.readiness.agents import status

NOW = datetime.datetime(2026, 12, 3, 10, 0, tzinfo=datetime.UTC)
CONFIG = OperatorConfig.model_validate({
    "defaults": {"model": "replay/hello"},
    "models": [{"name": "replay/hello", "provider": "replay", "model": "hello"},
               {"name": "gpt", "provider": "openai", "model": "gpt-4o",
                "secretKeyRef": {"name": "openai-key", "key": "apiKey"}}]})
DB = "sessionops-worker-database"


def agent(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "helper", "namespace": "team-a", "generation": 2},
            "spec": {"systemPrompt": "p", **spec}}


def ready(obj: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    result = status(obj, CONFIG, now=NOW, **{"skills": set(), "secrets": {DB}, **kwargs})
    [cond] = [c for c in result["conditions"] if c["type"] == "Ready"]
    return {**cond, "_status": result}


def test_an_agent_without_a_model_shows_the_system_defaults_for_its_printer_columns() -> None:
    cond = ready(agent())
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == ("True", "Available", 2)
    assert (cond["_status"]["model"], cond["_status"]["approvalMode"]) == ("replay/hello", "Default")
    assert ready(agent(model="gpt", approvalMode="AlwaysTrust"), secrets={DB, "openai-key"})["_status"][
        "approvalMode"] == "AlwaysTrust"


def test_a_model_outside_the_catalog_is_not_ready() -> None:
    cond = ready(agent(model="gone"))
    assert (cond["status"], cond["reason"]) == ("False", "ModelUnavailable")
    assert "spec.model" in cond["message"] and "'gone'" in cond["message"]


def test_a_missing_skill_is_named() -> None:
    cond = ready(agent(skills=["lint", "review"], preloadSkills=["style"]), skills={"lint"})
    assert cond["reason"] == "SkillsMissing" and "review, style" in cond["message"]
    assert ready(agent(skills="all"))["status"] == "True"


def test_every_missing_secret_is_named_with_the_field_that_references_it() -> None:
    obj = agent(model="gpt", mcpServers=[{"name": "docs", "url": "http://docs", "headersFrom": {"secretName": "mcp"}}],
                worker={"env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "tok", "key": "t"}}},
                                {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "o", "key": "k",
                                                                                "optional": True}}}]})
    cond = ready(obj, secrets=set())
    assert (cond["status"], cond["reason"]) == ("False", "SecretMissing")
    for part in ('secret "openai-key"', "model 'gpt'", 'spec.mcpServers[0].headersFrom.secretName: secret "mcp"',
                 'spec.worker.env[0].valueFrom.secretKeyRef: secret "tok"'):
        assert part in cond["message"], part
    # The database Secret is the operator's to write (before the namespace's first Job), not a problem.
    assert '"o"' not in cond["message"] and DB not in cond["message"]
    assert ready(obj, secrets={DB, "openai-key", "mcp", "tok"})["status"] == "True"


def test_recomputing_an_unchanged_agent_gives_the_stored_status() -> None:
    first = status(agent(), CONFIG, skills=set(), secrets={DB}, now=NOW)
    stored = {**agent(), "status": first}
    assert status(stored, CONFIG, skills=set(), secrets={DB}, now=NOW + datetime.timedelta(hours=1)) == first


def test_with_pre_provisioned_database_roles_the_database_secret_is_the_agents_problem() -> None:
    config = OperatorConfig.model_validate({**CONFIG.dump(), "worker": {"manageDatabaseRoles": False}})
    result = status(agent(), config, skills=set(), secrets=set(), now=NOW)
    [cond] = [c for c in result["conditions"] if c["type"] == "Ready"]
    assert cond["reason"] == "SecretMissing"
    assert f"the operator config's worker.databaseSecret: secret \"{DB}\" not found" in cond["message"]
    assert status(agent(), config, skills=set(), secrets={DB}, now=NOW)["conditions"][0]["status"] == "True"

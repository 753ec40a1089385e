"""The Agent's status (pure): effective model and approval mode, and ``Ready`` when a session
of it could run now: its model is in the catalog, the skills it names exist, and every Secret
its worker pods reference is present in its namespace. Each problem names its field."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from pydantic import ValidationError

from sessionops.api import conditions
from sessionops.api.agent import AgentSpec
from sessionops.api.config import OperatorConfig

READY = "Ready"


@dataclasses.dataclass(frozen=True)
class SecretRef:
    name: str
    field: str  # where the reference is, for the message


@dataclasses.dataclass(frozen=True)
class Problem:
    reason: str
    message: str


def effective(spec: AgentSpec, config: OperatorConfig) -> tuple[str, str]:
    """(model, approval mode) a session of this Agent gets when it sets neither."""
    return spec.model or config.defaults.model, str(spec.approval_mode or config.defaults.approval_mode)


def named_skills(spec: AgentSpec) -> list[str]:
    listed = [] if spec.skills == "all" else list(spec.skills)
    return sorted(set(listed) | set(spec.preload_skills))


def secret_refs(spec: AgentSpec, config: OperatorConfig) -> list[SecretRef]:
    """The Secrets a worker pod of this Agent needs in the Agent's namespace."""
    # The operator writes the database Secret itself unless a DBA pre-provisions the roles.
    refs = [] if config.worker.manage_database_roles else [
        SecretRef(config.worker.database_secret.name, "the operator config's worker.databaseSecret")]
    model, _ = effective(spec, config)
    entry = config.model_entry(model)
    if entry is not None and entry.secret_key_ref is not None:
        refs.append(SecretRef(entry.secret_key_ref.name, f"the catalog entry of model {model!r} (secretKeyRef)"))
    for i, server in enumerate(spec.mcp_servers):
        if server.headers_from is not None:
            refs.append(SecretRef(server.headers_from.secret_name, f"spec.mcpServers[{i}].headersFrom.secretName"))
    for i, var in enumerate((spec.worker.env if spec.worker else []) or []):
        ref = ((var.get("valueFrom") or {}).get("secretKeyRef") or {})
        if ref.get("name") and not ref.get("optional"):
            refs.append(SecretRef(ref["name"], f"spec.worker.env[{i}].valueFrom.secretKeyRef"))
    return refs


def problems(spec: AgentSpec, config: OperatorConfig, *, skills: set[str], secrets: set[str]) -> list[Problem]:
    """``skills``: skill ConfigMaps in the namespace; ``secrets``: the referenced Secrets present."""
    found: list[Problem] = []
    model, _ = effective(spec, config)
    if config.model_entry(model) is None:
        field = "spec.model" if spec.model else "the operator config's defaults.model"
        found.append(Problem("ModelUnavailable", f"{field}: model {model!r} is not in the model catalog"))
    missing_skills = [s for s in named_skills(spec) if s not in skills]
    if missing_skills:
        found.append(Problem("SkillsMissing", "spec.skills/preloadSkills: no skill ConfigMap (label "
                                              f"sessionops.dev/skill) named {', '.join(missing_skills)}"))
    for ref in secret_refs(spec, config):
        if ref.name not in secrets:
            found.append(Problem("SecretMissing", f'{ref.field}: secret "{ref.name}" not found'))
    return found


def status(agent: dict[str, Any], config: OperatorConfig, *, skills: set[str], secrets: set[str],
           now: datetime.datetime) -> dict[str, Any]:
    """The Agent's whole status (absolute values: writing it twice is harmless)."""
    generation = (agent.get("metadata") or {}).get("generation")
    try:
        spec = AgentSpec.model_validate(agent.get("spec") or {})
    except ValidationError as e:  # admission validates; an Agent stored before a schema change may not
        where = ".".join(str(p) for p in e.errors()[0]["loc"])
        ready = conditions.condition(READY, False, "InvalidSpec", f"spec.{where}: {e.errors()[0]['msg']}")
        return {"observedGeneration": generation, "conditions": conditions.updated(agent, [ready], now)}
    model, approval = effective(spec, config)
    found = problems(spec, config, skills=skills, secrets=secrets)
    if found:
        ready = conditions.condition(READY, False, found[0].reason, "; ".join(p.message for p in found))
    else:
        ready = conditions.condition(READY, True, "Available", f"sessions run on model {model!r}")
    return {"observedGeneration": generation, "model": model, "approvalMode": approval,
            "conditions": conditions.updated(agent, [ready], now)}

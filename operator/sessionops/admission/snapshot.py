"""Snapshot resolution: schema defaults, then the Agent's values, then the session's.

Pure functions over API models; the webhook adapter supplies the objects.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from sessionops.admission.errors import NOT_FOUND, Rejection
from sessionops.api import limits
from sessionops.api.agent import AgentSpec
from sessionops.api.config import OperatorConfig
from sessionops.api.snapshot import ContextField, ContextSnapshot, SnapshotSource

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def _type_ok(kind: str, value: Any) -> bool:
    # bool is an int in Python; JSON keeps them apart, and so do we.
    if kind != "boolean" and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[kind])


def resolve_context(schema: list[ContextField], values: dict[str, Any], *, agent_name: str,
                    field: str = "spec.context") -> dict[str, Any]:
    """Validate a session's context values against the Agent's schema and fill in defaults."""
    declared = {f.name: f for f in schema}
    for name in values:
        if name not in declared:
            raise Rejection(f"{field}.{name}", f'field is not declared by agent "{agent_name}" (contextSchema)')
    resolved: dict[str, Any] = {}
    for f in schema:
        if f.name in values:
            value = values[f.name]
        elif f.default is not None:
            value = f.default
        elif f.required:
            raise Rejection(f"{field}.{f.name}", "Required value: the agent declares it required with no default")
        else:
            continue
        if not _type_ok(f.type, value):
            raise Rejection(f"{field}.{f.name}", f"Invalid value: {value!r}: must be of type {f.type}")
        if f.enum is not None and value not in f.enum:
            allowed = ", ".join(repr(v) for v in f.enum)
            raise Rejection(f"{field}.{f.name}", f"Unsupported value: {value!r}: supported values: {allowed}")
        if isinstance(value, str) and len(value) > limits.CONTEXT_VALUE_CHARS:
            raise Rejection(f"{field}.{f.name}",
                            f"Too long: may have at most {limits.CONTEXT_VALUE_CHARS} characters")
        resolved[f.name] = value
    if (size := limits.json_size(resolved)) > limits.CONTEXT_BYTES:
        raise Rejection(field, limits.over_budget("the context values", size, limits.CONTEXT_BYTES))
    return resolved


def check_model(config: OperatorConfig, model: str, field: str) -> str:
    if not model.strip():
        raise Rejection(field, "must not be blank: omit the field to keep the current value")
    if config.model_entry(model) is None:
        available = ", ".join(m.name for m in config.models)
        raise Rejection(field, f'model "{model}" is not available (catalog: {available})')
    return model


def parse_agent(agent: dict[str, Any]) -> AgentSpec:
    name = agent.get("metadata", {}).get("name", "?")
    try:
        return AgentSpec.model_validate(agent.get("spec") or {})
    except ValidationError as e:
        first = e.errors()[0]
        path = ".".join(str(p) for p in first["loc"])
        raise Rejection("spec.agentRef.name", f'agent "{name}" is invalid at spec.{path}: {first["msg"]}') from e


def resolve_session_snapshot(agent: dict[str, Any] | None, agent_name: str, *, model: str | None,
                             approval_mode: str | None, context: dict[str, Any],
                             config: OperatorConfig) -> ContextSnapshot:
    """The complete snapshot a new session freezes (also when it never receives input)."""
    if agent is None:
        raise Rejection("spec.agentRef.name", f'agent "{agent_name}" not found in this namespace', NOT_FOUND)
    spec = parse_agent(agent)
    defaults = config.defaults
    if model is not None:
        resolved_model = check_model(config, model, "spec.model")
    elif spec.model is not None:
        resolved_model = spec.model
        if config.model_entry(resolved_model) is None:
            raise Rejection("spec.agentRef.name",
                            f'agent "{agent_name}" names model "{resolved_model}", which is not available; '
                            "set spec.model to an available model")
    else:
        resolved_model = defaults.model
    meta = agent.get("metadata", {})
    snapshot = ContextSnapshot(
        system_prompt=spec.system_prompt,
        model=resolved_model,
        approval_mode=approval_mode or spec.approval_mode or defaults.approval_mode,
        tools=spec.tools,
        require_approval=list(spec.require_approval),
        mcp_servers=list(spec.mcp_servers),
        skills=spec.skills,
        preload_skills=list(spec.preload_skills),
        summarization=spec.summarization or defaults.summarization,
        max_execution_steps=spec.max_execution_steps or defaults.max_execution_steps,
        model_retries=spec.model_retries if spec.model_retries is not None else defaults.model_retries,
        context=resolve_context(spec.context_schema, context, agent_name=agent_name),
        source=SnapshotSource(agent_name=agent_name, agent_uid=meta.get("uid", ""),
                              agent_generation=meta.get("generation", 0), config_version=config.version),
    )
    # Copied into the session, each input and each run: bounded so that each of them stays manageable.
    if (size := limits.json_size(snapshot.dump())) > limits.SNAPSHOT_BYTES:
        raise Rejection("spec.agentRef.name", f'agent "{agent_name}": ' + limits.over_budget(
            "the resolved configuration (systemPrompt, context, tools, skills...)", size, limits.SNAPSHOT_BYTES))
    return snapshot


def with_model_and_approval(snapshot: ContextSnapshot, *, model: str | None, approval_mode: str | None,
                            config: OperatorConfig, field: str) -> ContextSnapshot:
    """A deep copy with model / approval replaced (each checked); the rest stays frozen."""
    update: dict[str, Any] = {}
    if model is not None:
        update["model"] = check_model(config, model, f"{field}.model")
    if approval_mode is not None:
        update["approval_mode"] = approval_mode
    return snapshot.model_copy(update=update, deep=True)

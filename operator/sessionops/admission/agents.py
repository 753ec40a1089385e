"""Agent admission (pure): the whole spec validated by the pydantic model, so unions that
the CRD schema cannot express (tools, skills: "all" or a list) get a field-path error."""

from __future__ import annotations

from typing import Any

from sessionops.admission.errors import Rejection, parse
from sessionops.api import limits
from sessionops.api.agent import AgentSpec
from sessionops.api.config import WorkerConfig
from sessionops.api.input import SubmittedBy
from sessionops.policy import podaccess
from sessionops.policy.egress import Policy


def check_sizes(spec: dict[str, Any], parsed: AgentSpec) -> None:
    """The Agent stays manageable, and what it puts into every snapshot stays small."""
    if (size := limits.json_size(spec)) > limits.AGENT_SPEC_BYTES:
        raise Rejection("spec", limits.over_budget("the agent's spec", size, limits.AGENT_SPEC_BYTES))
    if (size := limits.text_size([parsed.system_prompt])) > limits.SYSTEM_PROMPT_BYTES:
        raise Rejection("spec.systemPrompt", limits.over_budget("its characters", size, limits.SYSTEM_PROMPT_BYTES))
    for i, field in enumerate(parsed.context_schema):
        for key, values in (("default", [field.default]), ("enum", field.enum or [])):
            if any(isinstance(v, str) and len(v) > limits.CONTEXT_VALUE_CHARS for v in values):
                raise Rejection(f"spec.contextSchema[{i}].{key}",
                                f"Too long: a value may have at most {limits.CONTEXT_VALUE_CHARS} characters")
    defaults = {f.name: f.default for f in parsed.context_schema if f.default is not None}
    if (size := limits.json_size(defaults)) > limits.CONTEXT_BYTES:
        raise Rejection("spec.contextSchema", limits.over_budget("the defaults", size, limits.CONTEXT_BYTES))


def check_agent(spec: dict[str, Any]) -> AgentSpec:
    parsed = parse(AgentSpec, spec)
    check_sizes(spec, parsed)
    names = [f.name for f in parsed.context_schema]
    if len(set(names)) != len(names):
        raise Rejection("spec.contextSchema", "field names must be unique")
    for i, field in enumerate(parsed.context_schema):
        values = ([field.default] if field.default is not None else []) + list(field.enum or [])
        for value in values:
            ok = {"string": isinstance(value, str), "boolean": isinstance(value, bool),
                  "integer": isinstance(value, int) and not isinstance(value, bool),
                  "number": isinstance(value, int | float) and not isinstance(value, bool)}[field.type]
            if not ok:
                raise Rejection(f"spec.contextSchema[{i}]", f"{value!r} is not of type {field.type}")
        if field.enum is not None and field.default is not None and field.default not in field.enum:
            raise Rejection(f"spec.contextSchema[{i}].default", "must be one of the enum values")
    selected = parsed.skills
    if selected != "all":
        missing = [s for s in parsed.preload_skills if s not in selected]
        if missing:
            raise Rejection("spec.preloadSkills", f"not among spec.skills: {', '.join(missing)}")
    return parsed


def check_mcp_urls(parsed: AgentSpec, policy: Policy) -> None:
    """MCP URLs that point at link-local, metadata or API server addresses are refused as written
    (the worker checks the resolved addresses again when it connects)."""
    for i, server in enumerate(parsed.mcp_servers):
        if (problem := policy.url_problem(server.url)) is not None:
            raise Rejection(f"spec.mcpServers[{i}].url",
                            f"{server.url!r} is refused: {problem}; the operator config's mcpEgress "
                            "(allowedCidrs, allowedHosts) can allow it")


def check_static(parsed: AgentSpec, config: WorkerConfig) -> None:
    """The image allow-list and reserved env names (no lookup needed)."""
    problems = podaccess.static_problems(parsed.worker, config)
    if problems:
        field, reason = problems[0]
        raise Rejection(field, reason)


def recorded_author(spec: dict[str, Any], old_spec: dict[str, Any] | None, old_annotations: dict[str, str],
                    requester: SubmittedBy) -> str | None:
    """The author annotation the Agent must carry: none without pod-shaping or Secret-reading
    fields; the requester when they set or changed them; else the author recorded before."""
    fields = podaccess.authored_fields(spec)
    if not fields["worker"] and not any(fields["mcpHeaders"]):
        return None
    if old_spec is None or podaccess.authored_fields(old_spec) != fields:
        return podaccess.author_annotation(requester)
    return old_annotations.get(podaccess.AUTHOR_ANNOTATION)

"""Agent: a user-declared agent definition."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from sessionops.api import limits
from sessionops.api.common import ApiModel, ApprovalMode, Condition
from sessionops.api.snapshot import PRESERVE, ContextField, McpServer, Summarization, ToolName


class WorkerSettings(ApiModel):
    """Pod settings for this Agent's worker Jobs."""

    image: str | None = Field(default=None, description="Worker image; defaults to the operator config's image.")
    resources: dict[str, Any] | None = Field(
        default=None, description="Container resources (requests/limits), as in a Pod spec.",
        json_schema_extra=PRESERVE)
    service_account_name: str | None = Field(
        default=None, description="ServiceAccount of the worker pod; defaults to the namespace's worker account.")
    node_selector: dict[str, str] = Field(default_factory=dict, description="Node selector of the worker pod.")
    tolerations: list[dict[str, Any]] = Field(
        default_factory=list, description="Tolerations of the worker pod.",
        json_schema_extra={"items": {"type": "object", **PRESERVE}})
    env: list[dict[str, Any]] = Field(
        default_factory=list, description="Extra environment variables of the worker container.",
        json_schema_extra={"items": {"type": "object", **PRESERVE}})
    tools_image: str | None = Field(
        default=None, description="Image of the tools container; defaults to the operator config's toolsImage.")
    tools_resources: dict[str, Any] | None = Field(
        default=None, description="Resources (requests/limits) of the tools container, as in a Pod spec.",
        json_schema_extra=PRESERVE)
    command_timeout_seconds: int | None = Field(
        default=None, ge=1, le=3600,
        description="Upper bound of run_shell's timeout for this Agent; the operator config's "
                    "maxCommandTimeoutSeconds caps it.")


class AgentSpec(ApiModel):
    """An agent definition: prompt, model, approval, tools, limits, context schema, pod settings."""

    # tools/skills are unions ("all" or a list): not structural, so the validating webhook
    # checks them (a CEL rule cannot type-check an untyped field on a real API server).
    system_prompt: str = Field(description="System prompt of the agent.", min_length=1, max_length=limits.SYSTEM_PROMPT_CHARS)
    model: str | None = Field(default=None, description="Catalog model name; the system default when omitted.",
                              min_length=1, max_length=253)
    approval_mode: ApprovalMode | None = Field(
        default=None, description="Default or AlwaysTrust; the system default when omitted.")
    tools: Literal["all"] | list[ToolName] = Field(
        default="all", description='Built-in tools: "all" or a list of names.')
    require_approval: list[ToolName] = Field(
        default_factory=lambda: ["run_shell"], description="Tools that pause for a decision under Default.")
    mcp_servers: list[McpServer] = Field(default_factory=list, max_length=32, description="MCP servers.")
    skills: Literal["all"] | list[str] = Field(
        default_factory=list, description='Skills the agent may load: "all" or names.')
    preload_skills: list[str] = Field(default_factory=list, description="Skills put into the prompt up front.")
    summarization: Summarization | None = Field(default=None, description="History summarization settings.")
    max_execution_steps: int | None = Field(default=None, ge=1, le=10_000, description="Model calls per turn.")
    model_retries: int | None = Field(default=None, ge=0, le=20, description="Retries of a failed model call.")
    context_schema: list[ContextField] = Field(
        default_factory=list, max_length=64, description="Custom context fields sessions may set.")
    worker: WorkerSettings | None = Field(default=None, description="Worker pod settings.")


class AgentStatus(ApiModel):
    """Observed state, written by the operator."""

    observed_generation: int | None = Field(default=None, description="Last generation the operator saw.")
    model: str | None = Field(default=None, description="Effective model of a session that sets none: spec.model, "
                                                        "else the system default.")
    approval_mode: ApprovalMode | None = Field(default=None, description="Effective approval mode of a session that "
                                                                         "sets none.")
    conditions: list[Condition] = Field(default_factory=list, description="Ready: the model is in the catalog, the "
                                                                          "named skills exist and every referenced "
                                                                          "Secret is present.")
    kopf: dict[str, Any] | None = Field(default=None, description="Operator bookkeeping.", json_schema_extra=PRESERVE)


class Agent(ApiModel):
    """An agent definition."""

    api_version: str = "sessionops.dev/v1alpha1"
    kind: Literal["Agent"] = "Agent"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: AgentSpec
    status: AgentStatus | None = None

"""The context snapshot: the resolved, complete agent configuration frozen at receipt.

It never holds identity, authorization results, credentials or resource contents.
"""

from __future__ import annotations

import enum
from typing import Any, Literal

from pydantic import Field

from sessionops.api import limits
from sessionops.api.common import ApiModel, ApprovalMode

BUILTIN_TOOLS = ("read_file", "write_file", "list_files", "run_shell", "ask_user", "load_skill", "delegate")
ToolName = Literal["read_file", "write_file", "list_files", "run_shell", "ask_user", "load_skill", "delegate"]
PRESERVE = {"x-kubernetes-preserve-unknown-fields": True}


class Summarization(ApiModel):
    """When and how older history is summarized to keep the model's context bounded."""

    threshold_messages: int = Field(
        default=80, ge=4, le=10_000, description="Summarize once the history holds more messages than this.")
    keep_messages: int = Field(
        default=20, ge=1, le=10_000, description="How many most recent messages are kept verbatim.")
    prompt: str = Field(
        default="Summarize the conversation so far, keeping decisions, open tasks and facts.",
        max_length=8192, description="Instruction given to the model to write the summary.")
    tool_result_token_limit: int = Field(
        default=4000, ge=64, le=1_000_000,
        description="Tool results longer than this many tokens (about 4 characters each) are truncated.")


class SecretHeaders(ApiModel):
    """HTTP headers for an MCP server, taken from a Secret at execution time (never frozen)."""

    secret_name: str = Field(description="Secret in the session's namespace; each key is a header name.")


class McpServer(ApiModel):
    """An MCP server reached over streamable HTTP."""

    name: str = Field(description="Name of the server; its tools are exposed as <name>__<tool>.",
                      min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    url: str = Field(description="Streamable HTTP endpoint of the server.", pattern=r"^https?://", max_length=2048)
    headers_from: SecretHeaders | None = Field(default=None, description="Secret holding request headers.")


class ContextFieldType(enum.StrEnum):
    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"


class ContextField(ApiModel):
    """A custom context field an Agent declares; sessions fill it in, admission checks it."""

    name: str = Field(description="Field name as used in a session's spec.context.",
                      min_length=1, max_length=63, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    type: ContextFieldType = Field(description="Value type: string, integer, number or boolean.")
    enum: list[Any] | None = Field(
        default=None, description="Allowed values, when the field is an enumeration.",
        json_schema_extra={"items": PRESERVE})
    default: Any = Field(default=None, description="Value used when a session does not set the field.",
                         json_schema_extra=PRESERVE)
    required: bool = Field(default=False, description="A session must set the field when it has no default.")
    description: str = Field(default="", max_length=1024, description="What the field means, for users.")


class SnapshotSource(ApiModel):
    """Provenance of a snapshot, for audit."""

    agent_name: str = Field(description="Name of the Agent the snapshot was resolved from.")
    agent_uid: str = Field(default="", description="UID of that Agent.")
    agent_generation: int = Field(default=0, description="metadata.generation of that Agent at resolution.")
    config_version: str = Field(default="", description="Version (content hash) of the operator configuration used.")


class ContextSnapshot(ApiModel):
    """The full configurable agent context, resolved and complete (written by admission)."""

    system_prompt: str = Field(description="System prompt of the agent.", max_length=limits.SYSTEM_PROMPT_CHARS)
    model: str = Field(description="Catalog name of the chat model.", min_length=1, max_length=253)
    approval_mode: ApprovalMode = Field(
        description="Default: tools in requireApproval pause for a decision; AlwaysTrust: no approval pauses.")
    tools: Literal["all"] | list[ToolName] = Field(
        default="all", description='Built-in tools the agent may use: "all" or a list of names.')
    require_approval: list[ToolName] = Field(
        default_factory=lambda: ["run_shell"],
        description="Tools that pause for a decision when approvalMode is Default.")
    mcp_servers: list[McpServer] = Field(default_factory=list, description="MCP servers the agent may use.")
    skills: Literal["all"] | list[str] = Field(
        default_factory=list, description='Skills (ConfigMaps labelled sessionops.dev/skill) the agent may load: "all" or names.')
    preload_skills: list[str] = Field(default_factory=list, description="Skills put into the prompt up front.")
    summarization: Summarization = Field(default_factory=Summarization, description="History summarization.")
    max_execution_steps: int = Field(default=50, ge=1, le=10_000, description="Model calls allowed per turn.")
    model_retries: int = Field(default=2, ge=0, le=20, description="Retries of a failed model call.")
    context: dict[str, Any] = Field(
        default_factory=dict, description="The Agent's custom context fields with schema defaults filled in.",
        json_schema_extra=PRESERVE)
    source: SnapshotSource | None = Field(default=None, description="Where the snapshot came from (audit).")

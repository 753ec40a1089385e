"""The operator configuration: system defaults and the model catalog.

Loaded from the ConfigMap ``sessionops-config`` (key ``config.yaml``). Every field
says its unit, default and why.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from typing import Any, Literal

from pydantic import Field, model_validator

from sessionops.api.common import ApiModel, ApprovalMode
from sessionops.api.snapshot import PRESERVE, Summarization
from sessionops.api.transcript import TOOL_RESULT_MAX


class SecretKeyRef(ApiModel):
    """A key of a Secret; credentials are only ever referenced, never copied."""

    name: str = Field(description="Secret name (in the operator's namespace for catalog entries).")
    key: str = Field(description="Key inside the Secret.")


class ModelEntry(ApiModel):
    """A chat model users may name in Agents, sessions and overrides."""

    name: str = Field(description="Catalog name users write, e.g. gpt-4o or replay/hello.", min_length=1)
    provider: Literal["openai", "replay"] = Field(
        description="openai: any OpenAI-compatible endpoint; replay: the deterministic replay model.")
    model: str = Field(description="Provider's model id (for replay: the scenario name).", min_length=1)
    endpoint: str | None = Field(default=None, description="Base URL of the chat-completions API.")
    secret_key_ref: SecretKeyRef | None = Field(default=None, description="API key, read at execution time.")
    max_tokens: int | None = Field(default=None, ge=1, description="Completion token limit per call.")
    temperature: float | None = Field(default=None, ge=0, le=2, description="Sampling temperature.")


class Defaults(ApiModel):
    """Values used when neither a session nor its Agent sets them."""

    model: str = Field(description="Default model; must be in the catalog.")
    approval_mode: ApprovalMode = Field(default=ApprovalMode.DEFAULT, description="Default approval mode.")
    max_execution_steps: int = Field(default=50, ge=1, description="Model calls per turn (bounds runaway loops).")
    model_retries: int = Field(default=2, ge=0, description="Retries of a failed model call.")
    summarization: Summarization = Field(default_factory=Summarization, description="History summarization.")


class WorkerConfig(ApiModel):
    """How worker Jobs are built."""

    image: str = Field(default="ghcr.io/sessionops/sessionops:0.1.0", description="Worker image.")
    service_account_name: str = Field(default="sessionops-worker", description="Per-namespace worker account.")
    lease_duration_seconds: int = Field(default=30, ge=5, description="Session Lease duration; renewed at a third.")
    start_timeout_seconds: int = Field(
        default=300, ge=10, description="A Job whose pod never starts within this fails its segment.")
    config_error_seconds: int = Field(
        default=60, ge=1,
        description="A pod that cannot start for a configuration reason (missing Secret or key, image pull "
                    "failure, unschedulable) fails its run with the pod's reason after this many seconds, "
                    "without retries: the wait lets a Secret created just late still count.")
    max_retries: int = Field(default=2, ge=0, description="Retry segments after infrastructure failures.")
    database_secret: SecretKeyRef = Field(
        default_factory=lambda: SecretKeyRef(name="sessionops-worker-database", key="dsn"),
        description="Secret the operator writes in each worker namespace: the DSN of that namespace's own "
                    "database role, which opens only its checkpoint schema (docs/database.md). Worker pods "
                    "mount it as a file. A Secret of that name the operator did not write is never overwritten.")
    manage_database_roles: bool = Field(
        default=True,
        description="True: the operator creates each worker namespace's role (CREATEROLE) and writes its "
                    "Secret. False: a DBA pre-provisions the roles and writes the Secrets; the operator "
                    "only creates the schemas' tables and grants (docs/database.md).")
    database_connection_limit: int = Field(
        default=-1, ge=-1,
        description="CONNECTION LIMIT of each namespace's role (-1: none). A worker holds two connections "
                    "at most (checkpoints, then retention), so 2 x concurrent turns of the namespace.")
    tools_image: str | None = Field(
        default=None, description="Image of the tools container (read_file, write_file, list_files, run_shell run "
                                  "there, apart from the worker's credentials); default: the worker image.")
    tools_resources: dict[str, Any] | None = Field(
        default=None, description="Resources (requests/limits) of the tools container, as in a Pod spec; an Agent's "
                                  "spec.worker.toolsResources replaces them.",
        json_schema_extra=PRESERVE)
    max_command_timeout_seconds: int = Field(
        default=3600, ge=1, le=3600,
        description="Upper bound of run_shell's timeout, enforced by the tools process; an Agent may lower it "
                    "(spec.worker.commandTimeoutSeconds), never raise it.")
    allowed_images: list[str] | None = Field(
        default=None,
        description="Images an Agent's spec.worker.image may name (glob patterns, e.g. registry.corp/agents/*). "
                    "Default: the worker and tools images only. Checked at Agent admission and again before each Job.")

    def image_patterns(self) -> list[str]:
        """The allow-list: explicit patterns, else the images this configuration itself runs."""
        if self.allowed_images is not None:
            return list(self.allowed_images)
        return [self.image] + ([self.tools_image] if self.tools_image and self.tools_image != self.image else [])


class McpEgress(ApiModel):
    """Where MCP server URLs may point beyond the default (link-local, cloud metadata and the
    cluster's API server are refused at Agent admission and at connection time)."""

    allowed_cidrs: list[str] = Field(
        default_factory=list, description="Networks allowed even when otherwise refused, e.g. 169.254.10.0/24.")
    allowed_hosts: list[str] = Field(
        default_factory=list, description="Host names allowed whatever they resolve to (exact, lower case).")

    @model_validator(mode="after")
    def _valid_networks(self) -> McpEgress:
        for cidr in self.allowed_cidrs:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                raise ValueError(f"mcpEgress.allowedCidrs: {cidr!r} is not a network (CIDR)") from None
        return self


class OperatorConfig(ApiModel):
    """The whole ``config.yaml``."""

    defaults: Defaults = Field(description="System defaults.")
    models: list[ModelEntry] = Field(description="The model catalog: a model is available when listed here.")
    worker: WorkerConfig = Field(default_factory=WorkerConfig, description="Worker Job settings.")
    checkpoint_retention: int = Field(default=20, ge=1, description="Checkpoints kept per thread.")
    transcript_tool_result_chars: int = Field(
        default=TOOL_RESULT_MAX, ge=256, le=64 * 1024,
        description="Characters of each tool result kept in a turn's transcript (the rest is cut with a marker; "
                    "the checkpoint keeps it whole).")
    delegation_concurrency: int = Field(default=4, ge=1, description="Concurrent running turns per delegation tree.")
    delegation_max_depth: int = Field(
        default=5, ge=1, description="Levels of children below a root session; deeper delegate calls are refused.")
    delegation_timeout_seconds: int = Field(
        default=3600, ge=1, description="How long a run waits for its children before it resumes without them.")
    worker_namespaces: list[str] | None = Field(
        default=None,
        description="Namespaces the operator serves: sessions and inputs elsewhere are refused at admission. "
                    "None: every namespace but the operator's own (the chart always sets the list).")
    mcp_egress: McpEgress = Field(default_factory=McpEgress, description="Widens where MCP servers may be reached.")

    @model_validator(mode="after")
    def _default_model_in_catalog(self) -> OperatorConfig:
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            raise ValueError("models: catalog names must be unique")
        if self.defaults.model not in names:
            raise ValueError(f"defaults.model: {self.defaults.model!r} is not in the model catalog")
        return self

    def model_entry(self, name: str) -> ModelEntry | None:
        return next((m for m in self.models if m.name == name), None)

    @property
    def version(self) -> str:
        """Content hash: recorded in snapshots so an audit can tell which config resolved them."""
        raw = json.dumps(self.dump(), sort_keys=True).encode()
        return hashlib.sha256(raw).hexdigest()[:12]

"""The operator configuration: system defaults and the model catalog.

Loaded from the ConfigMap ``sessionops-config`` (key ``config.yaml``). Every field
says its unit, default and why.
"""

from __future__ import annotations

import hashlib
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
        default_factory=lambda: SecretKeyRef(name="sessionops-database", key="url"),
        description="Secret (in each worker namespace) holding the PostgreSQL DSN of the checkpoints.")
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

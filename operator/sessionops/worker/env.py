"""The segment's environment, as ``sessionops.execution.jobs.job_body`` writes it.

Parsing only: a missing or malformed variable is an ``EnvError`` naming the variable
(never its value). Credentials are never in the environment: ``SESSIONOPS_DATABASE_URL_FILE``
and ``SESSIONOPS_MODEL_API_KEY_FILE`` name files (mounted Secrets) read here; an error names
the variable and the path, never the content.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from sessionops.api.config import McpEgress
from sessionops.api.run import SegmentKind
from sessionops.api.transcript import TOOL_RESULT_MAX
from sessionops.toolbox.protocol import SOCKET_PATH


class EnvError(ValueError):
    """The Job's environment is incomplete or malformed (an operator bug, not a user error)."""


def read_secret_file(variable: str, path: str) -> str:
    """The stripped content of a mounted Secret file; ``EnvError`` names the variable and the path
    (an unreadable or empty file), never what it holds."""
    try:
        value = Path(path).read_text().strip()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
        raise EnvError(f"{variable}: cannot read {path} ({reason})") from None
    if not value:
        raise EnvError(f"{variable}: {path} is empty")
    return value


@dataclasses.dataclass(frozen=True)
class ModelEnv:
    """The catalog entry of the turn's model, resolved by the operator at Job creation."""

    name: str
    """Catalog name (e.g. ``replay/hello``), for logs."""
    provider: str
    """``openai`` or ``replay``: both speak OpenAI chat completions."""
    model_id: str
    """Provider's model id; for replay, the scenario name."""
    endpoint: str | None = None
    """Base URL of the chat-completions API; None: the provider's default."""
    max_tokens: int | None = None
    temperature: float | None = None
    api_key: str | None = dataclasses.field(default=None, repr=False)
    """From the file of the catalog entry's Secret; never logged (``repr=False``)."""


@dataclasses.dataclass(frozen=True)
class WorkerEnv:
    namespace: str
    run: str
    segment: int
    kind: SegmentKind
    database_url: str = dataclasses.field(repr=False)
    """PostgreSQL DSN of the checkpoints; may carry a password, never logged."""
    model: ModelEnv | None
    """None when the snapshot's model is not in the catalog any more: the run fails."""
    resume_input: str | None = None
    """Resume segments: the AgentInput this segment answers."""
    lease_seconds: int = 30
    """Session Lease duration in seconds; renewed every third of it."""
    lease_wait_seconds: float = 60.0
    """How long to wait for another live holder of the Lease before exiting non-zero
    (the operator then retries). Default: twice the Lease duration, so a crashed
    holder's Lease has expired well within it."""
    identity: str = ""
    """Host name: the pod name in a cluster (and under the pod runner)."""
    checkpoint_retention: int = 20
    """Checkpoints of the thread kept after each segment (the operator config's ``checkpointRetention``)."""
    transcript_tool_result_chars: int = TOOL_RESULT_MAX
    """Characters of a tool result kept in the transcript (``transcriptToolResultChars``)."""
    mcp_egress: McpEgress = dataclasses.field(default_factory=McpEgress)
    """The operator config's ``mcpEgress`` (``SESSIONOPS_MCP_EGRESS``, JSON): where MCP servers may be reached."""
    tools_socket: Path = Path(SOCKET_PATH)
    """The tools process's Unix socket (the pod's other container, ``sessionops.toolbox``)."""
    tools_wait_seconds: float = 60.0
    """How long the worker waits for the tools process to answer before exiting non-zero."""

    @property
    def segment_name(self) -> str:
        """Equal to the segment's Job name (``<run>-<n>``)."""
        return f"{self.run}-{self.segment}"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> WorkerEnv:
        env = os.environ if environ is None else environ

        def required(name: str) -> str:
            value = env.get(name, "").strip()
            if not value:
                raise EnvError(f"{name} is not set")
            return value

        def secret_file(name: str) -> str | None:
            path = env.get(name, "").strip()
            return read_secret_file(name, path) if path else None

        def number(name: str, default: float | None, cast: type = int) -> float | None:
            raw = env.get(name, "").strip()
            if not raw:
                return default
            try:
                return cast(raw)
            except ValueError:
                raise EnvError(f"{name} is not a valid {cast.__name__}") from None

        try:
            kind = SegmentKind(required("SESSIONOPS_SEGMENT_KIND"))
        except ValueError:
            raise EnvError("SESSIONOPS_SEGMENT_KIND must be Start, Resume or Retry") from None
        lease_seconds = int(number("SESSIONOPS_LEASE_SECONDS", 30) or 30)
        retention = int(number("SESSIONOPS_CHECKPOINT_RETENTION", 20) or 0)
        if retention < 1:
            raise EnvError("SESSIONOPS_CHECKPOINT_RETENTION must be at least 1: the latest checkpoint is the thread")
        result_chars = int(number("SESSIONOPS_TRANSCRIPT_TOOL_RESULT_CHARS", TOOL_RESULT_MAX) or 0)
        if result_chars < 1:
            raise EnvError("SESSIONOPS_TRANSCRIPT_TOOL_RESULT_CHARS must be at least 1")
        if lease_seconds < 3:
            raise EnvError("SESSIONOPS_LEASE_SECONDS must be at least 3")
        model = None
        if env.get("SESSIONOPS_MODEL_ID", "").strip():
            model = ModelEnv(
                name=env.get("SESSIONOPS_MODEL_NAME", "").strip() or required("SESSIONOPS_MODEL_ID"),
                provider=required("SESSIONOPS_MODEL_PROVIDER"),
                model_id=required("SESSIONOPS_MODEL_ID"),
                endpoint=env.get("SESSIONOPS_MODEL_ENDPOINT", "").strip() or None,
                max_tokens=number("SESSIONOPS_MODEL_MAX_TOKENS", None),  # type: ignore[arg-type]
                temperature=number("SESSIONOPS_MODEL_TEMPERATURE", None, float),
                api_key=secret_file("SESSIONOPS_MODEL_API_KEY_FILE"),
            )
        try:
            egress = McpEgress.model_validate_json(env.get("SESSIONOPS_MCP_EGRESS", "").strip() or "{}")
        except ValidationError:
            raise EnvError("SESSIONOPS_MCP_EGRESS is not a valid mcpEgress object (JSON)") from None
        # A Resume segment without an input answers a Delegation waitpoint (children's outcomes).
        resume = env.get("SESSIONOPS_RESUME_INPUT", "").strip() or None
        return cls(
            namespace=required("SESSIONOPS_NAMESPACE"),
            run=required("SESSIONOPS_RUN"),
            segment=int(number("SESSIONOPS_SEGMENT", None) or required("SESSIONOPS_SEGMENT")),
            kind=kind,
            database_url=read_secret_file("SESSIONOPS_DATABASE_URL_FILE", required("SESSIONOPS_DATABASE_URL_FILE")),
            model=model,
            resume_input=resume,
            lease_seconds=lease_seconds,
            lease_wait_seconds=float(number("SESSIONOPS_LEASE_WAIT_SECONDS", 2.0 * lease_seconds, float) or 0),
            identity=env.get("HOSTNAME", "").strip() or socket.gethostname(),
            checkpoint_retention=retention,
            transcript_tool_result_chars=result_chars,
            mcp_egress=egress,
            tools_socket=Path(required("SESSIONOPS_TOOLS_SOCKET")),
            tools_wait_seconds=float(number("SESSIONOPS_TOOLS_WAIT_SECONDS", 60.0, float) or 0),
        )

"""Worker Job manifests (pure). One Job per execution segment, named ``<run>-<n>``."""

from __future__ import annotations

from typing import Any

from sessionops.api.agent import WorkerSettings
from sessionops.api.config import ModelEntry, OperatorConfig
from sessionops.scheduling.names import RUN_LABEL, SESSION_LABEL

SEGMENT_LABEL = "sessionops.dev/segment"
WORKDIR = "/work"


def _env(name: str, value: Any) -> dict[str, Any]:
    return {"name": name, "value": str(value)}


def model_env(entry: ModelEntry) -> list[dict[str, Any]]:
    """The catalog entry as env; the key only ever as a secretKeyRef (never copied)."""
    env = [_env("SESSIONOPS_MODEL_NAME", entry.name), _env("SESSIONOPS_MODEL_PROVIDER", entry.provider),
           _env("SESSIONOPS_MODEL_ID", entry.model)]
    if entry.endpoint:
        env.append(_env("SESSIONOPS_MODEL_ENDPOINT", entry.endpoint))
    if entry.max_tokens is not None:
        env.append(_env("SESSIONOPS_MODEL_MAX_TOKENS", entry.max_tokens))
    if entry.temperature is not None:
        env.append(_env("SESSIONOPS_MODEL_TEMPERATURE", entry.temperature))
    if entry.secret_key_ref is not None:
        env.append({"name": "SESSIONOPS_MODEL_API_KEY", "valueFrom": {"secretKeyRef": {
            "name": entry.secret_key_ref.name, "key": entry.secret_key_ref.key}}})
    return env


def job_body(run: dict[str, Any], segment: int, kind: str, *, config: OperatorConfig,
             worker: WorkerSettings | None, resume_input: str | None = None) -> dict[str, Any]:
    meta = run["metadata"]
    name = f"{meta['name']}-{segment}"
    session = run["spec"]["sessionRef"]["name"]
    snapshot_model = run["spec"]["contextSnapshot"]["model"]
    entry = config.model_entry(snapshot_model)
    worker = worker or WorkerSettings()
    labels = {SESSION_LABEL: session, RUN_LABEL: meta["name"], SEGMENT_LABEL: str(segment),
              "app.kubernetes.io/name": "sessionops-worker", "app.kubernetes.io/managed-by": "sessionops"}
    env = [
        {"name": "SESSIONOPS_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        _env("SESSIONOPS_RUN", meta["name"]), _env("SESSIONOPS_SEGMENT", segment),
        _env("SESSIONOPS_SEGMENT_KIND", kind), _env("SESSIONOPS_WORKDIR", WORKDIR),
        _env("SESSIONOPS_LEASE_SECONDS", config.worker.lease_duration_seconds),
        _env("SESSIONOPS_CHECKPOINT_RETENTION", config.checkpoint_retention),
        _env("SESSIONOPS_TRANSCRIPT_TOOL_RESULT_CHARS", config.transcript_tool_result_chars),
        _env("SESSIONOPS_MCP_EGRESS", config.mcp_egress.model_dump_json(by_alias=True)),
        {"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {
            "name": config.worker.database_secret.name, "key": config.worker.database_secret.key}}},
        *(model_env(entry) if entry is not None else []),
        *([_env("SESSIONOPS_RESUME_INPUT", resume_input)] if resume_input else []),
        *worker.env,
    ]
    container: dict[str, Any] = {
        "name": "worker",
        "image": worker.image or config.worker.image,
        "command": ["python", "-m", "sessionops.worker"],
        "env": env,
        "workingDir": WORKDIR,
        "volumeMounts": [{"name": "work", "mountPath": WORKDIR}, {"name": "tmp", "mountPath": "/tmp"}],
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
    }
    if worker.resources:
        container["resources"] = worker.resources
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": worker.service_account_name or config.worker.service_account_name,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "fsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [{"name": "work", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
    }
    if worker.node_selector:
        pod_spec["nodeSelector"] = worker.node_selector
    if worker.tolerations:
        pod_spec["tolerations"] = worker.tolerations
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels,
                     "ownerReferences": [{"apiVersion": run.get("apiVersion", "sessionops.dev/v1alpha1"),
                                          "kind": "AgentRun", "name": meta["name"], "uid": meta["uid"],
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": {
            # The operator decides retries (from the last checkpoint), never the Job controller.
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }

"""Worker Job manifests (pure). One Job per execution segment, named ``<run>-<n>``."""

from __future__ import annotations

from typing import Any

from sessionops.api.agent import WorkerSettings
from sessionops.api.config import ModelEntry, OperatorConfig
from sessionops.api.names import RUN_LABEL, SESSION_LABEL, owner_reference
from sessionops.views import RunView

SEGMENT_LABEL = "sessionops.dev/segment"
WORKDIR = "/work"
SECRETS_DIR = "/var/run/secrets/sessionops"
"""Credentials are files under here, in the worker container only (never env: a child
process such as a tool inherits env, and ``/proc/<pid>/environ`` shows it)."""
MODEL_KEY_FILE = f"{SECRETS_DIR}/model/api-key"
DATABASE_DSN_FILE = f"{SECRETS_DIR}/database/dsn"
SECRET_FILE_MODE = 0o400
"""Owner-read only; the kubelet adds the pod's fsGroup as group reader (``0440``)."""
TOOLS_SOCKET_DIR = "/run/sessionops-tools"
TOOLS_SOCKET = f"{TOOLS_SOCKET_DIR}/tools.sock"
WORKER_UID = 65532
TOOLS_UID = 65533
"""The tools container's own user: it shares the work and socket volumes with the worker
through the pod's fsGroup (the worker's group), nothing else."""
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_SECONDS = 3607
"""Lifetime of the worker's projected token (the kubelet's default); the kubelet renews it."""
_RESTRICTED = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
               "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}


def _env(name: str, value: Any) -> dict[str, Any]:
    return {"name": name, "value": str(value)}


def _secret_volume(volume: str, secret: str, key: str, file: str) -> dict[str, Any]:
    """A Secret volume holding one key as one file (``items``), read-only for its owner."""
    return {"name": volume, "secret": {"secretName": secret, "items": [{"key": key, "path": file}],
                                       "defaultMode": SECRET_FILE_MODE}}


def _mount(volume: str, file_path: str) -> dict[str, Any]:
    return {"name": volume, "mountPath": file_path.rsplit("/", 1)[0], "readOnly": True}


def credential_volumes(entry: ModelEntry | None, config: OperatorConfig) -> tuple[list[dict[str, Any]],
                                                                                 list[dict[str, Any]]]:
    """(pod volumes, worker container mounts) of the database DSN and the model key."""
    db = config.worker.database_secret
    volumes = [_secret_volume("database-credential", db.name, db.key, DATABASE_DSN_FILE.rsplit("/", 1)[1])]
    mounts = [_mount("database-credential", DATABASE_DSN_FILE)]
    if entry is not None and entry.secret_key_ref is not None:
        ref = entry.secret_key_ref
        volumes.append(_secret_volume("model-credential", ref.name, ref.key, MODEL_KEY_FILE.rsplit("/", 1)[1]))
        mounts.append(_mount("model-credential", MODEL_KEY_FILE))
    return volumes, mounts


def model_env(entry: ModelEntry) -> list[dict[str, Any]]:
    """The catalog entry as env; the key only as the path of its file (never its value)."""
    env = [_env("SESSIONOPS_MODEL_NAME", entry.name), _env("SESSIONOPS_MODEL_PROVIDER", entry.provider),
           _env("SESSIONOPS_MODEL_ID", entry.model)]
    if entry.endpoint:
        env.append(_env("SESSIONOPS_MODEL_ENDPOINT", entry.endpoint))
    if entry.max_tokens is not None:
        env.append(_env("SESSIONOPS_MODEL_MAX_TOKENS", entry.max_tokens))
    if entry.temperature is not None:
        env.append(_env("SESSIONOPS_MODEL_TEMPERATURE", entry.temperature))
    if entry.secret_key_ref is not None:
        env.append(_env("SESSIONOPS_MODEL_API_KEY_FILE", MODEL_KEY_FILE))
    return env


def command_timeout(config: OperatorConfig, worker: WorkerSettings) -> int:
    """run_shell's upper bound: the Agent's, capped by the operator's (an Agent may only lower it)."""
    limit = config.worker.max_command_timeout_seconds
    return min(worker.command_timeout_seconds or limit, limit)


def tools_container(config: OperatorConfig, worker: WorkerSettings) -> dict[str, Any]:
    """The tools process (``sessionops.toolbox``): the workspace, a socket, its own UID; no
    Secret, no token, no environment but its own."""
    container: dict[str, Any] = {
        "name": "tools",
        "image": worker.tools_image or config.worker.tools_image or worker.image or config.worker.image,
        "restartPolicy": "Always",
        "command": ["python", "-m", "sessionops.toolbox"],
        "env": [_env("SESSIONOPS_WORKDIR", WORKDIR), _env("SESSIONOPS_TOOLS_SOCKET", TOOLS_SOCKET),
                _env("SESSIONOPS_TOOLS_MAX_TIMEOUT_SECONDS", command_timeout(config, worker)),
                _env("HOME", WORKDIR)],
        "workingDir": WORKDIR,
        "volumeMounts": [{"name": "work", "mountPath": WORKDIR}, {"name": "tools-tmp", "mountPath": "/tmp"},
                         {"name": "tools-socket", "mountPath": TOOLS_SOCKET_DIR}],
        "securityContext": {**_RESTRICTED, "runAsUser": TOOLS_UID, "runAsGroup": TOOLS_UID},
    }
    resources = worker.tools_resources or config.worker.tools_resources
    if resources:
        container["resources"] = resources
    return container


def kube_api_access() -> dict[str, Any]:
    """The projected volume a kubelet would automount (token, cluster CA, namespace), mounted
    by the worker container alone."""
    return {"name": "kube-api-access", "projected": {"defaultMode": 0o444, "sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_SECONDS}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}


def job_body(run: dict[str, Any], segment: int, kind: str, *, config: OperatorConfig,
             worker: WorkerSettings | None, resume_input: str | None = None) -> dict[str, Any]:
    meta = run["metadata"]
    name = f"{meta['name']}-{segment}"
    view = RunView(run)
    session = view.session_name
    snapshot_model = view.model
    entry = config.model_entry(snapshot_model)
    worker = worker or WorkerSettings()
    credential_vols, credential_mounts = credential_volumes(entry, config)
    labels = {SESSION_LABEL: session, RUN_LABEL: meta["name"], SEGMENT_LABEL: str(segment),
              "app.kubernetes.io/name": "sessionops-worker", "app.kubernetes.io/managed-by": "sessionops"}
    env = [
        {"name": "SESSIONOPS_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        _env("SESSIONOPS_RUN", meta["name"]), _env("SESSIONOPS_SEGMENT", segment),
        _env("SESSIONOPS_SEGMENT_KIND", kind), _env("SESSIONOPS_TOOLS_SOCKET", TOOLS_SOCKET),
        _env("SESSIONOPS_LEASE_SECONDS", config.worker.lease_duration_seconds),
        _env("SESSIONOPS_CHECKPOINT_RETENTION", config.checkpoint_retention),
        _env("SESSIONOPS_TRANSCRIPT_TOOL_RESULT_CHARS", config.transcript_tool_result_chars),
        _env("SESSIONOPS_MCP_EGRESS", config.mcp_egress.model_dump_json(by_alias=True)),
        _env("SESSIONOPS_DATABASE_URL_FILE", DATABASE_DSN_FILE),
        *(model_env(entry) if entry is not None else []),
        *([_env("SESSIONOPS_RESUME_INPUT", resume_input)] if resume_input else []),
        *worker.env,
    ]
    container: dict[str, Any] = {
        "name": "worker",
        "image": worker.image or config.worker.image,
        "command": ["python", "-m", "sessionops.worker"],
        "env": env,
        # Not the workspace: the tools write there, and `python -m` imports from its working directory.
        "workingDir": "/tmp",
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"},
                         {"name": "tools-socket", "mountPath": TOOLS_SOCKET_DIR},
                         {"name": "kube-api-access", "mountPath": SERVICE_ACCOUNT_DIR, "readOnly": True},
                         *credential_mounts],
        "securityContext": dict(_RESTRICTED),
    }
    if worker.resources:
        container["resources"] = worker.resources
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": worker.service_account_name or config.worker.service_account_name,
        # Only the worker container mounts the token (kube-api-access): the tools get none.
        "automountServiceAccountToken": False,
        # Service links would put every Service's address into the tools' environment too.
        "enableServiceLinks": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": WORKER_UID, "fsGroup": WORKER_UID,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        # A native sidecar: started (and stopped) around the worker, so the Job ends with the worker.
        "initContainers": [tools_container(config, worker)],
        "containers": [container],
        "volumes": [
            {"name": "work", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}, {"name": "tools-tmp", "emptyDir": {}},
            {"name": "tools-socket", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
            kube_api_access(), *credential_vols],
    }
    if worker.node_selector:
        pod_spec["nodeSelector"] = worker.node_selector
    if worker.tolerations:
        pod_spec["tolerations"] = worker.tolerations
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels,
                     "ownerReferences": [owner_reference(run, kind="AgentRun", controller=True, block_owner_deletion=True)]},
        "spec": {
            # The operator decides retries (from the last checkpoint), never the Job controller.
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }

"""The worker Job's credentials: Secret volumes mounted read-only in the worker container, env
naming only file paths (never a value, never a secretKeyRef for the model key or the DSN)."""

from __future__ import annotations

import json
from typing import Any

from sessionops.api.config import OperatorConfig
from sessionops.execution import jobs

CONFIG = OperatorConfig.model_validate({"defaults": {"model": "gpt"}, "models": [
    {"name": "gpt", "provider": "openai", "model": "gpt-4o", "secretKeyRef": {"name": "openai", "key": "api-key"}},
    {"name": "replay/hello", "provider": "replay", "model": "hello"}]})
RUN = {"apiVersion": "sessionops.dev/v1alpha1", "kind": "AgentRun",
       "metadata": {"name": "s1-t1", "namespace": "team-a", "uid": "u1"},
       "spec": {"sessionRef": {"name": "s1"}, "contextSnapshot": {"model": "gpt"}}}


def body(model: str = "gpt") -> dict[str, Any]:
    run = json.loads(json.dumps(RUN))
    run["spec"]["contextSnapshot"]["model"] = model
    return jobs.job_body(run, 1, "Start", config=CONFIG, worker=None)


def worker_container(job: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in job["spec"]["template"]["spec"]["containers"] if c["name"] == "worker")


def test_the_worker_env_names_credential_files_and_holds_no_secret_reference() -> None:
    env = {e["name"]: e for e in worker_container(body())["env"]}
    assert env["SESSIONOPS_DATABASE_URL_FILE"] == {"name": "SESSIONOPS_DATABASE_URL_FILE",
                                                   "value": "/var/run/secrets/sessionops/database/dsn"}
    assert env["SESSIONOPS_MODEL_API_KEY_FILE"] == {"name": "SESSIONOPS_MODEL_API_KEY_FILE",
                                                    "value": "/var/run/secrets/sessionops/model/api-key"}
    assert "DATABASE_URL" not in env and "SESSIONOPS_MODEL_API_KEY" not in env
    assert not [e for e in env.values() if "secretKeyRef" in (e.get("valueFrom") or {})]


def test_the_credentials_are_secret_volumes_read_only_for_their_owner_in_the_worker_container_only() -> None:
    job = body()
    pod = job["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["database-credential"]["secret"] == {
        "secretName": "sessionops-worker-database", "items": [{"key": "dsn", "path": "dsn"}], "defaultMode": 0o400}
    assert volumes["model-credential"]["secret"] == {
        "secretName": "openai", "items": [{"key": "api-key", "path": "api-key"}], "defaultMode": 0o400}
    mounts = {m["name"]: m for m in worker_container(job)["volumeMounts"]}
    assert mounts["database-credential"] == {"name": "database-credential", "readOnly": True,
                                             "mountPath": "/var/run/secrets/sessionops/database"}
    assert mounts["model-credential"] == {"name": "model-credential", "readOnly": True,
                                          "mountPath": "/var/run/secrets/sessionops/model"}
    # No other container of the pod mounts them (the tools run elsewhere, without credentials).
    for container in pod["containers"]:
        if container["name"] != "worker":
            assert not {m["name"] for m in container.get("volumeMounts") or []} & set(mounts)


def test_a_model_without_a_key_gets_no_key_volume_nor_variable() -> None:
    job = body("replay/hello")
    assert {v["name"] for v in job["spec"]["template"]["spec"]["volumes"]} >= {"database-credential"}
    assert "model-credential" not in {v["name"] for v in job["spec"]["template"]["spec"]["volumes"]}
    assert "SESSIONOPS_MODEL_API_KEY_FILE" not in {e["name"] for e in worker_container(job)["env"]}


def test_the_database_secret_name_and_key_come_from_the_config() -> None:
    config = CONFIG.model_copy(update={"worker": CONFIG.worker.model_copy(update={
        "database_secret": CONFIG.worker.database_secret.model_copy(update={"name": "db", "key": "k"})})})
    job = jobs.job_body(RUN, 1, "Start", config=config, worker=None)
    (volume,) = [v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "database-credential"]
    assert volume["secret"]["secretName"] == "db" and volume["secret"]["items"] == [{"key": "k", "path": "dsn"}]

"""The rendered operator configuration, the embedded PostgreSQL and the replay model."""

from __future__ import annotations

import base64
import urllib.parse
from pathlib import Path

import yaml

from sessionops.api.config import OperatorConfig
from sessionops.platform.configuration import CONFIG_KEY, parse_config
from sessionops.replay.scenarios import load_scenario_dirs
from tests.chart.helm import CHART, NAMESPACE, RELEASE, ROOT, Rendered, Renderer, parse_docs

REPLAY_ENDPOINT = f"http://{RELEASE}-replay.{NAMESPACE}.svc:8089/v1"


def _config(rendered: Rendered) -> OperatorConfig:
    configmap = rendered.one("ConfigMap", "sessionops-config")
    assert set(configmap["data"]) == {CONFIG_KEY}
    config = OperatorConfig.model_validate(yaml.safe_load(configmap["data"][CONFIG_KEY]))
    # ... and exactly as the operator loads it.
    assert parse_config(configmap["data"]) == config
    return config


def test_config_is_an_operator_config(rendered: Rendered) -> None:
    config = _config(rendered)
    assert config.model_entry(config.defaults.model) is not None
    deployment = rendered.find("Deployment", "-operator")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    # Workers run the operator's image under the account the chart creates.
    assert config.worker.image == container["image"]
    accounts = {d["metadata"]["name"] for d in rendered.of_kind("ServiceAccount")}
    assert config.worker.service_account_name in accounts


def test_config_defaults(default: Rendered) -> None:
    config = _config(default)
    assert config.defaults.model == "gpt-4o-mini"
    assert config.defaults.approval_mode == "Default"
    assert [m.name for m in config.models] == ["gpt-4o-mini"]
    entry = config.models[0]
    assert entry.provider == "openai" and entry.secret_key_ref is not None
    assert entry.secret_key_ref.name == "sessionops-openai"
    assert config.worker.service_account_name == "sessionops-worker"
    assert config.worker.image == "ghcr.io/sessionops/sessionops:0.1.0"
    # The tools container runs the worker image unless told otherwise, run_shell at most an hour.
    assert config.worker.tools_image == config.worker.image and not config.worker.tools_resources
    assert config.worker.max_command_timeout_seconds == 3600
    assert config.checkpoint_retention == 20 and config.delegation_concurrency == 4
    assert config.delegation_timeout_seconds == 3600 and config.delegation_max_depth == 5


def test_every_config_value_reaches_the_config(renderer: Renderer) -> None:
    values = {
        "config": {
            "defaults": {"model": "local", "approvalMode": "AlwaysTrust", "maxExecutionSteps": 7,
                         "modelRetries": 0, "summarization": {"thresholdMessages": 40, "keepMessages": 10}},
            "models": [{"name": "local", "provider": "openai", "model": "llama", "endpoint": "http://llm:8000/v1",
                        "maxTokens": 1024, "temperature": 0.2}],
            "checkpointRetention": 5,
            "delegationConcurrency": 2,
            "delegationTimeoutSeconds": 90,
            "delegationMaxDepth": 2,
        },
        "worker": {"image": "registry.local/worker:9", "serviceAccountName": "agents",
                   "leaseDurationSeconds": 60, "startTimeoutSeconds": 120, "maxRetries": 1,
                   "toolsImage": "registry.local/tools:3", "toolsResources": {"limits": {"memory": "512Mi"}},
                   "maxCommandTimeoutSeconds": 300},
    }
    out = renderer.template_values("helm4", values)
    assert out.returncode == 0, out.stderr
    rendered = Rendered(list(yaml.safe_load_all(out.stdout)), out.stdout, values)
    config = _config(rendered)
    assert config.defaults.approval_mode == "AlwaysTrust"
    assert config.defaults.max_execution_steps == 7 and config.defaults.model_retries == 0
    assert config.defaults.summarization.threshold_messages == 40
    assert config.defaults.summarization.keep_messages == 10
    assert config.models[0].max_tokens == 1024 and config.models[0].temperature == 0.2
    assert config.checkpoint_retention == 5 and config.delegation_concurrency == 2
    assert config.delegation_timeout_seconds == 90 and config.delegation_max_depth == 2
    assert config.worker.image == "registry.local/worker:9"
    assert config.worker.service_account_name == "agents"
    assert (config.worker.lease_duration_seconds, config.worker.start_timeout_seconds,
            config.worker.max_retries) == (60, 120, 1)
    assert config.worker.tools_image == "registry.local/tools:3"
    assert config.worker.tools_resources == {"limits": {"memory": "512Mi"}}
    assert config.worker.max_command_timeout_seconds == 300
    assert [d for d in rendered.of_kind("ServiceAccount") if d["metadata"]["name"] == "agents"]
    # The allow-list of Agent images defaults to the worker and tools images the chart runs.
    assert config.worker.image_patterns() == ["registry.local/worker:9", "registry.local/tools:3"]
    assert config.worker_namespaces == ["default"]
    assert config.mcp_egress.allowed_cidrs == [] and config.mcp_egress.allowed_hosts == []
    # No catalog secret: no Role for the workers in the operator's namespace at all (an empty
    # resourceNames would allow every name), and never the admin DSN.
    assert not [d for d in rendered.of_kind("Role") if d["metadata"]["name"] == f"{RELEASE}-worker-secrets"]
    assert config.worker.database_secret.name == "sessionops-worker-database"
    assert config.worker.database_secret.key == "dsn" and config.worker.manage_database_roles is True


def test_security_values_reach_the_config(renderer: Renderer) -> None:
    values = {"worker": {"allowedImages": ["registry.corp/agents/*"]}, "workerNamespaces": ["team-a", "team-b"],
              "config": {"mcpEgress": {"allowedCidrs": ["169.254.10.0/24"], "allowedHosts": ["tools.corp"]}}}
    out = renderer.template_values("helm4", values)
    assert out.returncode == 0, out.stderr
    config = _config(Rendered(list(yaml.safe_load_all(out.stdout)), out.stdout, values))
    assert config.worker.image_patterns() == ["registry.corp/agents/*"]
    assert config.worker_namespaces == ["team-a", "team-b"]
    assert config.mcp_egress.allowed_cidrs == ["169.254.10.0/24"]
    assert config.mcp_egress.allowed_hosts == ["tools.corp"]


def test_the_default_image_allow_list_holds_the_tools_image_too(renderer: Renderer) -> None:
    values = {"worker": {"image": "registry.local/worker:9", "toolsImage": "registry.local/tools:9"}}
    out = renderer.template_values("helm4", values)
    assert out.returncode == 0, out.stderr
    config = _config(Rendered(list(yaml.safe_load_all(out.stdout)), out.stdout, values))
    assert config.worker.allowed_images == ["registry.local/worker:9", "registry.local/tools:9"]


# --- database --------------------------------------------------------------------------

def test_embedded_postgresql(default: Rendered) -> None:
    name = f"{RELEASE}-postgresql"
    statefulset = default.one("StatefulSet", name)
    spec = statefulset["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["image"] == "docker.io/library/postgres:16-alpine"
    assert spec["securityContext"]["runAsUser"] == 70  # the image's postgres user
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "8Gi"
    assert "storageClassName" not in claim["spec"]
    env = {e["name"]: e for e in container["env"]}
    assert env["PGDATA"]["value"].startswith("/var/lib/postgresql/data/")
    assert env["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": name, "key": "password"}
    secret = default.one("Secret", name)
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert len(data["password"]) == 32
    dsn = urllib.parse.urlsplit(data["DATABASE_URL"])
    assert dsn.scheme == "postgresql"
    assert (dsn.username, dsn.password) == ("sessionops", data["password"])
    assert (dsn.hostname, dsn.port, dsn.path) == (f"{name}.{NAMESPACE}.svc", 5432, "/sessionops")
    service = default.one("Service", name)
    assert service["spec"]["selector"] == statefulset["spec"]["selector"]["matchLabels"]
    assert statefulset["spec"]["serviceName"] == name


def test_postgresql_image_can_be_pinned_by_digest(renderer: Renderer) -> None:
    digest = "sha256:" + "0" * 64
    out = renderer.template_values("helm4", {"postgresql": {"image": {"repository": "docker.io/library/postgres",
                                                                       "tag": "16-alpine", "digest": digest}}})
    assert out.returncode == 0, out.stderr
    assert f"image: docker.io/library/postgres:16-alpine@{digest}" in out.stdout


def test_external_database(renderer: Renderer) -> None:
    rendered = renderer.template("helm4", "external-db")
    assert not rendered.of_kind("StatefulSet")
    assert not [s for s in rendered.of_kind("Secret") if "postgresql" in s["metadata"]["name"]]
    assert not [s for s in rendered.of_kind("Service") if "postgresql" in s["metadata"]["name"]]


def test_postgresql_without_persistence(renderer: Renderer) -> None:
    statefulset = renderer.template("helm4", "minimal").one("StatefulSet")
    assert "volumeClaimTemplates" not in statefulset["spec"]
    volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "emptyDir": {}}


# --- replay model ----------------------------------------------------------------------

def test_replay_is_off_by_default(default: Rendered) -> None:
    assert not [d for d in default.docs if "replay" in d["metadata"]["name"]]
    assert not [m for m in _config(default).models if m.provider == "replay"]


def test_chart_scenarios_are_the_examples() -> None:
    examples = {p.name: p.read_text() for p in (ROOT / "examples" / "replay").glob("*.yaml")}
    shipped = {p.name: p.read_text() for p in (CHART / "files" / "replay").glob("*.yaml")}
    assert shipped == examples, "cp examples/replay/*.yaml charts/sessionops/files/replay/"


def test_replay_model(renderer: Renderer) -> None:
    rendered = renderer.template("helm4", "replay")
    name = f"{RELEASE}-replay"
    scenarios = rendered.one("ConfigMap", f"{name}-scenarios")["data"]
    examples = sorted(p.name for p in (ROOT / "examples" / "replay").glob("*.yaml"))
    assert sorted(scenarios) == sorted([*examples, "extra.yaml"])
    for file in examples:
        assert yaml.safe_load(scenarios[file]) == yaml.safe_load((ROOT / "examples" / "replay" / file).read_text())
    assert yaml.safe_load(scenarios["extra.yaml"]) == {"name": "extra", "responses": [{"content": "extra answer"}]}

    deployment = rendered.one("Deployment", name)
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["args"] == ["sessionops.replay", "--host", "0.0.0.0", "--port", "8089", "--dirs", "/scenarios"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes[mounts["/scenarios"]]["configMap"]["name"] == f"{name}-scenarios"
    service = rendered.one("Service", name)
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"][0]["port"] == 8089

    config = _config(rendered)
    replay = {m.name: m for m in config.models if m.provider == "replay"}
    names = {yaml.safe_load(text).get("name") or file.removesuffix(".yaml") for file, text in scenarios.items()}
    assert set(replay) == {f"replay/{n}" for n in names}
    for entry in replay.values():
        assert entry.endpoint == REPLAY_ENDPOINT and entry.secret_key_ref is None
    assert config.defaults.model == "replay/hello"


def test_replay_scenarios_are_loadable(renderer: Renderer, tmp_path: Path) -> None:
    """The replay model itself loads every scenario of the ConfigMap, under the catalog's names."""
    rendered = renderer.template("helm4", "replay")
    data = rendered.one("ConfigMap", f"{RELEASE}-replay-scenarios")["data"]
    for file, text in data.items():
        (tmp_path / file).write_text(text)
    loaded = load_scenario_dirs([tmp_path])
    catalog = {m.model for m in _config(rendered).models if m.provider == "replay"}
    assert set(loaded) == catalog


def test_a_scenario_with_turns_in_the_values_is_served_and_in_the_catalog(renderer: Renderer, tmp_path: Path) -> None:
    chat = {"turns": [{"cue": "shell", "responses": [{"content": "no shell here"}]},
                      {"responses": [{"content": "You said: {{message}}"}]}]}
    out = renderer.template_values("helm4", {"replay": {"enabled": True, "scenarios": {"chat": chat}},
                                             "config": {"defaults": {"model": "replay/chat"}}})
    assert out.returncode == 0, out.stderr
    rendered = Rendered(parse_docs(out.stdout), out.stdout, {})
    (tmp_path / "chat.yaml").write_text(rendered.one("ConfigMap", f"{RELEASE}-replay-scenarios")["data"]["chat.yaml"])
    assert load_scenario_dirs([tmp_path])["chat"].turns[1].responses[0].content == "You said: {{message}}"
    assert "replay/chat" in {m.name for m in _config(rendered).models}
    assert "replay/assistant" in {m.name for m in _config(rendered).models}

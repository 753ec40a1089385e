"""Agent admission names the field for what the CRD schema cannot express, and what an Agent's
pod-shaping fields, Secret references and MCP URLs need."""

from __future__ import annotations

import pytest

from sessionops.admission.agents import check_agent, check_mcp_urls, check_static, recorded_author
from sessionops.admission.errors import Rejection
from sessionops.api.agent import AgentSpec
from sessionops.api.config import McpEgress, WorkerConfig
from sessionops.api.input import SubmittedBy
from sessionops.policy import podaccess
from sessionops.policy.egress import Policy


def test_a_complete_agent_is_accepted() -> None:
    check_agent({"systemPrompt": "p", "tools": ["read_file"], "skills": ["a"], "preloadSkills": ["a"],
                 "contextSchema": [{"name": "team", "type": "string", "enum": ["x"], "default": "x"}]})
    check_agent({"systemPrompt": "p", "tools": "all", "skills": "all", "preloadSkills": ["z"]})


@pytest.mark.parametrize(("spec", "field"), [
    ({"systemPrompt": "p", "tools": "some"}, "spec.tools"),
    ({"systemPrompt": "p", "tools": ["rm_rf"]}, "spec.tools"),
    ({"systemPrompt": "p", "skills": 3}, "spec.skills"),
    ({"systemPrompt": "p", "skills": ["a"], "preloadSkills": ["b"]}, "spec.preloadSkills"),
    ({"systemPrompt": "p", "contextSchema": [{"name": "n", "type": "integer", "default": "1"}]},
     "spec.contextSchema[0]"),
    ({"systemPrompt": "p", "contextSchema": [{"name": "n", "type": "string", "enum": ["a"], "default": "b"}]},
     "spec.contextSchema[0].default"),
    ({"systemPrompt": "p", "contextSchema": [{"name": "n", "type": "string"}, {"name": "n", "type": "string"}]},
     "spec.contextSchema"),
    ({"systemPrompt": ""}, "spec.systemPrompt"),
], ids=["tools neither all nor list", "unknown tool", "skills of wrong type", "preload outside skills",
        "default of wrong type", "default outside enum", "duplicate context field", "empty prompt"])
def test_invalid_agents_are_rejected_with_the_field(spec: dict, field: str) -> None:
    with pytest.raises(Rejection) as e:
        check_agent(spec)
    assert e.value.field.startswith(field), e.value


# --- pod-shaping fields: what they need of their author ---------------------------------

WORKER = WorkerConfig(image="ghcr.io/sessionops/sessionops:0.1.0", service_account_name="sessionops-worker")
BOB = SubmittedBy(username="bob", uid="u-bob", groups=["devs"], extra={"scopes": ["a"]})


def _spec(**worker: object) -> AgentSpec:
    return AgentSpec.model_validate({"systemPrompt": "p", "worker": worker or None})


def test_an_agent_without_worker_settings_needs_nothing() -> None:
    assert podaccess.needs(_spec(), WORKER) == []
    assert podaccess.needs(_spec(nodeSelector={}, env=[]), WORKER) == []


def test_each_pod_shaping_field_needs_create_pods_and_each_reference_its_own_permission() -> None:
    spec = AgentSpec.model_validate({"systemPrompt": "p", "worker": {
        "image": "ghcr.io/sessionops/sessionops:0.1.0", "serviceAccountName": "robot", "env": [
            {"name": "A", "value": "1"},
            {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "b"}}},
            {"name": "C", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]},
        "mcpServers": [{"name": "calc", "url": "https://calc.example", "headersFrom": {"secretName": "calc-h"}}]})
    needs = podaccess.needs(spec, WORKER)
    assert [(n.field, n.verb, n.resource, n.name) for n in needs] == [
        ("spec.worker", "create", "pods", ""),
        ("spec.worker.serviceAccountName", "impersonate", "serviceaccounts", "robot"),
        ("spec.worker.env[1].valueFrom.configMapKeyRef", "get", "configmaps", "settings"),
        ("spec.worker.env[2].valueFrom.secretKeyRef", "get", "secrets", "db"),
        ("spec.mcpServers[0].headersFrom.secretName", "get", "secrets", "calc-h")]
    assert needs[3].refusal(BOB, "team-a") == 'user "bob" cannot get secret "db" in namespace "team-a"'
    assert needs[0].refusal(BOB, "team-a") == 'user "bob" cannot create pods in namespace "team-a"'
    # The review is the requester's whole identity, in the core API group.
    assert needs[3].review_spec(BOB, "team-a") == {
        "user": "bob", "uid": "u-bob", "groups": ["devs"], "extra": {"scopes": ["a"]},
        "resourceAttributes": {"namespace": "team-a", "verb": "get", "group": "", "resource": "secrets",
                               "name": "db"}}
    assert "name" not in needs[0].review_spec(BOB, "team-a")["resourceAttributes"]
    # The operator's own worker account needs nothing beyond create pods.
    assert [n.field for n in podaccess.needs(_spec(serviceAccountName="sessionops-worker"), WORKER)] == [
        "spec.worker"]


@pytest.mark.parametrize(("worker", "field", "words"), [
    ({"image": "attacker/img:latest"}, "spec.worker.image", "is not allowed by the operator"),
    ({"toolsImage": "attacker/tools:latest"}, "spec.worker.toolsImage", "is not allowed by the operator"),
    ({"env": [{"name": "X", "value": "1"}, {"name": "SESSIONOPS_MODEL_ENDPOINT", "value": "http://evil"}]},
     "spec.worker.env[1].name", "reserved"),
    ({"env": [{"name": "PYTHONPATH", "value": "/work"}]}, "spec.worker.env[0].name", "reserved"),
    ({"env": [{"name": "https_proxy", "value": "http://evil:3128"}]}, "spec.worker.env[0].name", "reserved"),
    ({"env": [{"name": "DATABASE_URL", "value": "postgresql://evil"}]}, "spec.worker.env[0].name", "reserved"),
], ids=["image outside the allow-list", "tools image outside the allow-list", "sessionops setting", "interpreter path", "proxy", "database"])
def test_images_and_env_names_are_checked_without_a_review(worker: dict, field: str, words: str) -> None:
    with pytest.raises(Rejection) as e:
        check_static(_spec(**worker), WORKER)
    assert e.value.field == field and words in e.value.message, e.value


def test_the_image_allow_list_is_glob_patterns_defaulting_to_the_worker_image() -> None:
    check_static(_spec(image="ghcr.io/sessionops/sessionops:0.1.0", env=[{"name": "TZ", "value": "UTC"}]), WORKER)
    corp = WorkerConfig(image="ghcr.io/sessionops/sessionops:0.1.0", allowed_images=["registry.corp/agents/*"])
    check_static(_spec(image="registry.corp/agents/py:3"), corp)
    with pytest.raises(Rejection, match="registry.corp/agents/"):
        check_static(_spec(image="ghcr.io/sessionops/sessionops:0.1.0"), corp)


def test_the_default_allow_list_is_the_worker_and_the_tools_image() -> None:
    config = WorkerConfig(image="ghcr.io/sessionops/sessionops:0.1.0", tools_image="ghcr.io/sessionops/tools:0.1.0")
    assert config.image_patterns() == ["ghcr.io/sessionops/sessionops:0.1.0", "ghcr.io/sessionops/tools:0.1.0"]
    check_static(_spec(image="ghcr.io/sessionops/sessionops:0.1.0", toolsImage="ghcr.io/sessionops/tools:0.1.0"),
                 config)
    with pytest.raises(Rejection) as e:
        check_static(_spec(toolsImage="ghcr.io/sessionops/sessionops:0.2.0"), config)
    assert e.value.field == "spec.worker.toolsImage"


def test_tools_settings_shape_the_pod_but_a_lower_command_timeout_does_not() -> None:
    assert [n.field for n in podaccess.needs(_spec(toolsImage="ghcr.io/sessionops/sessionops:0.1.0"), WORKER)] == [
        "spec.worker"]
    assert [n.field for n in podaccess.needs(_spec(toolsResources={"limits": {"cpu": "1"}}), WORKER)] == [
        "spec.worker"]
    assert podaccess.needs(_spec(commandTimeoutSeconds=30), WORKER) == []


def test_the_author_is_who_set_the_worker_settings_and_is_kept_across_other_edits() -> None:
    alice = SubmittedBy(username="alice")
    spec = {"systemPrompt": "p", "worker": {"image": "x"}}
    recorded = recorded_author(spec, None, {}, BOB)
    assert recorded is not None and podaccess.author_of({podaccess.AUTHOR_ANNOTATION: recorded}) == BOB
    stored = {podaccess.AUTHOR_ANNOTATION: recorded}
    # alice edits the prompt only: bob stays the author; alice changes the worker: she is.
    assert recorded_author({**spec, "systemPrompt": "q"}, spec, stored, alice) == recorded
    changed = recorded_author({**spec, "worker": {"image": "y"}}, spec, stored, alice)
    assert podaccess.author_of({podaccess.AUTHOR_ANNOTATION: changed or ""}) == alice
    assert recorded_author({"systemPrompt": "p"}, spec, stored, alice) is None
    mcp = {"systemPrompt": "p", "mcpServers": [{"name": "c", "url": "https://c", "headersFrom": {"secretName": "h"}}]}
    assert recorded_author(mcp, None, {}, alice) is not None


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest", "http://[fd00:ec2::254]/latest", "http://metadata.google.internal/",
    "http://2852039166/", "http://0xa9.0xfe.0xa9.0xfe/", "http://[::ffff:169.254.169.254]/",
    "https://kubernetes.default.svc/api", "https://kubernetes.default.svc.cluster.local:443/",
    "http://[fe80::1%25eth0]:8080/"])
def test_metadata_link_local_and_api_server_urls_are_refused_as_written(url: str) -> None:
    spec = AgentSpec.model_validate({"systemPrompt": "p", "mcpServers": [
        {"name": "ok", "url": "https://tools.example/mcp"}, {"name": "bad", "url": url}]})
    with pytest.raises(Rejection) as e:
        check_mcp_urls(spec, Policy())
    assert e.value.field == "spec.mcpServers[1].url" and "is refused" in e.value.message, e.value
    assert "mcpEgress" in e.value.message


def test_the_egress_allow_list_widens_the_policy() -> None:
    spec = AgentSpec.model_validate({"systemPrompt": "p", "mcpServers": [
        {"name": "a", "url": "http://169.254.10.5:8080/mcp"}, {"name": "b", "url": "http://metadata/"}]})
    with pytest.raises(Rejection):
        check_mcp_urls(spec, Policy())
    check_mcp_urls(spec, Policy.of(McpEgress(allowed_cidrs=["169.254.10.0/24"], allowed_hosts=["metadata"]), {}))
    # The API server as a pod sees it: its ClusterIP and port from the environment.
    api = Policy.of(McpEgress(), {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"})
    api_spec = AgentSpec.model_validate({"systemPrompt": "p", "mcpServers": [{"name": "k", "url": "https://10.96.0.1/"}]})
    with pytest.raises(Rejection, match="API server"):
        check_mcp_urls(api_spec, api)
    check_mcp_urls(api_spec, Policy())

"""An Agent's pod-shaping fields are its author's to give: people with their own tokens and Roles
submit Agents through kubectl, the webhook (over HTTPS) asks the API server what each may do,
and the operator asks again for the recorded author before each Job. Sessions and inputs in
namespaces the operator does not serve are refused."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from sessionops.policy import podaccess
from tests.e2e import manifests as m
from tests.e2e.manifests import phase
from tests.identities import RBAC_GROUP
from tests.stack import OPERATOR_NS, TOOLS, Completed, kubeconfig_with_token, run_cli

pytestmark = pytest.mark.asyncio(loop_scope="module")

WORKER_IMAGE = "ghcr.io/sessionops/sessionops:0.1.0"
"""The chart's worker image: the allow-list's only entry by default."""


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:6]}"


class Person:
    """Someone with their own token, acting through the real kubectl."""

    def __init__(self, stack: Any, cluster: Any, name: str, tmp: Path) -> None:
        self.stack, self.name = stack, name
        self.kubeconfig = kubeconfig_with_token(stack.admin_kubeconfig or stack.kubeconfig, tmp / f"{name}.kubeconfig",
                                                cluster.add_user(name), stack.namespace)

    async def kubectl(self, *args: str, input: str | None = None) -> Completed:
        return await run_cli(TOOLS / "kubectl", "--kubeconfig", str(self.kubeconfig), "--cache-dir",
                             str(self.stack.root / f"kube-cache-{self.name}"), *args, input=input, check=False)

    async def apply(self, manifest: dict[str, Any]) -> Completed:
        return await self.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))


async def grant(stack: Any, user: str, name: str, rules: list[dict[str, Any]]) -> None:
    """A Role and its RoleBinding for ``user`` in the stack's namespace, as a namespace admin writes them."""
    await stack.apply({"apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role", "metadata": {"name": name}, "rules": rules},
                      admin=True)
    await stack.apply({"apiVersion": f"{RBAC_GROUP}/v1", "kind": "RoleBinding", "metadata": {"name": name},
                       "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": name},
                       "subjects": [{"apiGroup": RBAC_GROUP, "kind": "User", "name": user}]}, admin=True)


AGENTS = [{"apiGroups": ["sessionops.dev"], "resources": ["agents"], "verbs": ["get", "list", "create", "update",
                                                                                "patch"]}]
PODS = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]


def secret_env(secret: str) -> dict[str, Any]:
    return {"image": WORKER_IMAGE, "env": [{"name": "TZ", "value": "UTC"}, {"name": "GREETING", "value": "hi"},
                                           {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {
                                               "name": secret, "key": "password"}}}]}


def author(agent: dict[str, Any]) -> str | None:
    found = podaccess.author_of(agent["metadata"].get("annotations"))
    return found.username if found else None


async def test_an_author_needs_create_pods_and_get_on_each_referenced_secret(local: tuple, tmp_path: Path) -> None:
    stack, cluster = local
    dana = Person(stack, cluster, unique("dana"), tmp_path)
    await grant(stack, dana.name, f"{dana.name}-agents", AGENTS)
    ns, secret = stack.namespace, unique("db")

    # Without pod-shaping fields an Agent needs nothing more than the right to create it.
    plain = unique("plain")
    assert (await dana.apply(m.agent(plain))).returncode == 0
    assert author(await stack.get("agent", plain)) is None

    name = unique("shaped")
    refused = await dana.apply(m.agent(name, worker=secret_env(secret)))
    assert refused.returncode != 0
    assert (f'spec.worker: user "{dana.name}" cannot create pods in namespace "{ns}"' in refused.stderr
            and f'spec.worker.env[2].valueFrom.secretKeyRef: user "{dana.name}" cannot get secret "{secret}" '
                f'in namespace "{ns}"' in refused.stderr), refused.stderr

    await grant(stack, dana.name, f"{dana.name}-pods", PODS)
    refused = await dana.apply(m.agent(name, worker=secret_env(secret)))
    assert refused.returncode != 0 and "spec.worker:" not in refused.stderr
    assert (f'spec.worker.env[2].valueFrom.secretKeyRef: user "{dana.name}" cannot get secret "{secret}" in '
            f'namespace "{ns}"') in refused.stderr, refused.stderr

    await grant(stack, dana.name, f"{dana.name}-secret", [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": [secret]}])
    accepted = await dana.apply(m.agent(name, worker=secret_env(secret)))
    assert accepted.returncode == 0, accepted.stderr
    assert author(await stack.get("agent", name)) == dana.name

    # An MCP server's headers Secret is read by the worker for the Agent: the same rule.
    other = unique("other")
    mcp = {"mcpServers": [{"name": "calc", "url": "https://calc.example/mcp", "headersFrom": {"secretName": other}}]}
    refused = await dana.apply(m.agent(unique("mcp"), **mcp))
    assert (f'spec.mcpServers[0].headersFrom.secretName: user "{dana.name}" cannot get secret "{other}"'
            in refused.stderr), refused.stderr

    # Running as another ServiceAccount is acting as it: dana may not, alice (edit) may.
    as_default = {"serviceAccountName": "default"}
    refused = await dana.apply(m.agent(unique("sa"), worker=as_default))
    assert (f'spec.worker.serviceAccountName: user "{dana.name}" cannot impersonate serviceaccount "default" in '
            f'namespace "{ns}"') in refused.stderr, refused.stderr
    alice_sa = unique("sa")
    await stack.apply(m.agent(alice_sa, worker=as_default))
    assert author(await stack.get("agent", alice_sa)) == "alice"


async def test_images_outside_the_allow_list_and_reserved_env_are_refused_to_anybody(local: tuple) -> None:
    stack, _ = local
    refused = await stack.kubectl("apply", "-f", "-", check=False, input=yaml.safe_dump(
        m.agent(unique("img"), worker={"image": "attacker/img:latest"})))
    assert ("spec.worker.image: image 'attacker/img:latest' is not allowed by the operator "
            f"(worker.allowedImages: {WORKER_IMAGE})") in refused.stderr, refused.stderr
    refused = await stack.kubectl("apply", "-f", "-", check=False, input=yaml.safe_dump(m.agent(unique("env"), worker={
        "env": [{"name": "SESSIONOPS_MODEL_ENDPOINT", "value": "http://collector.example/v1"}]})))
    assert "spec.worker.env[0].name: 'SESSIONOPS_MODEL_ENDPOINT' is reserved" in refused.stderr, refused.stderr


async def test_the_recorded_author_cannot_be_forged_or_edited(local: tuple, tmp_path: Path) -> None:
    stack, cluster = local
    name = unique("forge")
    forged = m.agent(name, worker={"resources": {"limits": {"memory": "1Gi"}}})
    forged["metadata"]["annotations"] = {podaccess.AUTHOR_ANNOTATION: json.dumps({"username": "admin"})}
    await stack.apply(forged)
    assert author(await stack.get("agent", name)) == "alice"
    # A metadata-only edit of the annotation goes through admission too, and changes nothing.
    edited = await stack.kubectl("annotate", "agent", name, "--overwrite",
                                 f'{podaccess.AUTHOR_ANNOTATION}={{"username":"admin"}}', check=False)
    assert author(await stack.get("agent", name)) == "alice", edited
    # Another person editing other fields keeps alice as the author; changing the worker makes them it.
    erin = Person(stack, cluster, unique("erin"), tmp_path)
    await grant(stack, erin.name, f"{erin.name}-agents", AGENTS + PODS)
    prompt = await erin.kubectl("patch", "agent", name, "--type=merge", "-p", '{"spec":{"systemPrompt":"Terse."}}')
    assert prompt.returncode == 0, prompt.stderr
    assert author(await stack.get("agent", name)) == "alice"
    worker = await erin.kubectl("patch", "agent", name, "--type=merge", "-p",
                                '{"spec":{"worker":{"resources":{"limits":{"memory":"2Gi"}}}}}')
    assert worker.returncode == 0, worker.stderr
    assert author(await stack.get("agent", name)) == erin.name


async def test_a_revoked_grant_fails_the_next_turn_with_a_reason_and_an_event(local: tuple, tmp_path: Path) -> None:
    stack, cluster = local
    fay = Person(stack, cluster, unique("fay"), tmp_path)
    await grant(stack, fay.name, f"{fay.name}-agents", AGENTS + PODS)
    secret = unique("db")
    await stack.kubectl("create", "secret", "generic", secret, "--from-literal=password=pw", admin=True)
    await grant(stack, fay.name, f"{fay.name}-secret", [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": [secret]}])
    name = unique("rv")
    assert (await fay.apply(m.agent(name, worker=secret_env(secret)))).returncode == 0
    await stack.apply(m.session(name, name, model="replay/steer"))
    await stack.apply(m.message(f"{name}-1", name, "hi", delivery="FollowUp"))
    first = await stack.wait_for("arun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=90)
    assert first["status"]["phase"] == "Succeeded", first["status"]

    await stack.kubectl("delete", "rolebinding", f"{fay.name}-secret", admin=True)
    await stack.apply(m.message(f"{name}-2", name, "again", delivery="FollowUp"))
    failed = await stack.wait_for("arun", f"{name}-t2", phase("Succeeded", "Failed"), timeout=90)
    assert failed["status"]["phase"] == "Failed", failed["status"]
    expected = (f'agent {name}: spec.worker.env[2].valueFrom.secretKeyRef: user "{fay.name}" cannot get secret '
                f'"{secret}" in namespace "{stack.namespace}"')
    ready = [c for c in failed["status"]["conditions"] if c.get("reason") == "WorkerSettingsRefused"]
    assert ready and expected in ready[0]["message"], failed["status"]["conditions"]
    jobs = await stack.kubectl("get", "jobs", "-o", "name")
    assert f"{name}-t2" not in jobs.stdout  # no Job, so no pod, ever ran with the revoked grant
    events = json.loads((await stack.kubectl("get", "events", "-o", "json", admin=True)).stdout)["items"]
    assert any(e.get("reason") == "WorkerSettingsRefused" and e["involvedObject"]["name"] == f"{name}-t2"
               and expected in e.get("message", "") for e in events), [e.get("reason") for e in events]
    # Granted again, the paused queue goes on with a Continue: nothing sticks.
    await grant(stack, fay.name, f"{fay.name}-secret", [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": [secret]}])
    await stack.apply(m.message(f"{name}-3", name, "third", delivery="FollowUp"))
    await stack.apply(m.cont(f"{name}-c", name))
    third = await stack.wait_for("arun", f"{name}-t3", phase("Succeeded", "Failed"), timeout=90)
    assert third["status"]["phase"] == "Succeeded", json.dumps(third["status"])


async def test_mcp_urls_to_metadata_and_the_api_server_are_refused_at_admission(local: tuple) -> None:
    stack, _ = local
    for url, reason in (("http://169.254.169.254/latest", "169.254.169.254 is a link-local address"),
                        ("https://kubernetes.default.svc/api", "kubernetes.default.svc is the cluster's API server"),
                        ("http://metadata.google.internal/computeMetadata/v1",
                         "metadata.google.internal is a cloud metadata endpoint")):
        refused = await stack.kubectl("apply", "-f", "-", check=False, input=yaml.safe_dump(
            m.agent(unique("u"), mcpServers=[{"name": "tools", "url": url}])))
        assert f"spec.mcpServers[0].url: '{url}' is refused: {reason}" in refused.stderr, refused.stderr
    await stack.apply(m.agent(unique("u"), mcpServers=[{"name": "tools", "url": "http://tools.team-a.svc:8080/mcp"}]))


async def test_sessions_and_inputs_outside_the_served_namespaces_are_refused(local: tuple) -> None:
    stack, _ = local
    other = unique("team-z")
    await stack.kubectl("create", "namespace", other, admin=True)
    await stack.kubectl("create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice", "-n", other,
                        admin=True)
    name = unique("s")
    await stack.apply(m.agent(name), namespace=other)
    served = f"served namespaces: {stack.namespace} (chart value workerNamespaces)"
    session = await stack.kubectl("apply", "-n", other, "-f", "-", check=False,
                                  input=yaml.safe_dump(m.session(name, name, model="replay/hello")))
    assert f"metadata.namespace: sessionops does not serve namespace '{other}'; {served}" in session.stderr, \
        session.stderr
    message = await stack.kubectl("apply", "-n", other, "-f", "-", check=False,
                                  input=yaml.safe_dump(m.message(f"{name}-1", name, "hi")))
    assert f"sessionops does not serve namespace '{other}'; {served}" in message.stderr, message.stderr
    # The operator's own namespace is never served by default, not even to the administrator.
    own = await stack.kubectl("apply", "-n", OPERATOR_NS, "-f", "-", check=False, admin=True,
                              input=yaml.safe_dump(m.session(name, name, model="replay/hello")))
    assert f"sessionops does not serve namespace '{OPERATOR_NS}'" in own.stderr, own.stderr

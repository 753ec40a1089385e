"""Least privilege: RBAC without wildcards, restricted pods, network policies."""

from __future__ import annotations

from typing import Any

import pytest

from sessionops.api.config import OperatorConfig
from sessionops.execution import jobs
from tests.chart.helm import (
    DEFAULT_WORKER_NAMESPACES,
    NAMESPACE,
    RELEASE,
    Rendered,
    iter_pod_specs,
    parse_docs,
)

ROLE_KINDS = ("Role", "ClusterRole")


def _rules(rendered: Rendered, kind: str, name: str, namespace: str | None = None) -> list[dict[str, Any]]:
    found = [d for d in rendered.of_kind(kind)
             if d["metadata"]["name"] == name and d["metadata"].get("namespace") == namespace]
    assert len(found) == 1, f"{kind} {namespace}/{name}: found {len(found)}"
    return found[0]["rules"]


def _allows(rules: list[dict[str, Any]], group: str, resource: str, verb: str, name: str | None = None) -> bool:
    for rule in rules:
        if group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]:
            names = rule.get("resourceNames")
            if names is None or (name is not None and name in names):
                return True
    return False


def test_no_wildcards_anywhere(rendered: Rendered) -> None:
    for role in [d for d in rendered.docs if d["kind"] in ROLE_KINDS]:
        for rule in role["rules"]:
            where = f"{role['kind']}/{role['metadata']['name']}: {rule}"
            for key in ("verbs", "resources", "apiGroups", "resourceNames", "nonResourceURLs"):
                assert "*" not in rule.get(key, []), where
            assert not any("*" in r for r in rule["resources"]), where
            # An empty resourceNames list means "every name".
            assert rule.get("resourceNames", ["x"]), where
            assert "nonResourceURLs" not in rule, where


def test_no_escalation_verbs(rendered: Rendered) -> None:
    dangerous = {"escalate", "bind", "impersonate", "deletecollection"}
    for role in [d for d in rendered.docs if d["kind"] in ROLE_KINDS]:
        for rule in role["rules"]:
            assert not dangerous & set(rule["verbs"]), f"{role['metadata']['name']}: {rule}"
            assert not {"roles", "clusterroles", "rolebindings", "clusterrolebindings"} & set(rule["resources"])


OPERATOR_NEEDS = [
    # (group, resource, verb)
    ("sessionops.dev", "agentsessions", "watch"),
    ("sessionops.dev", "agentsessions", "patch"),
    ("sessionops.dev", "agentinputs", "patch"),
    ("sessionops.dev", "agentruns", "create"),
    ("sessionops.dev", "agents", "watch"),
    ("sessionops.dev", "agentruns/status", "patch"),
    ("sessionops.dev", "agentsessions/status", "patch"),
    ("sessionops.dev", "agentinputs/status", "patch"),
    ("sessionops.dev", "agentruns/finalizers", "update"),
    ("sessionops.dev", "agenttranscripts", "create"),  # a cancelled run's closed calls
    ("sessionops.dev", "agenttranscripts", "patch"),
    ("batch", "jobs", "create"),
    ("batch", "jobs", "delete"),
    ("batch", "jobs", "watch"),
    ("", "pods", "list"),
    ("", "pods", "delete"),
    ("coordination.k8s.io", "leases", "watch"),
    ("", "events", "create"),
    ("", "configmaps", "get"),
    ("authorization.k8s.io", "subjectaccessreviews", "create"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
    ("", "namespaces", "watch"),
    ("kopf.dev", "clusterkopfpeerings", "watch"),
    ("kopf.dev", "clusterkopfpeerings", "create"),
]


@pytest.mark.parametrize(("group", "resource", "verb"), OPERATOR_NEEDS)
def test_operator_cluster_role_allows(default: Rendered, group: str, resource: str, verb: str) -> None:
    assert _allows(_rules(default, "ClusterRole", f"{RELEASE}-operator"), group, resource, verb)


def test_operator_is_limited(default: Rendered) -> None:
    rules = _rules(default, "ClusterRole", f"{RELEASE}-operator")
    # Secrets only in its own namespace; leases read-only (other components' leader leases).
    assert not any("secrets" in r["resources"] for r in rules)
    assert not _allows(rules, "coordination.k8s.io", "leases", "update")
    assert not _allows(rules, "coordination.k8s.io", "leases", "delete")
    assert not _allows(rules, "", "pods", "create")
    assert not _allows(rules, "", "configmaps", "update")
    # Keep-alives only in its own peering object.
    assert _allows(rules, "kopf.dev", "clusterkopfpeerings", "patch", name="sessionops")
    assert not _allows(rules, "kopf.dev", "clusterkopfpeerings", "patch", name="someone-else")
    own = _rules(default, "Role", f"{RELEASE}-operator", NAMESPACE)
    assert _allows(own, "", "secrets", "get")
    assert not _allows(own, "", "secrets", "list")


def test_bindings_point_at_the_operator_account(default: Rendered) -> None:
    account = default.one("ServiceAccount", RELEASE)
    assert account["metadata"]["namespace"] == NAMESPACE
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        binding = default.one(kind, f"{RELEASE}-operator")
        assert binding["roleRef"]["name"] == f"{RELEASE}-operator"
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}]
    assert default.find("Deployment", "-operator")["spec"]["template"]["spec"]["serviceAccountName"] == RELEASE


def test_worker_rbac_in_every_worker_namespace(rendered: Rendered) -> None:
    namespaces = rendered.values.get("workerNamespaces") or DEFAULT_WORKER_NAMESPACES
    subjects = [{"kind": "ServiceAccount", "name": "sessionops-worker", "namespace": ns} for ns in namespaces]
    for ns in namespaces:
        accounts = [d for d in rendered.of_kind("ServiceAccount") if d["metadata"].get("namespace") == ns
                    and d["metadata"]["name"] == "sessionops-worker"]
        assert len(accounts) == 1, ns
        rules = _rules(rendered, "Role", f"{RELEASE}-worker", ns)
        for resource in ("agentruns", "agentinputs", "agentsessions", "agents"):
            for verb in ("get", "list", "watch"):
                assert _allows(rules, "sessionops.dev", resource, verb), (resource, verb)
            assert not _allows(rules, "sessionops.dev", resource, "delete")
        for resource in ("agentruns/status", "agentinputs/status"):
            assert _allows(rules, "sessionops.dev", resource, "patch")
            assert _allows(rules, "sessionops.dev", resource, "update")
        assert not _allows(rules, "sessionops.dev", "agentsessions/status", "patch")
        # The delegate tool: a child session and its input in the worker's own namespace; admission
        # copies the parent's submitter only for a requester allowed the custom verb on the parent run.
        for resource in ("agentsessions", "agentinputs"):
            assert _allows(rules, "sessionops.dev", resource, "create"), resource
            assert not _allows(rules, "sessionops.dev", resource, "update"), resource
            assert not _allows(rules, "sessionops.dev", resource, "patch"), resource
        assert _allows(rules, "sessionops.dev", "agentruns", "delegate")
        assert not _allows(rules, "sessionops.dev", "agentruns", "create")
        for resource in ("agentsessions", "agentinputs", "agents"):
            assert not _allows(rules, "sessionops.dev", resource, "delegate"), resource
        for verb in ("get", "create", "update"):
            assert _allows(rules, "coordination.k8s.io", "leases", verb)
        assert _allows(rules, "", "configmaps", "get")
        assert not _allows(rules, "", "secrets", "list")
        # The operator checks that Secrets an Agent references exist (by name), never lists them.
        operator = [r for d in rendered.of_kind("Role") if d["metadata"]["name"] == f"{RELEASE}-operator-secrets"
                    and d["metadata"]["namespace"] == ns for r in d["rules"]]
        assert _allows(operator, "", "secrets", "get") and not _allows(operator, "", "secrets", "list")
        assert not _allows(operator, "", "secrets", "watch")
        binding = rendered.one("RoleBinding", f"{RELEASE}-worker") if len(namespaces) == 1 else next(
            d for d in rendered.of_kind("RoleBinding")
            if d["metadata"]["name"] == f"{RELEASE}-worker" and d["metadata"]["namespace"] == ns)
        assert binding["subjects"] == [subjects[namespaces.index(ns)]]
    cluster = _rules(rendered, "ClusterRole", f"{RELEASE}-worker")
    assert cluster == [{"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
                        "verbs": ["create"]}]
    assert rendered.one("ClusterRoleBinding", f"{RELEASE}-worker")["subjects"] == subjects


def _worker_rules(rendered: Rendered) -> list[tuple[str, dict[str, Any]]]:
    """Every rule of every Role and ClusterRole bound to a worker ServiceAccount, with where it is."""
    bound: set[tuple[str, str | None, str]] = set()
    for binding in [*rendered.of_kind("RoleBinding"), *rendered.of_kind("ClusterRoleBinding")]:
        if any(s.get("kind") == "ServiceAccount" and s.get("name") == "sessionops-worker"
               for s in binding.get("subjects") or []):
            ref = binding["roleRef"]
            scope = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
            bound.add((ref["kind"], scope, ref["name"]))
    assert bound, "no binding of the worker ServiceAccount"
    return [(f"{kind} {ns}/{name}", rule) for kind, ns, name in sorted(bound, key=str)
            for rule in _rules(rendered, kind, name, ns)]


def test_workers_read_no_secret_but_the_ones_named(rendered: Rendered) -> None:
    """No worker rule reads Secrets without resourceNames; by default workers read no Secret at all
    through the API (the kubelet mounts the model key and the database credential)."""
    for where, rule in _worker_rules(rendered):
        if "" in rule["apiGroups"] and "secrets" in rule["resources"]:
            assert rule.get("resourceNames"), f"{where}: namespace-wide Secret rule {rule}"
            assert set(rule["verbs"]) <= {"get"}, where
            names = rendered.values.get("worker", {}).get("rbac", {}).get("secretNames")
            assert names and rule["resourceNames"] == names, where
    if not rendered.values.get("worker", {}).get("rbac", {}).get("secretNames"):
        assert not [r for _, r in _worker_rules(rendered) if "secrets" in r["resources"]]


def test_worker_secret_names_are_granted_by_name_only(renderer: Any) -> None:
    values = {"worker": {"rbac": {"secretNames": ["mcp-calc", "mcp-search"]}}, "workerNamespaces": ["team-a"]}
    out = renderer.template_values("helm4", values)
    assert out.returncode == 0, out.stderr
    rendered = Rendered(parse_docs(out.stdout), out.stdout, values)
    rules = _rules(rendered, "Role", f"{RELEASE}-worker", "team-a")
    assert _allows(rules, "", "secrets", "get", "mcp-calc") and _allows(rules, "", "secrets", "get", "mcp-search")
    assert not _allows(rules, "", "secrets", "get", "sessionops-database")
    assert not _allows(rules, "", "secrets", "get")
    test_workers_read_no_secret_but_the_ones_named(rendered)
    # The option that granted every Secret of the namespace is gone: the schema names it.
    old = renderer.template_values("helm4", {"worker": {"rbac": {"readSecretsInNamespace": True}}})
    assert old.returncode != 0 and "readSecretsInNamespace" in old.stderr


def test_workers_never_run_in_the_operator_namespace_unless_told(renderer: Any, default: Rendered) -> None:
    assert default.values.get("workerNamespaces") is None  # the chart's own default
    accounts = [d["metadata"]["namespace"] for d in default.of_kind("ServiceAccount")
                if d["metadata"]["name"] == "sessionops-worker"]
    assert accounts == DEFAULT_WORKER_NAMESPACES and NAMESPACE not in accounts
    refused = renderer.template_values("helm4", {"workerNamespaces": ["team-a", NAMESPACE]})
    assert refused.returncode != 0
    assert (f'workerNamespaces: "{NAMESPACE}" is the release namespace' in refused.stderr
            and "allowWorkersInOperatorNamespace=true" in refused.stderr), refused.stderr
    empty = renderer.template_values("helm4", {"workerNamespaces": None})
    assert empty.returncode != 0 and "workerNamespaces: list the namespaces where agents run" in empty.stderr
    told = renderer.template_values("helm4", {"workerNamespaces": [NAMESPACE], "allowWorkersInOperatorNamespace": True})
    assert told.returncode == 0, told.stderr
    rendered = Rendered(parse_docs(told.stdout), told.stdout, {})
    assert [d for d in rendered.of_kind("ServiceAccount") if d["metadata"]["name"] == "sessionops-worker"
            and d["metadata"]["namespace"] == NAMESPACE]


def test_the_operator_writes_only_the_database_credential_secret_in_worker_namespaces(rendered: Rendered) -> None:
    """create (not limitable by name) and update of exactly the configured Secret; no list, no watch."""
    secret = rendered.values.get("worker", {}).get("database", {}).get("secretName", "sessionops-worker-database")
    for ns in rendered.values.get("workerNamespaces") or DEFAULT_WORKER_NAMESPACES:
        rules = [r for d in rendered.of_kind("Role") if d["metadata"]["name"] == f"{RELEASE}-operator-secrets"
                 and d["metadata"]["namespace"] == ns for r in d["rules"]]
        assert _allows(rules, "", "secrets", "create")
        updates = [r for r in rules if "update" in r["verbs"]]
        assert updates and all(r.get("resourceNames") == [secret] for r in updates)
        assert not _allows(rules, "", "secrets", "list") and not _allows(rules, "", "secrets", "delete")


# --- pods ------------------------------------------------------------------------------

def test_pods_are_restricted(rendered: Rendered) -> None:
    """The "restricted" Pod Security Standard, plus read-only root filesystems."""
    specs = list(iter_pod_specs(rendered.docs))
    assert specs
    for where, spec in specs:
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True, where
        assert pod["runAsUser"] > 0, where
        assert pod["seccompProfile"]["type"] == "RuntimeDefault", where
        assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC"), where
        for volume in spec.get("volumes", []):
            assert "hostPath" not in volume, where
        for container in spec["containers"] + spec.get("initContainers", []):
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["capabilities"]["drop"] == ["ALL"], where
            assert "add" not in sc["capabilities"], where
            assert not sc.get("privileged"), where
            assert container.get("resources", {}).get("requests"), f"{where}: no resource requests"
            assert container.get("resources", {}).get("limits", {}).get("memory"), f"{where}: no memory limit"
            assert container.get("readinessProbe") and container.get("livenessProbe"), where


def test_only_the_operator_mounts_an_api_token(rendered: Rendered) -> None:
    for where, spec in iter_pod_specs(rendered.docs):
        assert spec["automountServiceAccountToken"] is ("-operator" in where), where


def test_operator_deployment(rendered: Rendered) -> None:
    deployment = rendered.find("Deployment", "-operator")
    replicas = rendered.values.get("operator", {}).get("replicas", 2)
    assert deployment["spec"]["replicas"] == replicas
    # A rollout never takes the last webhook server away.
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    spec = deployment["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsUser"] == 65532
    (container,) = spec["containers"]
    assert container["args"] == ["sessionops.manager"]
    assert "command" not in container  # the image's ENTRYPOINT ["python", "-m"]
    env = {e["name"]: e for e in container["env"]}
    assert env["SESSIONOPS_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["POD_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"  # kopf's peer identity
    assert env["SESSIONOPS_CONFIGMAP"]["value"] == "sessionops-config"
    assert env["SESSIONOPS_PEERING"]["value"] == "sessionops"
    assert env["SESSIONOPS_WEBHOOK_PORT"]["value"] == "9443"
    assert env["SESSIONOPS_CERT_FILE"]["value"] == "/certs/tls.crt"
    assert env["SESSIONOPS_KEY_FILE"]["value"] == "/certs/tls.key"
    external = rendered.values.get("externalDatabase", {})
    expected_db = ({"name": external["existingSecret"], "key": external["existingSecretKey"]}
                   if external else {"name": f"{RELEASE}-postgresql", "key": "DATABASE_URL"})
    assert env["DATABASE_URL"]["valueFrom"]["secretKeyRef"] == expected_db
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"webhook": 9443, "metrics": 8080}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/certs"]["readOnly"] is True and "/tmp" in mounts
    volumes = {v["name"]: v for v in spec["volumes"]}
    certs = volumes[mounts["/certs"]["name"]]["secret"]
    assert certs["secretName"] == f"{RELEASE}-webhook-tls"
    assert {i["path"] for i in certs["items"]} == {"tls.crt", "tls.key"}
    image = container["image"]
    tag = rendered.values.get("image", {}).get("tag", "0.1.0")
    assert image.startswith(f"ghcr.io/sessionops/sessionops:{tag}")
    if digest := rendered.values.get("image", {}).get("digest"):
        assert image.endswith(f"@{digest}")


def test_pod_disruption_budget(rendered: Rendered) -> None:
    pdbs = rendered.of_kind("PodDisruptionBudget")
    if rendered.values.get("operator", {}).get("podDisruptionBudget", {}).get("enabled") is False:
        assert not pdbs
        return
    (pdb,) = pdbs
    assert pdb["spec"]["maxUnavailable"] == 1
    deployment = rendered.find("Deployment", "-operator")
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


# --- network ---------------------------------------------------------------------------

def test_network_policy(rendered: Rendered) -> None:
    policies = {d["metadata"]["name"]: d for d in rendered.of_kind("NetworkPolicy")}
    if rendered.values.get("networkPolicy", {}).get("enabled") is False:
        assert not policies
        return
    operator = policies[f"{RELEASE}-operator"]["spec"]
    deployment = rendered.find("Deployment", "-operator")
    assert operator["podSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert set(operator["policyTypes"]) == {"Ingress", "Egress"}
    webhook, metrics = operator["ingress"]
    # The API server is not a pod: the webhook port is open to every source.
    assert "from" not in webhook and webhook["ports"] == [{"port": "webhook", "protocol": "TCP"}]
    assert metrics["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert metrics["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    assert operator["egress"] == [{}]
    postgres = policies.get(f"{RELEASE}-postgresql")
    if rendered.values.get("postgresql", {}).get("enabled") is False:
        assert postgres is None
        return
    (rule,) = postgres["spec"]["ingress"]
    namespaces = rendered.values.get("workerNamespaces") or DEFAULT_WORKER_NAMESPACES
    assert rule["from"][0]["podSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert rule["from"][1]["namespaceSelector"]["matchExpressions"][0]["values"] == namespaces


def test_worker_pods_cannot_reach_link_local_addresses(rendered: Rendered) -> None:
    """Every worker namespace has an egress policy selecting the pods the operator's Jobs make
    (labels from execution.jobs itself) that leaves out the metadata endpoints' ranges."""
    policies = [d for d in rendered.of_kind("NetworkPolicy") if d["metadata"]["name"] == f"{RELEASE}-worker-egress"]
    if rendered.values.get("networkPolicy", {}).get("enabled") is False:
        assert not policies
        return
    namespaces = rendered.values.get("workerNamespaces") or DEFAULT_WORKER_NAMESPACES
    assert sorted(p["metadata"]["namespace"] for p in policies) == sorted(namespaces)
    config = OperatorConfig.model_validate({"defaults": {"model": "m"}, "models": [
        {"name": "m", "provider": "replay", "model": "m"}]})
    run = {"metadata": {"name": "s1-t1", "namespace": namespaces[0], "uid": "u1"},
           "spec": {"sessionRef": {"name": "s1"}, "contextSnapshot": {"model": "m"}}}
    pod_labels = jobs.job_body(run, 1, "Start", config=config, worker=None)["spec"]["template"]["metadata"]["labels"]
    for policy in policies:
        spec = policy["spec"]
        assert spec["policyTypes"] == ["Egress"]
        assert spec["podSelector"]["matchLabels"].items() <= pod_labels.items()
        (rule, *_extra) = spec["egress"]
        blocks = {b["ipBlock"]["cidr"]: b["ipBlock"]["except"] for b in rule["to"]}
        assert "169.254.0.0/16" in blocks["0.0.0.0/0"] and "fd00:ec2::254/128" in blocks["::/0"]
        assert "ports" not in rule  # everything else stays reachable (model, MCP servers, DNS, the database)


def test_worker_egress_takes_extra_rules_and_can_be_turned_off(renderer: Any) -> None:
    dns = {"to": [{"ipBlock": {"cidr": "169.254.20.10/32"}}], "ports": [{"port": 53, "protocol": "UDP"}]}
    out = renderer.template_values("helm4", {"networkPolicy": {"workerEgress": {"extraEgress": [dns]}}})
    assert out.returncode == 0, out.stderr
    [policy] = [d for d in parse_docs(out.stdout) if d["kind"] == "NetworkPolicy"
                and d["metadata"]["name"] == f"{RELEASE}-worker-egress"]
    assert policy["spec"]["egress"][1] == dns
    off = renderer.template_values("helm4", {"networkPolicy": {"workerEgress": {"enabled": False}}})
    assert off.returncode == 0, off.stderr
    assert not [d for d in parse_docs(off.stdout) if d["metadata"]["name"] == f"{RELEASE}-worker-egress"]


AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"


def test_people_get_sessionops_through_the_standard_aggregated_roles(default: Rendered) -> None:
    view = default.one("ClusterRole", f"{RELEASE}-view")
    edit = default.one("ClusterRole", f"{RELEASE}-edit")
    assert {k for k, v in view["metadata"]["labels"].items() if k.startswith(AGGREGATE) and v == "true"} == {
        f"{AGGREGATE}view", f"{AGGREGATE}edit", f"{AGGREGATE}admin"}
    assert {k for k, v in edit["metadata"]["labels"].items() if k.startswith(AGGREGATE) and v == "true"} == {
        f"{AGGREGATE}edit", f"{AGGREGATE}admin"}
    for kind in ("agents", "agentsessions", "agentinputs", "agentruns"):
        assert _allows(view["rules"], "sessionops.dev", kind, "watch")
        assert not _allows(view["rules"], "sessionops.dev", kind, "create")
    assert _allows(edit["rules"], "sessionops.dev", "agentinputs", "create")
    assert _allows(edit["rules"], "sessionops.dev", "agentruns", "patch")  # spec.cancel
    assert not _allows(edit["rules"], "sessionops.dev", "agentruns", "create")  # runs are the operator's
    for resource in ("tools", "skills", "mcpservers"):
        assert _allows(edit["rules"], "sessionops.dev", resource, "use")
    # Acting for a run's submitter is the workers' alone.
    assert not any("delegate" in r["verbs"] for r in view["rules"] + edit["rules"])


def test_aggregation_into_the_standard_roles_can_be_turned_off(renderer: Any) -> None:
    out = renderer.template_values("helm4", {"rbac": {"aggregateToDefaultRoles": False}})
    assert out.returncode == 0, out.stderr
    names = [d["metadata"]["name"] for d in parse_docs(out.stdout) if d["kind"] == "ClusterRole"]
    assert f"{RELEASE}-view" not in names and f"{RELEASE}-edit" not in names
    assert f"{RELEASE}-operator" in names


def test_user_roles_grant_transcripts_exactly_where_they_grant_runs(rendered: Rendered) -> None:
    """A transcript is read under its run's RBAC: every aggregated (user-facing) role that may
    read runs may read transcripts, and no role grants transcripts without runs."""
    aggregated = [r for r in rendered.of_kind("ClusterRole")
                  if any(k.startswith("rbac.authorization.k8s.io/aggregate-to-")
                         for k in (r["metadata"].get("labels") or {}))]
    assert aggregated, "the chart aggregates reading sessionops objects into view/edit/admin"
    for role in aggregated:
        for verb in ("get", "list", "watch"):
            runs = _allows(role["rules"], "sessionops.dev", "agentruns", verb)
            assert runs == _allows(role["rules"], "sessionops.dev", "agenttranscripts", verb), role["metadata"]
    for role in [d for d in rendered.docs if d["kind"] in ROLE_KINDS]:
        if _allows(role["rules"], "sessionops.dev", "agenttranscripts", "get"):
            assert _allows(role["rules"], "sessionops.dev", "agentruns", "get"), role["metadata"]["name"]

"""Who does what in the local stack: the operator and the workers under their own ServiceAccounts with
the chart's RBAC, people as named users bound by RoleBindings. A rule missing from the chart fails here."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from sessionops.cli.main import app
from tests.e2e import manifests as m
from tests.e2e.manifests import phase
from tests.stack import OPERATOR_NS, RELEASE, kubeconfig_with_token

pytestmark = pytest.mark.asyncio(loop_scope="module")

OPERATOR = f"system:serviceaccount:{OPERATOR_NS}:{RELEASE}"
WORKER = "system:serviceaccount:team-a:sessionops-worker"


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:6]}"


async def test_a_turn_runs_with_the_operators_and_the_workers_own_identities(local: tuple) -> None:
    stack, cluster = local
    name = unique("w")
    await stack.apply(m.agent(name))
    await stack.apply(m.session(name, name, model="replay/hello"))
    await stack.apply(m.message(f"{name}-1", name, "hi", delivery="FollowUp"))
    await stack.wait_for("arun", f"{name}-t1", phase("Succeeded"), timeout=90)
    inputs = await stack.get("ainput", f"{name}-1")
    assert inputs["spec"]["submittedBy"]["username"] == "alice"
    # The operator keeps its kopf peering record alive (the chart's ClusterKopfPeering rules).
    peering = await stack.get("clusterkopfpeering", RELEASE, admin=True)
    assert f"{RELEASE}-operator-0" in peering.get("status", {})
    # The worker re-checked alice's access, asking as itself.
    asked = [r for r in cluster.access_reviews if r["user"] == "alice" and r.get("name") == name]
    assert asked and {r["requester"] for r in asked} == {WORKER}


async def test_alice_is_refused_what_her_edit_binding_does_not_grant(local: tuple) -> None:
    stack, _ = local
    # edit reads the Secrets of the namespaces it is bound in (as kube-apiserver's bootstrap policy),
    # never the operator's.
    secrets = await stack.kubectl("get", "secrets", "-n", OPERATOR_NS, check=False)
    assert secrets.returncode == 1 and ('User "alice" cannot list resource "secrets" in API group "" in the '
                                        f'namespace "{OPERATOR_NS}"') in secrets.stderr
    roles = await stack.kubectl("create", "rolebinding", "me-admin", "--clusterrole=admin", "--user=alice",
                                check=False)
    assert 'User "alice" cannot create resource "rolebindings"' in roles.stderr
    assert (await stack.kubectl("auth", "can-i", "create", "agentinputs.sessionops.dev")).stdout == "yes\n"
    assert (await stack.kubectl("auth", "can-i", "delegate", "agentruns.sessionops.dev",
                                check=False)).stdout == "no\n"
    # The administrator may act as alice; alice may not act as anybody.
    as_alice = await stack.kubectl("--as=alice", "get", "secrets", "-n", OPERATOR_NS, check=False, admin=True)
    assert 'User "alice" cannot list resource "secrets"' in as_alice.stderr
    assert (await stack.kubectl("--as=bob", "get", "agents", check=False)).returncode == 1


async def test_the_operator_fails_without_the_rule_that_lets_it_create_worker_jobs(local: tuple) -> None:
    stack, _ = local
    original = await stack.get("clusterrole", f"{RELEASE}-operator", admin=True)
    without = {key: original[key] for key in ("apiVersion", "kind", "metadata", "rules")}
    without["rules"] = [r for r in original["rules"] if r.get("apiGroups") != ["batch"]]
    assert len(without["rules"]) == len(original["rules"]) - 1
    await stack.kubectl("replace", "-f", "-", input=yaml.safe_dump(without), admin=True)
    name = unique("r")
    try:
        await stack.apply(m.agent(name))
        await stack.apply(m.session(name, name, model="replay/hello"))
        await stack.apply(m.message(f"{name}-1", name, "hi", delivery="FollowUp"))
        # The operator's log says why (JSON-escaped quotes removed): the Job was refused to its ServiceAccount.
        expected = (f'jobs.batch is forbidden: User "{OPERATOR}" cannot create resource "jobs" in API group "batch" '
                    f'in the namespace "{stack.namespace}"')
        deadline = time.monotonic() + 60
        while expected not in stack.operator_log(tail=2000).replace("\\", ""):
            assert time.monotonic() < deadline, f"the operator did not report the forbidden Job:\n{stack.operator_log()}"
            await asyncio.sleep(0.5)
        run = await stack.get("arun", f"{name}-t1")
        assert run["status"]["phase"] in ("Pending", "Running"), run["status"]
        jobs = await stack.kubectl("get", "jobs", "-o", "name")
        assert f"{name}-t1" not in jobs.stdout
    finally:
        restored = {key: original[key] for key in ("apiVersion", "kind", "metadata", "rules")}
        restored["metadata"] = {"name": original["metadata"]["name"], "labels": original["metadata"].get("labels")}
        await stack.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                            input=yaml.safe_dump(restored), admin=True)
    # With the rule back, the same turn runs (the operator retries the failed step).
    run: dict[str, Any] = await stack.wait_for("arun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=120)
    assert run["status"]["phase"] == "Succeeded", run["status"]


async def test_only_who_may_get_the_run_reads_its_transcript(local: tuple, tmp_path: Any) -> None:
    """Transcripts are read under RBAC: alice (edit) reads a run's transcript through the plugin; bob,
    bound to nothing, and carol, bound to a Role that reads transcripts but not runs, are refused."""
    stack, cluster = local
    name = unique("tr")
    await stack.apply(m.agent(name))
    await stack.apply(m.session(name, name, model="replay/hello"))
    await stack.apply(m.message(f"{name}-1", name, "hi", delivery="FollowUp"))
    await stack.wait_for("arun", f"{name}-t1", phase("Succeeded"), timeout=90)
    await stack.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                       "metadata": {"name": "transcripts-only"},
                       "rules": [{"apiGroups": ["sessionops.dev"], "resources": ["agenttranscripts"],
                                  "verbs": ["get", "list", "watch"]}]}, admin=True)
    await stack.kubectl("create", "rolebinding", "carol-transcripts", "--role=transcripts-only", "--user=carol",
                        admin=True)

    def transcript(user: str | None) -> Any:
        config = stack.kubeconfig if user is None else kubeconfig_with_token(
            stack.admin_kubeconfig, tmp_path / f"{user}.kubeconfig", cluster.add_user(user), stack.namespace)
        argv = ["--kubeconfig", str(config), "-n", stack.namespace, "transcript", f"{name}-t1", "-o", "json"]
        return CliRunner().invoke(app, argv, env={"COLUMNS": "200"})

    alice = await asyncio.to_thread(transcript, None)
    assert alice.exit_code == 0, alice.output
    assert "hi" in alice.output
    for user in ("bob", "carol"):
        refused = await asyncio.to_thread(transcript, user)
        assert refused.exit_code != 0, refused.output
        assert "forbidden" in refused.output.lower() and "agentruns" in refused.output, refused.output
    # carol's Role does let the API server hand her transcript objects: the plugin stops at the run,
    # and the chart grants transcripts only together with runs (tests/chart/test_security.py).
    direct = await stack.kubectl("--as=bob", "get", "agenttranscripts", check=False, admin=True)
    assert direct.returncode == 1 and 'User "bob" cannot list resource "agenttranscripts"' in direct.stderr

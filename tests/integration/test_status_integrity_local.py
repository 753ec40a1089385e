"""Status integrity (issue 12 item 5) on the local stack: status is written only by the operator and,
for its own run, the run's worker (pod-bound token). Forgeries by people are refused naming the field,
the CRDs' transition rules hold even for the documented break-glass group, and the queue never sticks."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from tests.e2e import manifests as m
from tests.e2e.manifests import phase
from tests.stack import TOOLS, Stack, kubeconfig_with_token, run_cli

pytestmark = pytest.mark.asyncio(loop_scope="module")

BREAK_GLASS = "sessionops.dev:status-break-glass"
WORKER_SA = "sessionops-worker"


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:6]}"


async def kubectl_as(stack: Stack, config: Path, *args: str, input: str | None = None) -> Any:
    return await run_cli(TOOLS / "kubectl", "--kubeconfig", str(config), "-n", stack.namespace, *args,
                         input=input, check=False)


async def patch_status(stack: Stack, config: Path | None, kind: str, name: str, status: dict[str, Any],
                       *extra: str) -> Any:
    args = ("patch", kind, name, "--subresource=status", "--type=merge", "-p", json.dumps({"status": status}), *extra)
    if config is None:
        return await stack.kubectl(*args, check=False, admin=True)
    return await kubectl_as(stack, config, *args)


async def status_writer(stack: Stack, cluster: Any, tmp: Path) -> Path:
    """dave: a person explicitly granted patch on every status subresource (RBAC lets him through)."""
    await stack.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                       "metadata": {"name": "status-writer"},
                       "rules": [{"apiGroups": ["sessionops.dev"],
                                  "resources": ["agentsessions/status", "agentinputs/status", "agentruns/status"],
                                  "verbs": ["get", "patch", "update"]},
                                 {"apiGroups": ["sessionops.dev"],
                                  "resources": ["agentsessions", "agentinputs", "agentruns"],
                                  "verbs": ["get", "list"]}]}, admin=True)
    await stack.kubectl("create", "rolebinding", "dave-status", "--role=status-writer", "--user=dave",
                        check=False, admin=True)
    return kubeconfig_with_token(stack.admin_kubeconfig, tmp / "dave.kubeconfig", cluster.add_user("dave"),
                                 stack.namespace)


async def finished_turn(stack: Stack, name: str) -> None:
    await stack.apply(m.agent(name))
    await stack.apply(m.session(name, name, model="replay/assistant"))  # answers any number of turns
    await stack.apply(m.message(f"{name}-1", name, "hi", delivery="FollowUp"))
    run = await stack.wait_for("arun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=90)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    await stack.wait_for("asess", name, lambda s: s["status"].get("phase") == "Idle"
                         and s["status"].get("lastSequence") == 1)


FORGERIES = [
    # (kind, object suffix, forged status, field named in the refusal)
    ("asess", "", {"lastSequence": 0}, "status.lastSequence"),
    ("arun", "-t1", {"phase": "Waiting", "waitpoint": {"id": "forged", "kind": "Question",
                                                       "questions": [{"questionId": "q", "question": "?"}]}},
     "status.phase"),
    ("ainput", "-1", {"phase": "Cancelled"}, "status.phase"),
    ("ainput", "-1", {"phase": "Pending"}, "status.phase"),
    ("ainput", "-1", {"phase": "Consumed", "run": "elsewhere"}, "status.run"),
]
WEBHOOK_ONLY = [
    ("asess", "", {"lastSequence": 50, "queue": {"paused": True}}, "status.lastSequence, status.queue"),
    ("arun", "-t1", {"usage": {"inputTokens": 1, "outputTokens": 1}}, "status.usage"),
    ("ainput", "-1", {"conditions": []}, "status.conditions"),
]


async def test_forged_status_is_refused_naming_the_field_and_the_queue_goes_on(local: tuple, tmp_path: Path) -> None:
    stack, cluster = local
    name = unique("f")
    await finished_turn(stack, name)
    dave = await status_writer(stack, cluster, tmp_path)
    before = {kind: await stack.get(kind, f"{name}{suffix}") for kind, suffix, _, _ in FORGERIES}
    for kind, suffix, forged, field in FORGERIES:
        target = f"{name}{suffix}"
        # alice (edit): RBAC grants her no status subresource at all.
        res = await patch_status(stack, stack.kubeconfig, kind, target, forged)
        assert res.returncode != 0 and 'User "alice" cannot' in res.stderr \
            and '/status" in API group "sessionops.dev"' in res.stderr, res.stderr
        # Through the main resource the API server ignores status: nothing changes.
        await stack.kubectl("patch", kind, target, "--type=merge", "-p", json.dumps({"status": forged}), check=False)
        # dave may patch status by RBAC, a cluster admin may do anything, break-glass is allowed by the
        # webhook: the CRD's transition rules (checked first) refuse all three, naming the field.
        for config, extra in ((dave, ()), (None, ()), (None, ("--as=kubernetes-admin", f"--as-group={BREAK_GLASS}",
                                                                   "--as-group=system:masters"))):
            res = await patch_status(stack, config, kind, target, forged, *extra)
            assert res.returncode != 0 and f"{field}: Invalid value" in res.stderr and "never" in res.stderr, \
                res.stderr
    # What the transition rules allow, the status webhook refuses to anyone but the operator and the
    # run's worker, naming the fields: a forged (higher) sequence, a paused queue, a forged usage.
    for kind, suffix, forged, fields in WEBHOOK_ONLY:
        for config, who in ((dave, "dave"), (None, "kubernetes-admin")):
            res = await patch_status(stack, config, kind, f"{name}{suffix}", forged)
            assert res.returncode != 0, res.stdout
            assert 'admission webhook "status.sessionops.dev" denied the request' in res.stderr, res.stderr
            assert f"{fields}: {who} may not change" in res.stderr, res.stderr
    for kind, suffix, _, _ in FORGERIES:
        after = await stack.get(kind, f"{name}{suffix}")
        assert {k: v for k, v in after["status"].items() if k not in ("kopf", "conditions")} == \
            {k: v for k, v in before[kind]["status"].items() if k not in ("kopf", "conditions")}
    # The forged waitpoint never landed: a Resume for it is refused at admission.
    res = await stack.kubectl("create", "-f", "-", check=False, input=yaml.safe_dump(
        m.resume(f"{name}-r1", name, f"{name}-t1", "forged", answers=["x"])))
    assert res.returncode != 0 and "is not waiting" in res.stderr, res.stderr
    # The queue never sticks: the next input gets sequence 2 and its own turn, which succeeds.
    await stack.apply(m.message(f"{name}-2", name, "again", delivery="FollowUp"))
    run = await stack.wait_for("arun", f"{name}-t2", phase("Succeeded", "Failed"), timeout=90)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert (await stack.get("ainput", f"{name}-2"))["status"]["run"] == f"{name}-t2"
    assert (await stack.get("arun", f"{name}-t1"))["status"]["phase"] == "Succeeded"


async def test_break_glass_may_repair_what_the_rules_allow_with_a_warning(local: tuple) -> None:
    stack, _ = local
    name = unique("g")
    await finished_turn(stack, name)
    res = await patch_status(stack, None, "asess", name, {"lastSequence": 7}, "--as=kubernetes-admin",
                             f"--as-group={BREAK_GLASS}", "--as-group=system:masters")
    assert res.returncode == 0, res.stderr
    assert "break-glass status write by kubernetes-admin" in res.stderr and "status.lastSequence" in res.stderr
    assert (await stack.get("asess", name))["status"]["lastSequence"] == 7
    # Receipt goes on from there.
    await stack.apply(m.message(f"{name}-2", name, "again", delivery="FollowUp"))
    assert (await stack.get("ainput", f"{name}-2"))["spec"]["sequence"] == 8
    run = await stack.wait_for("arun", f"{name}-t8", phase("Succeeded", "Failed"), timeout=90)
    assert run["status"]["phase"] == "Succeeded", run["status"]


async def worker_token(stack: Stack, pod: str, labels: dict[str, str]) -> str:
    """A pod-bound token of the worker ServiceAccount for a pod with these labels (as the kubelet would
    mount it); the pod runner does not start bare pods, so nothing runs."""
    await stack.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "labels": labels},
                       "spec": {"serviceAccountName": WORKER_SA, "restartPolicy": "Never",
                                "containers": [{"name": "worker", "image": "sessionops:test"}]}}, admin=True)
    out = await stack.kubectl("create", "token", WORKER_SA, "--bound-object-kind=Pod",
                              f"--bound-object-name={pod}", admin=True)
    return out.stdout.strip()


async def raw_patch_status(cluster: Any, token: str, namespace: str, plural: str, name: str,
                           status: dict[str, Any]) -> tuple[int, str]:
    """PATCH .../<plural>/<name>/status as the worker does (no GET first: the worker Role has none on status)."""
    url = f"{cluster.api_url}/apis/sessionops.dev/v1alpha1/namespaces/{namespace}/{plural}/{name}/status"
    async with aiohttp.ClientSession() as http, http.patch(
            url, data=json.dumps({"status": status}), ssl=cluster.client_ssl(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/merge-patch+json"}) as resp:
        body = await resp.json()
        return resp.status, body.get("message", "") if resp.status >= 400 else ""


async def test_a_worker_writes_only_its_own_runs_status_and_claims_only_for_it(local: tuple) -> None:
    stack, cluster = local
    mine, other = unique("m"), unique("o")
    await finished_turn(stack, mine)
    await finished_turn(stack, other)
    token = await worker_token(stack, f"{mine}-t1-1-abcde", {"sessionops.dev/run": f"{mine}-t1",
                                                             "sessionops.dev/session": mine})
    ns = stack.namespace
    usage = {"usage": {"inputTokens": 1, "outputTokens": 1}}
    assert await raw_patch_status(cluster, token, ns, "agentruns", f"{mine}-t1", usage) == (200, "")
    code, message = await raw_patch_status(cluster, token, ns, "agentruns", f"{other}-t1", usage)
    assert code == 403 and "status.usage" in message, message
    assert f'is the worker of agentrun "{mine}-t1", not of "{other}-t1"' in message
    # Even its own run's finished phase is kept by the CRD.
    code, message = await raw_patch_status(cluster, token, ns, "agentruns", f"{mine}-t1", {"phase": "Failed"})
    assert code == 422 and "never changes" in message, message
    # Inputs: another session's are not the worker's; its own session's settled input keeps its verdict.
    code, message = await raw_patch_status(cluster, token, ns, "agentinputs", f"{other}-1", {"conditions": []})
    assert code == 403 and f'works for session "{mine}"' in message, message
    code, message = await raw_patch_status(cluster, token, ns, "agentinputs", f"{mine}-1", {"conditions": []})
    assert code == 403 and "a worker only marks an input Consumed by its run" in message, message
    # A deleted pod's token is dead: the API server refuses it before any webhook.
    await stack.kubectl("delete", "pod", f"{mine}-t1-1-abcde", "--wait=false", admin=True)
    code, _ = await raw_patch_status(cluster, token, ns, "agentruns", f"{mine}-t1", usage)
    assert code == 401

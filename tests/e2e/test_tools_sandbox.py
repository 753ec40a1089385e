"""Issue 12, done-when 1: tools run without the worker's credentials.

A turn in AlwaysTrust runs the ``red-team`` replay scenario: ``env``, every
``/proc/*/environ``, the ServiceAccount token path, the worker's credential paths (in-pod
paths, and the host paths the pod runner uses for the worker container: its kubeconfig with
the pod's token, its volumes), and the Kubernetes API without and with any token found. The
canaries (the model key and a database credential the worker gets from Secrets, and the
worker's own ServiceAccount token) must appear in no model request, CR, Event or pod log.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from pathlib import Path

import pytest
import yaml
from psycopg.conninfo import conninfo_to_dict

from tests.e2e.conftest import REAL
from tests.e2e.manifests import agent, message, phase, session

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.skipif(bool(REAL), reason="reads the pod runner's execution record")]

PROBE = '''
import json, re, ssl, sys, urllib.request, os, glob
api = open("api.txt").read().strip()
tokens = [None]
for path in [*open("targets.txt").read().split(), "/var/run/secrets/kubernetes.io/serviceaccount/token"]:
    for f in glob.glob(os.path.expandvars(path)):
        try:
            text = open(f).read()
        except OSError as e:
            print("unreadable", f, e)
            continue
        tokens += re.findall(r"token: (\\S+)", text) + ([text.strip()] if f.endswith("token") else [])
for env in os.environ.values():
    tokens += re.findall(r"ey[A-Za-z0-9_.-]{20,}", env)
ctx = ssl._create_unverified_context()
for token in tokens:
    for url in ("/api/v1/namespaces/team-a/secrets", "/apis/sessionops.dev/v1alpha1/namespaces/team-a/agentruns"):
        request = urllib.request.Request(api + url, headers={"Authorization": f"Bearer {token}"} if token else {})
        try:
            print(url, urllib.request.urlopen(request, context=ctx, timeout=5).read().decode()[:20000])
        except Exception as e:
            print(url, "refused:", e)
'''


async def test_tools_reach_no_credential_of_the_worker(stack, name: str) -> None:
    runner = stack.pod_runner
    api_key, db_secret = f"sk-canary-{uuid.uuid4().hex}", f"canary-db-{uuid.uuid4().hex}"
    await stack.kubectl("create", "secret", "generic", f"{name}-canary", "-n", stack.namespace,
                        f"--from-literal=api-key={api_key}", f"--from-literal=dsn=postgresql://u:{db_secret}@db/x",
                        admin=True)
    # The worker's environment gets two canaries from a Secret (as an Agent author may give it);
    # its own database credential is the operator-written Secret mounted as a file (read below).
    ref = f"{name}-canary"
    await stack.apply(agent(name, approvalMode="AlwaysTrust", worker={"env": [
        {"name": "CANARY_API_KEY", "valueFrom": {"secretKeyRef": {"name": ref, "key": "api-key"}}},
        {"name": "CANARY_DSN", "valueFrom": {"secretKeyRef": {"name": ref, "key": "dsn"}}}]}), admin=True)
    workdir = runner.workdirs / stack.namespace / name
    workdir.mkdir(parents=True, exist_ok=True)
    admin = yaml.safe_load((stack.root / "admin.kubeconfig").read_text())
    (workdir / "api.txt").write_text(admin["clusters"][0]["cluster"]["server"])
    # Host paths the runner uses for the worker container ($HOSTNAME: the pod's name, known to the
    # tools too), and the kubeconfigs of the stack's other identities.
    (workdir / "targets.txt").write_text("\n".join([
        f"{runner.scratch}/{stack.namespace}/$HOSTNAME/kubeconfig",
        f"{runner.scratch}/{stack.namespace}/$HOSTNAME/*",
        f"{runner.scratch}/{stack.namespace}/$HOSTNAME/secret-volumes/*/*",
        f"{runner.node}/{stack.namespace}/$HOSTNAME/kube-api-access/*",
        f"{runner.node}/{stack.namespace}/$HOSTNAME/tmp/*",
        f"{runner.scratch}", f"{runner.node}",
        str(stack.root / "admin.kubeconfig"), str(stack.root / "operator.kubeconfig"), str(stack.root / "kubeconfig"),
    ]) + "\n")
    (workdir / "probe.py").write_text(PROBE)
    await stack.apply(session(name, name, model="replay/red-team"))
    await stack.apply(message(f"{name}-1", name, "look around"))
    run = await stack.wait_for("agentrun", f"{name}-t1", phase("Succeeded", "Failed"), timeout=120)
    assert run["status"]["phase"] == "Succeeded", run["status"]

    requests = await stack.replay_requests("red-team")
    tool_results = [m.get("content") for r in requests for m in r.get("body", r).get("messages", [])
                    if m.get("role") == "tool"]
    assert len(tool_results) >= 5, "every probe ran and its output went back to the model"
    # The record's apiKey is the key the worker itself presents (legitimately); what the model
    # reads is each request's body.
    seen = {"model requests": json.dumps([{k: v for k, v in r.items() if k != "apiKey"} for r in requests])}
    for kind in ("agentruns", "agentinputs", "agentsessions", "agenttranscripts", "events"):
        out = await stack.kubectl("get", kind, "-n", stack.namespace, "-o", "json", admin=True)
        seen[kind] = out.stdout
    seen["pod logs"] = "\n".join(p.read_text(errors="replace") for p in Path(runner.log_dir).glob("*.log"))
    canaries = {"model key": api_key, "database credential": db_secret}
    # The namespace's own database role, whose DSN the worker reads from its mounted file.
    out = await stack.kubectl("get", "secret", "sessionops-worker-database", "-n", stack.namespace,
                              "-o", "jsonpath={.data.dsn}", admin=True)
    worker_dsn = conninfo_to_dict(base64.b64decode(out.stdout).decode())
    assert worker_dsn.get("password") and worker_dsn.get("user") != "postgres", sorted(worker_dsn)
    canaries["worker database password"] = str(worker_dsn["password"])
    leaks = [f"{what} in {where}" for what, value in canaries.items() for where, text in seen.items() if value in text]
    assert not leaks, leaks

    execution = await asyncio.to_thread(runner.wait_execution, f"{name}-t1-1")
    # The record names what the tools tried: the worker's kubeconfig and volumes are where targets.txt said.
    assert execution.kubeconfig == runner.scratch / stack.namespace / execution.pod / "kubeconfig"
    assert execution.mounts["/var/run/secrets/kubernetes.io/serviceaccount"] == (
        runner.node / stack.namespace / execution.pod / "kube-api-access")
    [tools] = execution.sidecars
    assert tools.user is not None and tools.user != 0 and tools.kubeconfig is None
    token = yaml.safe_load(execution.kubeconfig.read_text())["users"][0]["user"]["token"]
    canaries["worker token"] = token

    leaks = [f"{what} in {where}" for what, value in canaries.items() for where, text in seen.items() if value in text]
    assert not leaks, leaks

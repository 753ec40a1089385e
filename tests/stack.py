"""The whole product on this machine: the test cluster, the chart installed into it with the
real ``helm``, the operator process (``python -m sessionops.manager``), the replay model,
the pod runner and a PostgreSQL database of its own.

Everybody has their own identity, as on a real cluster: the set-up (namespaces, Secrets, the
helm install) and the pod runner (the kubelet and Job controller) use the admin kubeconfig
(``stack.admin_kubeconfig``); the operator runs as the chart's ServiceAccount with a token
from a TokenRequest; workers run as the chart's worker ServiceAccount with pod-bound tokens
(the pod runner); people are named users: ``stack.kubeconfig`` is ``alice``'s (group
``team-a-devs``), bound to the aggregated ``edit`` ClusterRole in the stack's namespaces.

Used by the integration tests (``stack`` fixture) and by ``make dev`` (``tests.localstack``).
The chart's own webhook configurations are exercised: the test cluster maps the chart's
webhook Service to the operator's local webhook port.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import psycopg
import psycopg.sql
import yaml

import sessionops
from sessionops.api.names import SESSION_LABEL
from sessionops.platform import checkpoint_scope
from testcluster.tools import Completed, run

if TYPE_CHECKING:
    from testcluster.podrunner import PodRunner

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / ".tools" / "bin"
RELEASE = "sessionops"
OPERATOR_NS = "sessionops-system"
WEBHOOK_SERVICE = f"{RELEASE}-webhook"
CONFIGMAP = f"{RELEASE}-config"
EXAMPLES_REPLAY = ROOT / "examples" / "replay"
USER = "alice"
USER_GROUPS = ("team-a-devs",)
USER_BINDING = f"{USER}-edit"
OPERATOR_TOKEN_DURATION = "720h"
GO_BINARY = ("FAITHFUL_CLUSTER_GO_BINARY", str(TOOLS / "kubectl"))
"""The environment variable that tells the test cluster which client-go binary to read protobuf types from
(``testcluster.protobuf``; it falls back to ``kubectl`` on PATH)."""
PACKAGE_DIR = Path(sessionops.__file__).resolve().parents[1]
"""The directory holding the ``sessionops`` package (``operator/`` of this checkout)."""
POD_RUNNER_ARGS = ("--python-path", str(PACKAGE_DIR), "--workdir-label", SESSION_LABEL)
"""``make_pod_runner``'s options for ``python -m testcluster.podrunner``."""


def make_pod_runner(kubeconfig: Path, workdirs: Path, **options: Any) -> PodRunner:
    """A (not yet started) pod runner for the product's Jobs: the Jobs of one session share its work
    directory (a Retry finds the crashed segment's files), and a container another UID's interpreter
    runs (the tools sidecar) finds this checkout's package by PYTHONPATH: that interpreter reads none
    of our site-packages, where a clean clone's editable install lives."""
    from testcluster.podrunner import PodRunner

    return PodRunner(kubeconfig, workdirs, python_path=[PACKAGE_DIR], workdir_label=SESSION_LABEL, **options)


def admin_dsn() -> str:
    """``DATABASE_URL``: the user's server, or the embedded one the suite or ``make dev`` started."""
    try:
        return os.environ["DATABASE_URL"]
    except KeyError:
        raise RuntimeError("DATABASE_URL is not set: the suite (tests/conftest.py) and `make dev` set it "
                           "to an embedded server when the user gives none") from None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reserve_port() -> socket.socket:
    """A port held for a process this stack starts (and restarts): a bound, never listening socket.

    A port only probed free (``free_port``) can be taken before the operator binds it, and again
    while a test restarts the operator: by another xdist worker's probe or by any outgoing
    connection, whose ephemeral port may be any free one. The kernel gives neither a port that a
    socket is bound to; SO_REUSEADDR still lets the operator's listener (which sets it too) bind
    it, since this socket never listens."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    return s


def database_dsn(admin_dsn: str, name: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(admin_dsn)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo(**info)


def create_database(admin: str | None = None) -> tuple[str, str]:
    name = f"sessionops_{uuid.uuid4().hex[:12]}"
    admin = admin or admin_dsn()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name, database_dsn(admin, name)


def drop_database(name: str, admin: str | None = None) -> None:
    """The database and the operator's per-namespace roles of it (roles are the server's, not the database's)."""
    with psycopg.connect(admin or admin_dsn(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        for row in conn.execute("SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s)",
                                (checkpoint_scope.role_prefix(name),)).fetchall():
            conn.execute(psycopg.sql.SQL("DROP ROLE IF EXISTS {}").format(psycopg.sql.Identifier(row[0])))


run_cli = run
"""Run a CLI without blocking the event loop (the test API server may run in this loop)."""


def chart_values(replay_url: str, scenarios: list[str], namespaces: list[str],
                 default_model: str = "replay/hello", models: Sequence[dict[str, Any]] = (),
                 checkpoint_retention: int | None = None) -> dict[str, Any]:
    """The chart's values: a ``replay/<name>`` catalog entry per scenario, plus ``models``."""
    retention = {} if checkpoint_retention is None else {"checkpointRetention": checkpoint_retention}
    return {
        "operator": {"replicas": 1},
        "postgresql": {"enabled": False},
        "externalDatabase": {"existingSecret": "sessionops-database", "existingSecretKey": "url"},
        "workerNamespaces": namespaces,
        "config": {
            "defaults": {"model": default_model},
            "models": [*({"name": f"replay/{s}", "provider": "replay", "model": s, "endpoint": f"{replay_url}/v1"}
                         for s in sorted(scenarios)), *models],
            **retention,
        },
    }


@dataclasses.dataclass
class Stack:
    """Handles to a running stack; ``kubectl(...)`` runs the real binary against it."""

    root: Path
    kubeconfig: Path
    database_url: str
    replay_url: str
    namespace: str
    webhook_port: int
    metrics_port: int
    admin_kubeconfig: Path | None = None
    """The cluster administrator's kubeconfig (set-up only); None: ``kubeconfig`` is the admin's too."""
    operator: asyncio.subprocess.Process | None = None
    operator_env: dict[str, str] = dataclasses.field(default_factory=dict)
    operator_user: str = ""
    """The operator's username at the test cluster (to count its requests: ``cluster.served``)."""
    pod_runner: Any = None

    def checkpoint_dsn(self, namespace: str | None = None) -> str:
        """The admin DSN on a worker namespace's checkpoint schema, as the operator reads it."""
        scope = checkpoint_scope.scope_of(namespace or self.namespace, checkpoint_scope.database_of(self.database_url))
        return checkpoint_scope.scoped(self.database_url, scope.schema)

    async def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                      admin: bool = False) -> Completed:
        """The real kubectl as the stack's user (``admin=True``: as the administrator, for set-up);
        in the stack's namespace unless the arguments name one."""
        ns = [] if "-n" in args or "--namespace" in args or "-A" in args else ["-n", self.namespace]
        config = self.admin_kubeconfig if admin and self.admin_kubeconfig else self.kubeconfig
        cache = "kube-cache-admin" if admin else "kube-cache"
        return await run_cli(TOOLS / "kubectl", "--kubeconfig", str(config), "--cache-dir",
                             str(self.root / cache), *ns, *args, input=input, check=check)

    async def helm(self, *args: str, check: bool = True) -> Completed:
        """Helm as the administrator: installing CRDs, webhooks and cluster roles is set-up."""
        env = {"HELM_CACHE_HOME": str(self.root / "helm" / "cache"),
               "HELM_CONFIG_HOME": str(self.root / "helm" / "config"),
               "HELM_DATA_HOME": str(self.root / "helm" / "data")}
        config = self.admin_kubeconfig or self.kubeconfig
        return await run_cli(TOOLS / "helm", "--kubeconfig", str(config), *args, check=check, env=env)

    async def apply(self, manifest: dict[str, Any] | str, namespace: str | None = None,
                    admin: bool = False) -> Completed:
        text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest)
        return await self.kubectl("apply", "-n", namespace or self.namespace, "-f", "-", input=text, admin=admin)

    async def get(self, kind: str, name: str, namespace: str | None = None, admin: bool = False) -> dict[str, Any]:
        out = await self.kubectl("get", kind, name, "-n", namespace or self.namespace, "-o", "json", admin=admin)
        return json.loads(out.stdout)

    async def wait_for(self, kind: str, name: str, predicate: Any, timeout: float = 30,
                       namespace: str | None = None) -> dict[str, Any]:
        """Poll until ``predicate(obj)`` holds; the last object is in the assertion message."""
        deadline = time.monotonic() + timeout
        obj: dict[str, Any] = {}
        while True:
            res = await self.kubectl("get", kind, name, "-n", namespace or self.namespace, "-o", "json",
                                     check=False)
            if res.returncode == 0:
                obj = json.loads(res.stdout)
                if predicate(obj):
                    return obj
            if time.monotonic() > deadline:
                raise AssertionError(f"{kind}/{name} did not reach the expected state in {timeout}s: "
                                     f"{json.dumps(obj.get('status'), indent=1)[:3000]}")
            await asyncio.sleep(0.1)

    async def start_operator(self) -> None:
        log = open(self.root / "operator.log", "ab")  # noqa: SIM115 - the process owns it
        self.operator = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sessionops.manager", env={**os.environ, **self.operator_env},
            stdout=log, stderr=asyncio.subprocess.STDOUT, cwd=str(ROOT))
        await self.wait_healthy()

    async def stop_operator(self, kill: bool = False) -> None:
        if self.operator is None or self.operator.returncode is not None:
            return
        if kill:
            self.operator.kill()
        else:
            self.operator.terminate()
        try:
            await asyncio.wait_for(self.operator.wait(), 20)
        except TimeoutError:
            self.operator.kill()
            await self.operator.wait()

    async def wait_healthy(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession() as http:
            while True:
                if self.operator is not None and self.operator.returncode is not None:
                    raise AssertionError(f"operator exited ({self.operator.returncode}):\n{self.operator_log()}")
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(f"http://127.0.0.1:{self.metrics_port}/healthz") as r:
                        if r.status == 200 and await self._webhook_listening():
                            return
                if time.monotonic() > deadline:
                    raise AssertionError(f"operator not healthy in {timeout}s:\n{self.operator_log()}")
                await asyncio.sleep(0.1)

    async def _webhook_listening(self) -> bool:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", self.webhook_port)
        except OSError:
            return False
        writer.close()
        return True

    def operator_log(self, tail: int = 60) -> str:
        path = self.root / "operator.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-tail:]) if path.exists() else ""

    async def replay_requests(self, scenario: str | None = None) -> list[dict[str, Any]]:
        url = f"{self.replay_url}/requests" + (f"?scenario={scenario}" if scenario else "")
        async with aiohttp.ClientSession() as http, http.get(url) as r:
            return await r.json()


def kubeconfig_with_token(admin_kubeconfig: Path, path: Path, token: str, namespace: str) -> Path:
    """A kubeconfig for the same cluster (server, CA) that authenticates with ``token``."""
    config = yaml.safe_load(admin_kubeconfig.read_text())
    config["users"] = [{"name": "user", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"].update(user="user", namespace=namespace)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


async def install(stack: Stack, scenarios: list[str], namespaces: list[str], *, default_model: str = "replay/hello",
                  models: Sequence[dict[str, Any]] = (), checkpoint_retention: int | None = None) -> None:
    """As the administrator: namespaces, the operator's database secret, the chart (real helm), the
    user's RoleBindings; then the webhook certificate files and the operator's own kubeconfig. The
    worker namespaces get no database secret from us: the operator writes each one's own role."""
    for ns in [OPERATOR_NS, *namespaces]:
        await stack.kubectl("create", "namespace", ns, check=False, admin=True)
    await stack.kubectl("create", "secret", "generic", "sessionops-database", "-n", OPERATOR_NS,
                        f"--from-literal=url={stack.database_url}", check=False, admin=True)
    values = stack.root / "values.yaml"
    values.write_text(yaml.safe_dump(chart_values(stack.replay_url, scenarios, namespaces, default_model, models,
                                                  checkpoint_retention=checkpoint_retention)))
    await stack.helm("install", RELEASE, str(ROOT / "charts" / "sessionops"), "-n", OPERATOR_NS, "-f", str(values))
    for ns in namespaces:
        await stack.kubectl("create", "rolebinding", USER_BINDING, "--clusterrole=edit", f"--user={USER}",
                            "-n", ns, check=False, admin=True)
    secret = await stack.get("secret", f"{RELEASE}-webhook-tls", OPERATOR_NS, admin=True)
    certs = stack.root / "certs"
    certs.mkdir(exist_ok=True)
    for key in ("tls.crt", "tls.key", "ca.crt"):
        (certs / key).write_bytes(base64.b64decode(secret["data"][key]))
    # The operator's identity: the chart's ServiceAccount, as a pod of its Deployment would be.
    account = (await stack.kubectl("get", "serviceaccount", "-n", OPERATOR_NS, "-o", "name", "-l",
                                   "app.kubernetes.io/component=operator", admin=True)).stdout.split("/")[-1].strip()
    token = (await stack.kubectl("create", "token", account, "-n", OPERATOR_NS,
                                 f"--duration={OPERATOR_TOKEN_DURATION}", admin=True)).stdout.strip()
    stack.operator_user = f"system:serviceaccount:{OPERATOR_NS}:{account}"
    operator_kubeconfig = kubeconfig_with_token(stack.admin_kubeconfig or stack.kubeconfig,
                                                stack.root / "operator.kubeconfig", token, OPERATOR_NS)
    stack.operator_env = {
        "KUBECONFIG": str(operator_kubeconfig), "DATABASE_URL": stack.database_url,
        "SESSIONOPS_NAMESPACE": OPERATOR_NS, "SESSIONOPS_CONFIGMAP": CONFIGMAP,
        "SESSIONOPS_SERVICE_ACCOUNT": account,  # the identity the status webhook trusts, as the chart renders it
        "SESSIONOPS_WEBHOOK_ADDR": "127.0.0.1", "SESSIONOPS_WEBHOOK_PORT": str(stack.webhook_port),
        "SESSIONOPS_CERT_FILE": str(certs / "tls.crt"), "SESSIONOPS_KEY_FILE": str(certs / "tls.key"),
        "SESSIONOPS_PEERING": RELEASE,
        # kopf peering as in the chart (its ClusterKopfPeering RBAC is exercised); the identity is the
        # "pod" name, so a restarted operator is the same peer rather than one paused by its own ghost.
        "POD_ID": f"{RELEASE}-operator-0",
        "SESSIONOPS_METRICS_PORT": str(stack.metrics_port), "SESSIONOPS_SCAN_SECONDS": "1",
    }


@contextlib.asynccontextmanager
async def running_stack(root: Path, *, namespace: str = "team-a", operator: bool = True,
                        pod_runner: bool = True, checkpoint_retention: int | None = None,
                        ) -> AsyncIterator[tuple[Stack, Any]]:
    """Yields (stack, cluster): the cluster object lets tests set SAR policies and inject faults.
    ``checkpoint_retention``: the chart's default unless given."""
    from sessionops.replay.server import ReplayServer
    from testcluster import running_cluster

    root.mkdir(parents=True, exist_ok=True)
    db_name, dsn = await asyncio.to_thread(create_database)
    reserved = [reserve_port(), reserve_port()]
    webhook_port, metrics_port = (s.getsockname()[1] for s in reserved)
    try:
        async with running_cluster(kubeconfig=root / "admin.kubeconfig", bookmark_interval=1.0) as cluster, \
                ReplayServer(dirs=[EXAMPLES_REPLAY]) as replay:
            cluster.service_endpoints[(OPERATOR_NS, WEBHOOK_SERVICE)] = ("127.0.0.1", webhook_port)
            cluster.pod_log_dir = root / "pods"  # the pod runner's log_dir below: pods/log
            user = kubeconfig_with_token(root / "admin.kubeconfig", root / "kubeconfig",
                                         cluster.add_user(USER, USER_GROUPS), namespace)
            stack = Stack(root=root, kubeconfig=user, database_url=dsn, replay_url=replay.url,
                          namespace=namespace, webhook_port=webhook_port, metrics_port=metrics_port,
                          admin_kubeconfig=root / "admin.kubeconfig")
            await install(stack, list(replay.scenarios), [namespace], checkpoint_retention=checkpoint_retention)
            runner = None
            if pod_runner:
                runner = make_pod_runner(root / "admin.kubeconfig", root / "workdirs", log_dir=root / "pods")
                # Its watches are blocking clients: never block the loop the test cluster serves from.
                await asyncio.to_thread(runner.start)
                stack.pod_runner = runner
            try:
                if operator:
                    await stack.start_operator()
                yield stack, cluster
            finally:
                await stack.stop_operator()
                if runner is not None:
                    await asyncio.to_thread(runner.stop)
    finally:
        for s in reserved:
            s.close()
        await asyncio.to_thread(drop_database, db_name)

"""Fixtures of the worker tests: one test cluster, pod runner and database per test; one
replay server (over HTTP) for the module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from sessionops.api.config import OperatorConfig
from sessionops.platform.kube import Kube, load_api_client
from sessionops.platform.worker_kube import WorkerKube
from sessionops.replay import ReplayServer, running_replay_server
from testcluster.podrunner import PodRunner
from testcluster.podrunner.threaded import threaded_cluster
from tests.agent.pg import pg_dsn, pg_template, provision_namespace  # noqa: F401  (fixtures)
from tests.identities import api_path, chart_rbac, role_binding
from tests.stack import make_pod_runner
from tests.worker.harness import ALICE, ALICE_EDIT, MCP_HEADER_SECRETS, NS, OPERATOR_NS, Stack

ROOT = Path(__file__).resolve().parents[2]
SCENARIO_DIRS = [ROOT / "examples" / "replay", Path(__file__).parent / "scenarios"]


@pytest.fixture(scope="module")
def replay() -> Iterator[ReplayServer]:
    with running_replay_server(dirs=SCENARIO_DIRS) as server:
        yield server


def operator_config(replay: ReplayServer) -> OperatorConfig:
    models = [{"name": f"replay/{name}", "provider": "replay", "model": name, "endpoint": f"{replay.url}/v1"}
              for name in sorted(replay.scenarios)]
    # A catalog entry whose scenario the replay server does not know: the model answers 404.
    models.append({"name": "replay/missing", "provider": "replay", "model": "no-such-scenario",
                   "endpoint": f"{replay.url}/v1"})
    # Retention 1: every segment of these tests prunes the thread to its latest checkpoint, so
    # resumes, retries, steers and cancellations are all shown to work on a pruned thread.
    return OperatorConfig.model_validate({"defaults": {"model": "replay/hello"}, "models": models,
                                          "checkpointRetention": 1})


@pytest.fixture
def stack(tmp_path: Path, replay: ReplayServer, pg_dsn: str) -> Iterator[Stack]:  # noqa: F811
    with threaded_cluster(tmp_path / "kubeconfig", bookmark_interval=0.2, strict=True) as cluster:
        kube = WorkerKube(load_api_client(str(tmp_path / "kubeconfig")))
        operator = Kube(load_api_client(str(tmp_path / "kubeconfig")))
        for crd in sorted((ROOT / "crds").glob("*.yaml")):
            kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                         body=yaml.safe_load(crd.read_text()))
        kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
        # The workers run as the chart's worker ServiceAccount with the chart's RBAC; alice, who sends
        # the inputs, may use agents in NS as anybody bound to `edit` there.
        kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": OPERATOR_NS}})
        for doc in chart_rbac([NS], OPERATOR_NS, secret_names=MCP_HEADER_SECRETS):
            kube.request("POST", api_path(doc), body=doc)
        kube.request("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings",
                     body=role_binding(ALICE_EDIT, NS, "edit", users=[ALICE.username]))
        # As the operator does before a namespace's first Job: its schema and role, and the role's
        # DSN in the Secret the worker pods mount. The harness reads checkpoints as the operator
        # does, with the admin credential on that schema.
        worker_dsn, admin_dsn = provision_namespace(pg_dsn, NS)
        kube.request("POST", f"/api/v1/namespaces/{NS}/secrets", body={
            "metadata": {"name": "sessionops-worker-database"}, "stringData": {"dsn": worker_dsn}})
        replay.records.clear()
        # The grace period must exceed the worker's own SIGTERM deadline (segment.TERMINATE_TIMEOUT, 5 s),
        # as a kubelet's 30 s default does: equal values raced, and a loaded machine lost the race.
        runner = make_pod_runner(tmp_path / "kubeconfig", tmp_path / "workdirs", log_dir=tmp_path / "logs",
                                 max_grace_seconds=10)
        with runner:
            stack = Stack(cluster=cluster, kube=kube, operator=operator, runner=runner, replay=replay,
                          dsn=admin_dsn, config=operator_config(replay), workdirs=tmp_path / "workdirs")
            stack.agent()
            try:
                yield stack
            finally:
                _report_failures(runner)
        operator.close()
        kube.close()


def _report_failures(runner: PodRunner) -> None:
    """Pod logs of failed workers, printed so a failing test shows them."""
    for execution in runner.executions:
        if execution.exit_code not in (0, None) or execution.running:
            print(f"--- {execution.pod} exit={execution.exit_code} ---\n{execution.output()[-4000:]}")

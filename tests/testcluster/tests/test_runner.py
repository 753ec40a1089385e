"""The pod runner against the test cluster, with small Python containers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import testcluster
from testcluster import FaithfulCluster
from testcluster.podrunner import PodRunner
from testcluster.podrunner.kube import Kube
from testcluster.podrunner.runner import BASE_ENV_KEYS, FINALIZER
from testcluster.podrunner.threaded import threaded_cluster

NS = "jobs"
WORKDIR_LABEL = "example.com/session"
IMAGE_CODE = "/opt/image-code"
PACKAGE_PARENT = Path(testcluster.__file__).resolve().parents[1]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[FaithfulCluster]:
    with threaded_cluster(tmp_path / "kubeconfig", bookmark_interval=0.2, strict=True) as cluster:
        yield cluster


@pytest.fixture
def kube(served: FaithfulCluster, tmp_path: Path) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(tmp_path / "kubeconfig")
    client.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
    client.request("POST", f"/api/v1/namespaces/{NS}/secrets",
                   body={"metadata": {"name": "creds"}, "stringData": {"token": "s3cret"}})
    yield client
    client.close()


@pytest.fixture
def runner(kube: Kube, tmp_path: Path) -> Iterator[PodRunner]:
    with PodRunner(tmp_path / "kubeconfig", tmp_path / "workdirs", log_dir=tmp_path / "logs",
                   max_grace_seconds=2, workdir_label=WORKDIR_LABEL, python_path=[IMAGE_CODE]) as r:
        yield r


def job(name: str, code: str, *, env: list[dict[str, Any]] | None = None, session: str = "s1",
        resources: dict[str, Any] | None = None, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "worker", "image": "example/worker:1", "command": ["python", "-c", code], "workingDir": "/work",
        "env": [{"name": "WORKDIR", "value": "/work"}, *(env or [])],
        "volumeMounts": [{"name": "work", "mountPath": "/work"}, {"name": "tmp", "mountPath": "/tmp"}]}
    if resources:
        container["resources"] = resources
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container],
                                "volumes": [{"name": "work", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}]}
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {WORKDIR_LABEL: session}},
            "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": {"app": "worker"}}, "spec": pod_spec}}}


def create(kube: Kube, body: dict[str, Any]) -> dict[str, Any]:
    return kube.request("POST", f"/apis/batch/v1/namespaces/{NS}/jobs", body=body)


def get_job(kube: Kube, name: str) -> dict[str, Any] | None:
    return kube.read(f"/apis/batch/v1/namespaces/{NS}/jobs/{name}")


def pods(kube: Kube) -> list[dict[str, Any]]:
    return kube.request("GET", f"/api/v1/namespaces/{NS}/pods")["items"]


def wait(check: Any, timeout: float = 15) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return value


def finished(kube: Kube, name: str) -> dict[str, Any] | None:
    found = get_job(kube, name)
    conditions = ((found or {}).get("status") or {}).get("conditions") or []
    return found if any(c["type"] in ("Complete", "Failed") for c in conditions) else None


def test_a_succeeding_container_completes_its_job_and_pod(kube: Kube, runner: PodRunner) -> None:
    created = create(kube, job("ok", "import os; print('token', os.environ['TOKEN'], os.getcwd() == os.environ['WORKDIR'])",
                               env=[{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}}]))
    execution = runner.wait_execution("ok")
    done = wait(lambda: finished(kube, "ok"))

    assert execution.exit_code == 0 and execution.reason == "Completed"
    assert execution.argv[0] == sys.executable and execution.env_names == ["TOKEN", "WORKDIR"]
    assert execution.output() == "token s3cret True\n"
    assert execution.workdir == runner.workdirs / NS / "s1"
    status = done["status"]
    assert [c["type"] for c in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert (status["succeeded"], status["active"]) == (1, 0) and status["startTime"] and status["completionTime"]
    [pod] = pods(kube)
    assert pod["metadata"]["name"].startswith("ok-") and len(pod["metadata"]["name"]) == len("ok-") + 5
    assert pod["metadata"]["labels"]["job-name"] == "ok" and pod["metadata"]["labels"]["app"] == "worker"
    assert pod["metadata"]["labels"]["controller-uid"] == created["metadata"]["uid"]
    assert pod["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert FINALIZER not in (pod["metadata"].get("finalizers") or [])
    assert pod["status"]["phase"] == "Succeeded"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"


def test_a_failing_container_fails_its_job_as_with_backoff_limit_zero(kube: Kube, runner: PodRunner) -> None:
    create(kube, job("bad", "import sys; sys.exit(3)"))
    execution = runner.wait_execution("bad")
    status = wait(lambda: finished(kube, "bad"))["status"]

    assert (execution.exit_code, execution.reason) == (3, "Error")
    assert [(c["type"], c["reason"]) for c in status["conditions"]] == [
        ("FailureTarget", "BackoffLimitExceeded"), ("Failed", "BackoffLimitExceeded")]
    assert (status["failed"], status["active"]) == (1, 0)
    [pod] = pods(kube)
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


def test_a_running_job_is_active_with_a_running_pod(kube: Kube, runner: PodRunner) -> None:
    create(kube, job("slow", "import time; time.sleep(30)"))
    runner.wait_execution("slow", finished=False)
    wait(lambda: (get_job(kube, "slow").get("status") or {}).get("ready") == 1)

    status = get_job(kube, "slow")["status"]
    assert status["active"] == 1 and status["startTime"]
    [pod] = pods(kube)
    assert pod["status"]["phase"] == "Running" and "running" in pod["status"]["containerStatuses"][0]["state"]
    runner.kill("slow", signal.SIGKILL)
    assert runner.wait_execution("slow").exit_code == 137


@pytest.mark.parametrize("policy", ["Foreground", "Background"])
def test_deleting_a_job_stops_its_process_and_removes_its_pod(kube: Kube, runner: PodRunner,
                                                             policy: str) -> None:
    code = ("import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(7)); "
            "print('up', flush=True); time.sleep(30)")
    create(kube, job("doomed", code))
    execution = runner.wait_execution("doomed", finished=False)
    wait(lambda: "up" in execution.output())

    kube.request("DELETE", f"/apis/batch/v1/namespaces/{NS}/jobs/doomed", body={"propagationPolicy": policy})

    assert runner.wait_execution("doomed").exit_code == 7
    assert execution.signals == [signal.SIGTERM]
    wait(lambda: not pods(kube) and get_job(kube, "doomed") is None)


def test_a_process_ignoring_sigterm_is_killed_after_the_grace_period(kube: Kube, runner: PodRunner) -> None:
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(30)"
    create(kube, job("stubborn", code))
    execution = runner.wait_execution("stubborn", finished=False)
    wait(lambda: "up" in execution.output())

    kube.request("DELETE", f"/apis/batch/v1/namespaces/{NS}/jobs/stubborn", body={"propagationPolicy": "Background"})

    assert runner.wait_execution("stubborn").exit_code == 137
    assert execution.signals == [signal.SIGTERM, signal.SIGKILL]


def test_held_jobs_do_not_start_until_released(kube: Kube, runner: PodRunner) -> None:
    runner.hold("late-")
    create(kube, job("late-1", "print('finally')"))
    wait(lambda: runner.held == ["late-1"])

    assert pods(kube) == [] and not (get_job(kube, "late-1").get("status") or {}).get("startTime")
    runner.unhold("late-")
    assert runner.wait_execution("late-1").output() == "finally\n"


def test_a_missing_secret_keeps_the_pod_pending(kube: Kube, runner: PodRunner) -> None:
    create(kube, job("nosecret", "print('never')",
                     env=[{"name": "X", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k"}}}]))
    with pytest.raises(RuntimeError, match="CreateContainerConfigError"):
        runner.wait_execution("nosecret", timeout=15)
    [pod] = pods(kube)
    assert pod["status"]["phase"] == "Pending"
    status = pod["status"]["containerStatuses"][0]
    assert status["state"]["waiting"] == {"reason": "CreateContainerConfigError",
                                          "message": 'secret "absent" not found'}
    assert status["imageID"] == "" and status["ready"] is False


def test_a_pod_no_node_matches_is_unschedulable(kube: Kube, runner: PodRunner) -> None:
    create(kube, job("nowhere", "print('never')", node_selector={"gpu": "a100"}))
    with pytest.raises(RuntimeError, match="Unschedulable"):
        runner.wait_execution("nowhere", timeout=15)
    [pod] = pods(kube)
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    [scheduled] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    assert "didn't match Pod's node affinity/selector" in scheduled["message"]


def test_a_container_over_its_memory_limit_is_oom_killed(kube: Kube, runner: PodRunner) -> None:
    code = "import time; data = bytearray(200 * 1024 * 1024); time.sleep(30)"
    create(kube, job("hungry", code, resources={"limits": {"memory": "64Mi"}}))
    execution = runner.wait_execution("hungry", timeout=20)

    assert (execution.exit_code, execution.reason) == (137, "OOMKilled")
    pod = wait(lambda: [p for p in pods(kube) if p["status"]["phase"] == "Failed"])[0]
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "OOMKilled"


def test_the_work_volume_is_kept_across_the_jobs_of_a_session(kube: Kube, runner: PodRunner) -> None:
    create(kube, job("first", "open('note.txt', 'w').write('kept')"))
    runner.wait_execution("first")
    create(kube, job("second", "print(open('note.txt').read())"))

    assert runner.wait_execution("second").output() == "kept\n"


def test_the_cli_runs_jobs_until_terminated(kube: Kube, tmp_path: Path) -> None:
    cli = subprocess.Popen(
        [sys.executable, "-m", "testcluster.podrunner", "--kubeconfig", str(tmp_path / "kubeconfig"),
         "--workdirs", str(tmp_path / "cli-work"), "--log-dir", str(tmp_path / "cli-logs")],
        cwd=PACKAGE_PARENT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGE_PARENT), os.environ.get("PYTHONPATH")]))})
    try:
        assert cli.stdout is not None
        while "pod runner ready" not in (line := cli.stdout.readline().decode()):
            assert line, "the CLI exited before it was ready"
        create(kube, job("via-cli", "print('hi')"))
        assert wait(lambda: finished(kube, "via-cli"))["status"]["succeeded"] == 1
    finally:
        cli.send_signal(signal.SIGTERM)
        assert cli.wait(timeout=15) == 0
    assert "job jobs/via-cli: Complete" in (tmp_path / "cli-logs" / "podrunner.log").read_text()


WHOAMI = """
import json
import kubernetes
kubernetes.config.load_kube_config()
review = kubernetes.client.AuthorizationV1Api().create_self_subject_access_review(
    {"spec": {"resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "jobs"}}})
print(json.dumps(review.status.allowed))
"""


def test_a_container_authenticates_as_its_pods_service_account_with_a_pod_bound_token(
        kube: Kube, runner: PodRunner, served: FaithfulCluster) -> None:
    kube.request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts", body={"metadata": {"name": "robot"}})
    body = job("whoami", WHOAMI)
    body["spec"]["template"]["spec"]["serviceAccountName"] = "robot"
    create(kube, body)
    execution = runner.wait_execution("whoami")
    assert execution.exit_code == 0, execution.output()
    [review] = served.access_reviews
    assert review["user"] == "system:serviceaccount:jobs:robot" and review["allowed"] is False
    assert "system:serviceaccounts:jobs" in review["groups"]
    assert review["extra"]["authentication.kubernetes.io/pod-name"] == [execution.pod]


def test_a_job_whose_service_account_does_not_exist_gets_no_pod(kube: Kube, runner: PodRunner) -> None:
    body = job("nobody", "print('never')")
    body["spec"]["template"]["spec"]["serviceAccountName"] = "ghost"
    create(kube, body)
    with pytest.raises(RuntimeError, match='error looking up service account jobs/ghost'):
        runner.wait_execution("nobody", timeout=15)
    assert pods(kube) == []


SIDECAR = """
import json, os, signal, sys, time
from pathlib import Path
signal.signal(signal.SIGTERM, lambda *a: (Path(os.environ["SHARED"], "sidecar-stopped").write_text("yes"), sys.exit(0)))
Path(os.environ["SHARED"], "sidecar.json").write_text(json.dumps({"uid": os.getuid(), "groups": os.getgroups(),
                                                                  "env": sorted(os.environ),
                                                                  "pythonpath": os.environ.get("PYTHONPATH")}))
while True:
    time.sleep(0.05)
"""

MAIN = """
import json, os, time
from pathlib import Path
shared = Path(os.environ["SHARED"])
while not (shared / "sidecar.json").exists():
    time.sleep(0.05)
print(json.dumps({"uid": os.getuid(), "kubeconfig": "KUBECONFIG" in os.environ,
                  "token": (Path(os.environ["TOKEN_DIR"]) / "token").is_file()}))
"""


def test_a_native_sidecar_runs_first_apart_and_stops_after_the_main_container(
        kube: Kube, runner: PodRunner) -> None:
    body = job("split", MAIN, env=[{"name": "SHARED", "value": "/shared"},
                                   {"name": "TOKEN_DIR", "value": "/var/run/secrets/kubernetes.io/serviceaccount"}])
    spec = body["spec"]["template"]["spec"]
    spec.update(automountServiceAccountToken=False,
                securityContext={"runAsUser": 65532, "fsGroup": 65532})
    spec["containers"][0]["volumeMounts"] += [
        {"name": "shared", "mountPath": "/shared"},
        {"name": "token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
    spec["volumes"] += [{"name": "shared", "emptyDir": {}}, {"name": "token", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token"}}]}}]
    spec["initContainers"] = [{
        "name": "tools", "image": "example/tools:1", "restartPolicy": "Always", "command": ["python", "-c", SIDECAR],
        "env": [{"name": "SHARED", "value": "/shared"}], "securityContext": {"runAsUser": 65533, "runAsGroup": 65533},
        "volumeMounts": [{"name": "shared", "mountPath": "/shared"}]}]
    create(kube, body)
    execution = runner.wait_execution("split")
    assert execution.exit_code == 0, execution.output()
    main = json.loads(execution.output().strip().splitlines()[-1])
    assert main == {"uid": os.getuid(), "kubeconfig": True, "token": True}
    [sidecar] = execution.sidecars
    assert sidecar.container == "tools" and sidecar.kubeconfig is None and sidecar.exit_code == 0
    shared = execution.mounts["/shared"]
    seen = json.loads((shared / "sidecar.json").read_text())
    assert (shared / "sidecar-stopped").read_text() == "yes"  # SIGTERM once the main container had exited
    # Only its own spec's env and the image stand-ins: nothing of the runner's, no KUBECONFIG.
    assert "KUBECONFIG" not in seen["env"] and "SHARED" in seen["env"]
    assert set(seen["env"]) <= {"SHARED", "HOME", "HOSTNAME", "TMPDIR", "PYTHONUNBUFFERED", *BASE_ENV_KEYS, "LC_CTYPE"}
    # Another interpreter than the runner's reads none of its site-packages: the image's code comes by path.
    if sidecar.argv[0] != runner.python:
        assert seen["pythonpath"].split(os.pathsep)[0] == IMAGE_CODE
    else:
        assert seen["pythonpath"] == os.environ.get("PYTHONPATH")
    if os.geteuid() == 0:
        assert sidecar.user == seen["uid"] == 65533 and 65532 in seen["groups"]
        assert (shared.stat().st_gid, shared.stat().st_mode & 0o7777) == (65532, 0o2770)
    else:  # not root: every container runs as the runner (documented in the runner)
        assert sidecar.user is None and seen["uid"] == os.getuid()
    assert wait(lambda: finished(kube, "split"))["status"]["succeeded"] == 1

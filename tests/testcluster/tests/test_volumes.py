"""``secret`` volumes as a kubelet mounts them: files from the Secret's data, ``items`` and
``defaultMode``, readable only by the container's user, per pod; a missing Secret keeps the
pod Pending with a ``FailedMount`` Event."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from test_runner import NS, create, finished, job, kube, pods, runner, served, wait  # noqa: F401
from testcluster.podrunner import PodRunner, volumes
from testcluster.podrunner.kube import Kube

CODE = ("import os, stat, sys; p = os.environ['KEY_FILE']; s = os.stat(p); "
        "print(open(p).read(), oct(stat.S_IMODE(s.st_mode)), s.st_uid == os.getuid(), "
        "sorted(os.listdir(os.path.dirname(p))), flush=True)")


def with_secret_volume(body: dict[str, Any], source: dict[str, Any], mount: str = "/var/run/secrets/x") -> dict:
    spec = body["spec"]["template"]["spec"]
    spec["volumes"].append({"name": "cred", "secret": source})
    spec["containers"][0]["volumeMounts"].append({"name": "cred", "mountPath": mount, "readOnly": True})
    return body


def test_items_and_default_mode_give_one_owner_only_file_at_the_mapped_path(
        kube: Kube, runner: PodRunner) -> None:  # noqa: F811
    body = with_secret_volume(job("mounted", CODE, env=[{"name": "KEY_FILE", "value": "/var/run/secrets/x/dsn"}]),
                              {"secretName": "creds", "items": [{"key": "token", "path": "dsn"}], "defaultMode": 0o400})
    create(kube, body)
    execution = runner.wait_execution("mounted")
    assert execution.exit_code == 0, execution.output()
    assert execution.output() == "s3cret 0o400 True ['dsn']\n"
    # The env names a path, never a value; the files go with the pod.
    assert "s3cret" not in str(execution.env_names)
    wait(lambda: finished(kube, "mounted"))
    assert not list(runner.scratch.glob(f"{NS}/{execution.pod}/secret-volumes/*"))


def test_without_items_every_key_is_a_file_with_the_default_mode(tmp_path: Path) -> None:
    secret = {"data": {k: base64.b64encode(v.encode()).decode() for k, v in {"a": "1", "b": "2"}.items()}}
    pod, container = pod_of({"name": "cred", "secret": {"secretName": "s"}})
    mounts = volumes.materialize(pod, container, lambda ns, name: secret, tmp_path / "v")
    directory = mounts["/etc/cred"]
    assert {p.name: (p.read_text(), stat.S_IMODE(p.stat().st_mode)) for p in directory.iterdir()} == {
        "a": ("1", 0o644), "b": ("2", 0o644)}
    assert stat.S_IMODE(directory.stat().st_mode) == 0o500
    volumes.remove(tmp_path / "v")
    assert not (tmp_path / "v").exists()


def test_an_item_mode_overrides_the_default_and_a_bad_path_is_refused(tmp_path: Path) -> None:
    secret = {"data": {"k": base64.b64encode(b"v").decode()}}
    pod, container = pod_of({"name": "cred", "secret": {"secretName": "s", "defaultMode": 0o400,
                                                        "items": [{"key": "k", "path": "sub/k", "mode": 0o440}]}})
    directory = volumes.materialize(pod, container, lambda ns, name: secret, tmp_path / "v")["/etc/cred"]
    assert stat.S_IMODE((directory / "sub" / "k").stat().st_mode) == 0o440
    pod, container = pod_of({"name": "cred", "secret": {"secretName": "s", "items": [{"key": "k", "path": "../k"}]}})
    with pytest.raises(volumes.VolumeMountError, match="must be relative"):
        volumes.materialize(pod, container, lambda ns, name: secret, tmp_path / "w")
    assert not (tmp_path / "w").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="another UID needs root to switch to")
def test_another_uid_cannot_read_the_files(tmp_path: Path) -> None:
    """The tools container runs as another UID: neither the directory nor the file opens for it."""
    secret = {"data": {"k": base64.b64encode(b"s3cret").decode()}}
    pod, container = pod_of({"name": "cred", "secret": {"secretName": "s", "defaultMode": 0o400,
                                                        "items": [{"key": "k", "path": "k"}]}})
    tmp_path.chmod(0o755)  # only the volume's own modes stand in the way
    directory = volumes.materialize(pod, container, lambda ns, name: secret, tmp_path / "v")["/etc/cred"]
    probe = subprocess.run(["cat", str(directory / "k")], user=65534, group=65534, extra_groups=[],
                           capture_output=True, text=True, timeout=30)
    assert probe.returncode != 0 and "Permission denied" in probe.stderr and "s3cret" not in probe.stdout


def test_a_missing_secret_keeps_the_pod_pending_with_a_failed_mount_event(
        kube: Kube, runner: PodRunner) -> None:  # noqa: F811
    create(kube, with_secret_volume(job("nomount", "print('never')"), {"secretName": "absent", "defaultMode": 0o400}))
    with pytest.raises(RuntimeError, match='FailedMount: MountVolume.SetUp failed for volume "cred" : '
                                           'secret "absent" not found'):
        runner.wait_execution("nomount", timeout=15)
    [pod] = pods(kube)
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    events = kube.request("GET", f"/api/v1/namespaces/{NS}/events")["items"]
    [event] = [e for e in events if e["involvedObject"]["name"] == pod["metadata"]["name"]]
    assert (event["type"], event["reason"], event["source"]["component"]) == ("Warning", "FailedMount", "kubelet")
    assert event["message"] == 'MountVolume.SetUp failed for volume "cred" : secret "absent" not found'
    assert runner.executions_of("nomount") == []


def test_a_missing_item_key_is_the_kubelets_error(tmp_path: Path) -> None:
    pod, container = pod_of({"name": "cred", "secret": {"secretName": "s", "items": [{"key": "nope", "path": "x"}]}})
    with pytest.raises(volumes.VolumeMountError) as raised:
        volumes.materialize(pod, container, lambda ns, name: {"data": {}}, tmp_path / "v")
    assert str(raised.value) == 'MountVolume.SetUp failed for volume "cred" : references non-existent secret key: nope'
    pod, container = pod_of({"name": "cred", "secret": {"secretName": "s", "optional": True}})
    assert volumes.materialize(pod, container, lambda ns, name: None, tmp_path / "o") == {
        "/etc/cred": tmp_path / "o" / "cred"}


def pod_of(volume: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    container = {"name": "worker", "volumeMounts": [{"name": volume["name"], "mountPath": "/etc/cred/"}]}
    return {"metadata": {"namespace": NS, "name": "p"}, "spec": {"volumes": [volume], "containers": [container]}}, \
        container

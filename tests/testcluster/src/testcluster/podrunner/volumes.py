"""``secret`` volumes as a kubelet materializes them, for one container of one pod.

Each mount of a ``secret`` volume becomes a per-pod host directory holding one file per key
of the Secret's ``data`` (or per ``items`` entry, at its ``path``), with ``items[].mode``, else
``defaultMode`` (default ``0644``), owned by the runner's user (the user the container's
process runs as), in a directory only that user may enter (``0500``): a process of another
UID (the tools container, when the runner is root) can read nothing there. ``readOnly``
mounts and Secret volumes are read-only on a node; here modes say it (root ignores them).

A missing Secret (not ``optional``), or an ``items`` key the Secret lacks, is a
``VolumeMountError`` with the kubelet's words: the pod then stays Pending, its container
waiting in ``ContainerCreating``, with a ``FailedMount`` Warning Event on the pod
(``MountVolume.SetUp failed for volume "v" : secret "s" not found``), as on a node.
"""

from __future__ import annotations

import base64
import datetime
import os
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from testcluster.podrunner.envresolve import Lookup

DEFAULT_MODE = 0o644
WAITING_REASON = "ContainerCreating"
EVENT_REASON = "FailedMount"


class VolumeMountError(RuntimeError):
    """A volume could not be set up: ``volume`` names it; the message is the kubelet's."""

    def __init__(self, volume: str, message: str) -> None:
        self.volume = volume
        super().__init__(f'MountVolume.SetUp failed for volume "{volume}" : {message}')


def _files(volume: dict[str, Any], secret: dict[str, Any] | None) -> dict[str, tuple[bytes, int]]:
    """Relative path -> (content, mode), as the kubelet projects the Secret."""
    source = volume["secret"]
    name = volume["name"]
    data = {k: base64.b64decode(v) for k, v in ((secret or {}).get("data") or {}).items()}
    mode = int(source.get("defaultMode", DEFAULT_MODE))
    items = source.get("items")
    if not items:
        return {key: (value, mode) for key, value in data.items()}
    files: dict[str, tuple[bytes, int]] = {}
    for item in items:
        if item["key"] not in data:
            if source.get("optional"):
                continue
            raise VolumeMountError(name, f"references non-existent secret key: {item['key']}")
        path = PurePosixPath(item["path"])
        if path.is_absolute() or ".." in path.parts:
            raise VolumeMountError(name, f"invalid path {item['path']!r}: must be relative without '..'")
        files[str(path)] = (data[item["key"]], int(item.get("mode", mode)))
    return files


def materialize(pod: dict[str, Any], container: dict[str, Any], secrets: Lookup,
                base: Path) -> dict[str, Path]:
    """mountPath -> host directory for every ``secret`` volume the container mounts; files
    are written under ``base/<volume>``. Raises ``VolumeMountError`` (nothing is left half
    written: ``base`` is removed)."""
    namespace = pod["metadata"]["namespace"]
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    mounts: dict[str, Path] = {}
    try:
        for mount in container.get("volumeMounts") or []:
            volume = volumes.get(mount["name"]) or {}
            if "secret" not in volume:
                continue
            source = volume["secret"]
            secret = secrets(namespace, source["secretName"])
            if secret is None and not source.get("optional"):
                raise VolumeMountError(volume["name"], f'secret "{source["secretName"]}" not found')
            directory = base / volume["name"]
            if not directory.exists():
                _write(directory, _files(volume, secret))
            sub = mount.get("subPath")
            mounts[mount["mountPath"].rstrip("/") or "/"] = directory / sub if sub else directory
    except BaseException:
        remove(base)
        raise
    return mounts


def _write(directory: Path, files: dict[str, tuple[bytes, int]]) -> None:
    directory.mkdir(parents=True, mode=0o700)
    for relative, (content, mode) in files.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Created with the final mode: the content is never readable by anyone else, not even briefly.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode & 0o777)
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.chmod(path, mode & 0o777)
    for sub in sorted((p for p in directory.rglob("*") if p.is_dir()), reverse=True):
        sub.chmod(0o500)
    directory.chmod(0o500)


def remove(base: Path) -> None:
    """Tear the pod's secret volumes down (the kubelet does when the pod ends)."""
    if base.exists():
        for path in [base, *base.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o700)
        shutil.rmtree(base, ignore_errors=True)


def waiting_status(container: dict[str, Any]) -> dict[str, Any]:
    """The container status of a pod whose volumes cannot be mounted (as a kubelet shows it)."""
    return {"name": container["name"], "image": container.get("image", ""), "imageID": "", "ready": False,
            "restartCount": 0, "started": False, "state": {"waiting": {"reason": WAITING_REASON}}}


def failed_mount_event(pod: dict[str, Any], error: VolumeMountError, node: str) -> dict[str, Any]:
    meta = pod["metadata"]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                               "namespace": meta["namespace"], "uid": meta.get("uid")},
            "type": "Warning", "reason": EVENT_REASON, "message": str(error),
            "source": {"component": "kubelet", "host": node}, "reportingComponent": "kubelet",
            "reportingInstance": node, "firstTimestamp": now, "lastTimestamp": now, "count": 1}

"""``pods/<name>/log``: the kubelet's part, read from the pod runner's log files.

The pod runner (our kubelet) writes each container's stdout and stderr to
``<dir>/<namespace>_<pod>.log``; a cluster given that directory serves them, so
``kubectl logs job/<run>-1`` and ``kubectl logs <pod>`` work as on a cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import errors


def log_path(directory: Path, namespace: str, pod: str) -> Path:
    return directory / f'{namespace}_{pod}.log'


def pod_log(directory: Path | None, pod: dict[str, Any], params: dict[str, str]) -> str:
    """The log text with ``tailLines`` and ``limitBytes`` applied; a container that never
    started has no log (400, as the API server says for a waiting container)."""
    meta = pod['metadata']
    containers = [c['name'] for c in (pod.get('spec') or {}).get('containers') or []]
    wanted = params.get('container')
    if wanted is not None and wanted not in containers:
        raise errors.bad_request(f'container {wanted} is not valid for pod {meta["name"]}')
    path = log_path(directory, meta['namespace'], meta['name']) if directory is not None else None
    if path is None or not path.exists():
        raise errors.bad_request(f'container "{wanted or (containers or ["?"])[0]}" in pod "{meta["name"]}" '
                                 'is waiting to start: ContainerCreating')
    text = path.read_text(errors='replace')
    if 'tailLines' in params:
        try:
            tail = int(params['tailLines'])
        except ValueError:
            raise errors.bad_request(f'tailLines: invalid value {params["tailLines"]!r}') from None
        text = ''.join(text.splitlines(keepends=True)[-tail:]) if tail > 0 else ''
    if 'limitBytes' in params:
        try:
            limit = int(params['limitBytes'])
        except ValueError:
            raise errors.bad_request(f'limitBytes: invalid value {params["limitBytes"]!r}') from None
        text = text.encode()[:limit].decode(errors='ignore')
    return text

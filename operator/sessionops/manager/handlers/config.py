"""The operator's ConfigMap, from the watch (no poll): each version is taken in as it arrives."""

from __future__ import annotations

from typing import Any

import kopf

from sessionops.manager.config_watch import ConfigWatcher


def _ours(namespace: str | None, name: str | None, memo: Any, **_: Any) -> bool:
    watcher: ConfigWatcher | None = getattr(memo, "config_watcher", None)
    return watcher is not None and watcher.ours(namespace, name)


@kopf.on.event("", "v1", "configmaps", when=_ours)
async def config_changed(body: kopf.Body, type: str | None, memo: Any, **_: Any) -> None:
    watcher: ConfigWatcher = memo.config_watcher
    await watcher.apply(None if type == "DELETED" else dict(body))

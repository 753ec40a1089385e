"""Keeps the ConfigStore in step with the ConfigMap, as the watch delivers it (a kopf event
handler, ``sessionops.manager.handlers.config``); invalid versions are reported once."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from sessionops.manager.runtime import Runtime
from sessionops.platform.configuration import ConfigError

logger = logging.getLogger(__name__)


class ConfigWatcher:
    def __init__(self, rt: Runtime, on_change: Callable[[], Awaitable[None]] | None = None) -> None:
        self.rt = rt
        self.seen_version: str | None = None
        self.on_change = on_change
        """Called after a valid configuration replaced an earlier one (not on the first load:
        kopf's initial listing reconciles every object anyway)."""

    def ours(self, namespace: str | None, name: str | None) -> bool:
        return (namespace, name) == (self.rt.settings.namespace, self.rt.settings.configmap)

    async def refresh(self) -> None:
        """Read the ConfigMap once, at start-up: admission needs a configuration before the
        watch's first event. Later versions arrive through ``apply``."""
        s = self.rt.settings
        await self.apply(await self.rt.kube.get_configmap(s.namespace, s.configmap), announce=False)

    async def apply(self, cm: dict[str, Any] | None, *, announce: bool = True) -> None:
        """Take in this version of the ConfigMap (None: it is gone). Safe to repeat: an
        unchanged resourceVersion is skipped. ``announce``: post an Event when the configuration
        in force changes (not at start-up: a restart is not a change)."""
        s = self.rt.settings
        if cm is None:
            if self.seen_version != "absent":
                logger.error("ConfigMap %s/%s not found; %s", s.namespace, s.configmap,
                             "keeping the last valid configuration" if self.rt.config.loaded else
                             "admission refuses sessions and inputs until it exists")
            self.seen_version = "absent"
            return
        version = cm["metadata"].get("resourceVersion")
        if version == self.seen_version:
            return
        self.seen_version = version
        replacing = self.rt.config.loaded
        previous = self.rt.config.current.version if replacing else None
        try:
            config = self.rt.config.update(cm.get("data"))
        except ConfigError as e:
            message = f"invalid configuration, keeping the last valid one: {e}"
            logger.error("ConfigMap %s/%s: %s", s.namespace, s.configmap, message)
            await self.rt.kube.post_event(cm, type_="Warning", reason="InvalidConfig", message=message)
            return
        logger.info("configuration %s loaded (%d models, default %s)", config.version, len(config.models),
                    config.defaults.model)
        if config.version == previous:
            return  # an edit that changed nothing in force (or the start-up read seen again)
        if announce:
            await self.rt.kube.post_event(cm, type_="Normal", reason="ConfigLoaded",
                                          message=f"configuration {config.version} in force")
        if replacing and self.on_change is not None:
            await self.on_change()

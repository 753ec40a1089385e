"""Keeps the ConfigStore in step with the ConfigMap; invalid versions are reported once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from sessionops.configuration import ConfigError
from sessionops.runtime import Runtime

logger = logging.getLogger(__name__)


class ConfigWatcher:
    def __init__(self, rt: Runtime, on_change: Callable[[], Awaitable[None]] | None = None) -> None:
        self.rt = rt
        self.seen_version: str | None = None
        self.on_change = on_change
        """Called after a valid configuration replaced an earlier one (not on the first load:
        kopf's initial listing reconciles every object anyway)."""

    async def refresh(self) -> None:
        """Read the ConfigMap once. Safe to repeat: an unchanged resourceVersion is skipped."""
        s = self.rt.settings
        cm = await self.rt.kube.get_configmap(s.namespace, s.configmap)
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
        try:
            config = self.rt.config.update(cm.get("data"))
        except ConfigError as e:
            message = f"invalid configuration, keeping the last valid one: {e}"
            logger.error("ConfigMap %s/%s: %s", s.namespace, s.configmap, message)
            await self.rt.kube.post_event(cm, type_="Warning", reason="InvalidConfig", message=message)
            return
        logger.info("configuration %s loaded (%d models, default %s)", config.version, len(config.models),
                    config.defaults.model)
        await self.rt.kube.post_event(cm, type_="Normal", reason="ConfigLoaded",
                                      message=f"configuration {config.version} in force")
        if replacing and self.on_change is not None:
            await self.on_change()

    async def run(self) -> None:
        while True:
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception:  # an API hiccup must not kill the watcher; the next poll retries
                logger.exception("reading the configuration failed; retrying")
            await asyncio.sleep(self.rt.settings.config_poll_seconds)

"""The operator process: ``python -m sessionops.manager``.

kopf runs every handler in ``sessionops.handlers``; this module only wires settings,
the webhook server, storages and shared state.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from sessionops.certificates import WebhookServer
from sessionops.config_watch import ConfigWatcher
from sessionops.configuration import ConfigStore
from sessionops.kube import Kube, load_api_client
from sessionops.runtime import Runtime
from sessionops.settings import Settings

logger = logging.getLogger(__name__)


def configure_kopf(kopf_settings: kopf.OperatorSettings, settings: Settings) -> None:
    # Bookkeeping and status in one atomic status patch: 2 API writes per handled object
    # instead of 3 (ARCHITECTURE 7.2). The CRDs declare status.kopf so it is not pruned.
    kopf_settings.persistence.progress_storage = kopf.StatusProgressStorage(field="status.kopf.progress")
    kopf_settings.persistence.diffbase_storage = kopf.StatusDiffBaseStorage(field="status.kopf.diffbase")
    kopf_settings.persistence.finalizer = "sessionops.dev/finalizer"
    kopf_settings.posting.level = logging.WARNING
    kopf_settings.watching.server_timeout = 300
    kopf_settings.admission.server = WebhookServer(
        addr=settings.webhook_addr, port=settings.webhook_port, host=settings.webhook_host,
        certfile=settings.cert_file, pkeyfile=settings.key_file)
    # The chart (or the test cluster fixture) owns the webhook configurations.
    kopf_settings.admission.managed = None


async def build_runtime(settings: Settings) -> Runtime:
    rt = Runtime(settings=settings, kube=Kube(load_api_client()), config=ConfigStore())
    await ConfigWatcher(rt).refresh()
    return rt


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    ours = Settings.from_env()
    configure_kopf(settings, ours)
    memo.runtime = await build_runtime(ours)
    memo.config_task = asyncio.create_task(ConfigWatcher(memo.runtime).run(), name="config-watch")


@kopf.on.cleanup()
async def cleanup(memo: Any, **_: Any) -> None:
    task = getattr(memo, "config_task", None)
    if task is not None:
        task.cancel()
    rt: Runtime | None = getattr(memo, "runtime", None)
    if rt is not None:
        rt.kube.close()


def main() -> None:
    import sessionops.handlers.admission  # noqa: F401  (registers the webhooks)

    settings = Settings.from_env()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    kopf.run(clusterwide=True, standalone=settings.peering is None, peering_name=settings.peering or None)


if __name__ == "__main__":
    main()

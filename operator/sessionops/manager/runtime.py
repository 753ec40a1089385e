"""What every handler shares: settings, the Kubernetes adapter and the config store."""

from __future__ import annotations

import dataclasses

from sessionops.admission.worker_pods import WorkerPods
from sessionops.execution.credentials import NamespaceCredentials
from sessionops.platform.cache import Cache
from sessionops.platform.configuration import ConfigStore
from sessionops.platform.kube import Kube
from sessionops.platform.settings import Settings


@dataclasses.dataclass
class Runtime:
    settings: Settings
    kube: Kube
    config: ConfigStore
    worker_pods: WorkerPods = dataclasses.field(default_factory=WorkerPods)
    cache: Cache = dataclasses.field(default_factory=Cache)
    credentials: NamespaceCredentials = dataclasses.field(default=None)  # type: ignore[assignment]
    """Per-namespace database credentials (from the admin DSN of ``settings`` when not given)."""

    def __post_init__(self) -> None:
        if self.credentials is None:
            self.credentials = NamespaceCredentials(self.settings.database_url)

    def checkpoint_dsn(self, namespace: str) -> str:
        """The admin DSN on the namespace's checkpoint schema (cleanup, session deletion)."""
        return self.credentials.admin_dsn_for(namespace)

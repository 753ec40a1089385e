"""What every handler shares: settings, the Kubernetes adapter and the config store."""

from __future__ import annotations

import dataclasses

from sessionops.cache import Cache
from sessionops.configuration import ConfigStore
from sessionops.kube import Kube
from sessionops.settings import Settings


@dataclasses.dataclass
class Runtime:
    settings: Settings
    kube: Kube
    config: ConfigStore
    cache: Cache = dataclasses.field(default_factory=Cache)

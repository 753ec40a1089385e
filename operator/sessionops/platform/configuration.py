"""Loading the operator configuration (ConfigMap ``sessionops-config``, key ``config.yaml``).

An invalid configuration never replaces a valid one: the caller reports the error
(an Event and a log line naming the bad key) and the last valid config stays in force.
"""

from __future__ import annotations

import dataclasses
import threading

import yaml
from pydantic import ValidationError

from sessionops.api.config import OperatorConfig

CONFIG_KEY = "config.yaml"


class ConfigError(ValueError):
    """The configuration text is invalid; ``str()`` names each bad key."""


def parse_config(data: dict[str, str] | None) -> OperatorConfig:
    """ConfigMap ``data`` -> a validated config, or ConfigError naming the bad keys."""
    text = (data or {}).get(CONFIG_KEY)
    if text is None:
        raise ConfigError(f"data.{CONFIG_KEY}: missing")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"data.{CONFIG_KEY}: not valid YAML: {e}") from e
    if not isinstance(raw, dict):
        raise ConfigError(f"data.{CONFIG_KEY}: must be a mapping")
    try:
        return OperatorConfig.model_validate(raw)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            path = ".".join(str(p) for p in err["loc"]) or "(root)"
            problems.append(f"{path}: {err['msg']}")
        raise ConfigError("; ".join(problems)) from e


@dataclasses.dataclass
class ConfigStore:
    """The config in force. Thread-safe: webhooks read it while the watcher replaces it."""

    _current: OperatorConfig | None = None
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @property
    def current(self) -> OperatorConfig:
        with self._lock:
            if self._current is None:
                raise ConfigError("no valid operator configuration has been loaded yet")
            return self._current

    @property
    def loaded(self) -> bool:
        with self._lock:
            return self._current is not None

    def update(self, data: dict[str, str] | None) -> OperatorConfig:
        """Parse and install; on error raise ConfigError and keep the previous config."""
        config = parse_config(data)
        with self._lock:
            self._current = config
        return config

"""The operator configuration: invalid text never replaces a valid config."""

from __future__ import annotations

import pytest
import yaml

from sessionops.platform.configuration import ConfigError, ConfigStore, parse_config

GOOD = {"defaults": {"model": "replay/hello"},
        "models": [{"name": "replay/hello", "provider": "replay", "model": "hello"}]}


def data(obj) -> dict[str, str]:
    return {"config.yaml": yaml.safe_dump(obj)}


@pytest.mark.parametrize(("raw", "words"), [
    ({}, "data.config.yaml: missing"),
    ({"config.yaml": "a: [b"}, "not valid YAML"),
    ({"config.yaml": "- 1"}, "must be a mapping"),
    (data({**GOOD, "defaults": {"model": "nope"}}), "defaults.model"),
    (data({**GOOD, "models": [{"name": "x", "provider": "azure", "model": "m"}]}), "models.0.provider"),
    (data({**GOOD, "defaults": {"model": "replay/hello", "maxExecutionSteps": 0}}), "defaults.maxExecutionSteps"),
], ids=["no key", "bad yaml", "not a mapping", "default model not in catalog", "unknown provider",
        "non-positive step limit"])
def test_invalid_config_names_the_bad_key(raw: dict, words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace(".", r"\.")):
        parse_config(raw)


def test_store_keeps_the_last_valid_config() -> None:
    store = ConfigStore()
    assert not store.loaded
    with pytest.raises(ConfigError):
        _ = store.current
    first = store.update(data(GOOD))
    with pytest.raises(ConfigError):
        store.update(data({"defaults": {"model": "x"}, "models": []}))
    assert store.current is first

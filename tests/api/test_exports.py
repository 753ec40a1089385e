"""The package's names (``from sessionops.api import AgentRun``) resolve on first use to their home module."""

from __future__ import annotations

import importlib

import pytest

import sessionops.api as api


def test_every_name_resolves_to_its_home_module() -> None:
    assert sorted(api.__all__) == sorted(api._HOMES)
    for name in api.__all__:
        value = getattr(api, name)
        assert value.__name__ == name
        assert value is getattr(importlib.import_module(value.__module__), name)
    from sessionops.api import AgentRun
    from sessionops.api.run import AgentRun as home
    assert AgentRun is home


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        api.Nothing  # noqa: B018

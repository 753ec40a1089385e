"""Fixtures of the chart tests: see helm.py for how the chart is rendered."""

from __future__ import annotations

import pytest

from tests.chart.helm import HELMS, VALUE_SETS, Rendered, Renderer, helm_path


@pytest.fixture(scope="session")
def renderer(tmp_path_factory: pytest.TempPathFactory) -> Renderer:
    return Renderer(tmp_path_factory.mktemp("helm"))


@pytest.fixture(params=sorted(HELMS))
def helm(request: pytest.FixtureRequest) -> str:
    helm_path(request.param)
    return request.param


@pytest.fixture(params=sorted(VALUE_SETS))
def values_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def rendered(renderer: Renderer, values_name: str) -> Rendered:
    """The chart rendered by Helm 4 with one value set (Helm 3 renders the same: test_render)."""
    return renderer.template("helm4", values_name)


@pytest.fixture
def default(renderer: Renderer) -> Rendered:
    return renderer.template("helm4", "default")

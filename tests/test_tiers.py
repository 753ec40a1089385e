"""The test tiers (tests/conftest.py): every test has exactly one, and the unit tier is held to purity."""

from __future__ import annotations

import socket
import subprocess

import pytest

from tests.conftest import tier

TIERS = ("unit", "integration", "e2e")


def test_every_collected_test_has_exactly_one_tier(request: pytest.FixtureRequest) -> None:
    for item in request.session.items:
        marked = [name for name in TIERS if item.get_closest_marker(name)]
        assert marked == [tier(item)], f"{item.nodeid}: {marked}"


def test_a_unit_test_can_neither_connect_nor_start_a_process(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("unit") is not None
    with pytest.raises(AssertionError, match="a unit test made a connection or started a process"):
        socket.create_connection(("127.0.0.1", 9), timeout=1)
    with pytest.raises(AssertionError, match="a unit test made a connection or started a process"):
        subprocess.run(["true"], check=True)


@pytest.mark.integration
def test_an_integration_test_may_start_a_process() -> None:
    assert subprocess.run(["true"], check=True).returncode == 0

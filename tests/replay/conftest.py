"""Replay servers over real HTTP, loaded with the shipped examples."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from sessionops.replay import ReplayServer, running_replay_server

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "replay"


@pytest.fixture
async def replay() -> AsyncIterator[ReplayServer]:
    """A server on the test's own event loop, for async clients."""
    async with ReplayServer(dirs=[EXAMPLES]) as server:
        yield server


@pytest.fixture(scope="module")
def threaded_replay() -> Iterator[ReplayServer]:
    """A server on its own thread, for synchronous clients (they would block the test's loop)."""
    with running_replay_server(dirs=[EXAMPLES]) as server:
        yield server

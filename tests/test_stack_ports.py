"""The stack's reserved ports (``tests.stack.reserve_port``): nobody else gets them, the operator still binds them."""

from __future__ import annotations

import asyncio
import socket

import pytest
from aiohttp import web

from tests.stack import reserve_port

pytestmark = pytest.mark.integration


def test_a_reserved_port_is_never_handed_out_as_free() -> None:
    held = reserve_port()
    try:
        port = held.getsockname()[1]
        probed = set()
        for _ in range(3000):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                probed.add(s.getsockname()[1])
        assert port not in probed
        with socket.socket() as s, pytest.raises(OSError):
            s.bind(("127.0.0.1", port))  # a plain bind (another process's probe at that port) fails
    finally:
        held.close()


async def test_the_operator_s_listeners_bind_a_reserved_port_and_rebind_it_after_a_restart() -> None:
    # As kopf's webhook server (reuse_port and reuse_address) and our metrics server (any interface) bind.
    webhook, metrics = reserve_port(), reserve_port()
    try:
        for _ in range(2):  # the second round is a restarted operator
            runner = web.AppRunner(web.Application())
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", webhook.getsockname()[1], reuse_port=True,
                              reuse_address=True).start()
            await web.TCPSite(runner, "0.0.0.0", metrics.getsockname()[1]).start()
            for held in (webhook, metrics):
                _, writer = await asyncio.open_connection("127.0.0.1", held.getsockname()[1])
                writer.close()
            await runner.cleanup()
    finally:
        webhook.close()
        metrics.close()

"""The test cluster on its own thread and event loop, for synchronous code.

The shared ``cluster`` fixture serves from the test's own event loop, so anything that
blocks (the official Kubernetes client, the pod runner's threads waiting on the test)
would stall the server it talks to. Here the same ``FaithfulCluster`` runs on a thread
of its own; its attributes (``cluster.access_reviews``, ``cluster.add_user()``) are used from the test as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from testcluster import FaithfulCluster, running_cluster


@contextlib.contextmanager
def threaded_cluster(kubeconfig: Path, **kwargs: Any) -> Iterator[FaithfulCluster]:
    """A started cluster whose kubeconfig is written to ``kubeconfig``; stopped on exit."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stop: asyncio.Event | None = None
    holder: list[FaithfulCluster] = []
    failure: list[BaseException] = []

    async def serve() -> None:
        nonlocal stop
        stop = asyncio.Event()
        async with running_cluster(kubeconfig=kubeconfig, **kwargs) as cluster:
            holder.append(cluster)
            started.set()
            await stop.wait()

    def run() -> None:
        try:
            loop.run_until_complete(serve())
        except BaseException as e:  # handed to the caller's thread below
            failure.append(e)
        finally:
            started.set()
            loop.close()

    thread = threading.Thread(target=run, name="test-cluster", daemon=True)
    thread.start()
    started.wait()
    if failure:
        raise failure[0]
    try:
        yield holder[0]
    finally:
        if stop is not None:
            loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        if failure:
            raise failure[0]

"""Shared fixtures: a running test API server (``cluster``) and the real kubectl binary (``kubectl``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from tests.cluster import FaithfulCluster, running_cluster
from tests.cluster.client import ApiClient
from tests.stack import Completed, run_cli

TOOLS = Path(__file__).resolve().parents[1] / '.tools' / 'bin'


# One implementation of "run a CLI without blocking the loop the test API server serves from".
run_tool = run_cli


@pytest.fixture()
async def cluster(tmp_path: Path) -> AsyncIterator[FaithfulCluster]:
    """A started FaithfulCluster; ``cluster.kubeconfig`` is its kubeconfig. Server-side errors fail the test."""
    async with running_cluster(kubeconfig=tmp_path / 'kubeconfig', bookmark_interval=0.2, strict=True) as c:
        yield c


@pytest.fixture()
def kubectl(cluster: FaithfulCluster, tmp_path: Path) -> Callable[..., Awaitable[Completed]]:
    """``await kubectl('get', 'pods', input=None, check=True)`` with the real binary against ``cluster``."""
    async def run(*args: str, input: str | None = None, check: bool = True) -> Completed:
        return await run_tool(TOOLS / 'kubectl', '--kubeconfig', str(cluster.kubeconfig),
                              '--cache-dir', str(tmp_path / 'kube-cache'), *args, input=input, check=check)
    return run


@pytest.fixture()
async def api(cluster: FaithfulCluster) -> AsyncIterator[ApiClient]:
    """A plain HTTP JSON client (aiohttp) for ``cluster``."""
    async with ApiClient(cluster.api_url) as client:
        yield client

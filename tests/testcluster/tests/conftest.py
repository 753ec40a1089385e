"""Fixtures of the package's own tests: a started test cluster (``cluster``), a JSON client for it
(``api``) and the real kubectl against it (``kubectl``). In the product's full run these take
precedence over the product's fixtures of the same names, for the tests in this directory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from binaries import Completed, binary, run
from testcluster import FaithfulCluster, running_cluster
from testcluster.client import ApiClient


@pytest.fixture()
async def cluster(tmp_path: Path) -> AsyncIterator[FaithfulCluster]:
    """A started FaithfulCluster; ``cluster.kubeconfig`` is its kubeconfig. Server-side errors fail the test."""
    async with running_cluster(kubeconfig=tmp_path / 'kubeconfig', bookmark_interval=0.2, strict=True) as c:
        yield c


@pytest.fixture()
def kubectl(cluster: FaithfulCluster, tmp_path: Path) -> Callable[..., Awaitable[Completed]]:
    """``await kubectl('get', 'pods', input=None, check=True)`` with the real binary against ``cluster``."""
    async def kubectl(*args: str, input: str | None = None, check: bool = True) -> Completed:
        return await run(binary('kubectl'), '--kubeconfig', str(cluster.kubeconfig),
                         '--cache-dir', str(tmp_path / 'kube-cache'), *args, input=input, check=check)
    return kubectl


@pytest.fixture()
async def api(cluster: FaithfulCluster) -> AsyncIterator[ApiClient]:
    """A plain JSON client (aiohttp) for ``cluster``, as the administrator."""
    async with ApiClient(cluster.api_url, headers=cluster.admin_headers, ssl=cluster.client_ssl()) as client:
        yield client

"""Shared fixtures: a running test API server (``cluster``) and the real kubectl binary (``kubectl``)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from tests.cluster import FaithfulCluster, running_cluster
from tests.cluster.client import ApiClient

TOOLS = Path(__file__).resolve().parents[1] / '.tools' / 'bin'


@dataclasses.dataclass
class Completed:
    returncode: int
    stdout: str
    stderr: str


async def run_tool(binary: Path, *args: str, input: str | None = None, check: bool = True,
                   env: dict[str, str] | None = None, timeout: float = 60) -> Completed:
    """Run a CLI without blocking the event loop (the API server runs in this very loop)."""
    proc = await asyncio.create_subprocess_exec(
        str(binary), *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, **(env or {})})
    out, err = await asyncio.wait_for(proc.communicate(input.encode() if input is not None else None), timeout)
    result = Completed(proc.returncode or 0, out.decode(), err.decode())
    if check and result.returncode != 0:
        raise AssertionError(f'{binary.name} {" ".join(args)} failed ({result.returncode}):\n'
                             f'{result.stdout}\n{result.stderr}')
    return result


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

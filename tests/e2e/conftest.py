"""End-to-end scenarios through kubectl, against the local stack or a real cluster.

Locally (default) each module gets its own stack (tests/stack.py). With
``SESSIONOPS_E2E_KUBECONFIG`` set, the same tests run against that cluster (kind in
GitHub Actions), in ``SESSIONOPS_E2E_NAMESPACE``, with the operator installed by Helm.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from tests.stack import OPERATOR_NS, Stack, running_stack

REAL = os.environ.get("SESSIONOPS_E2E_KUBECONFIG")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    root = tmp_path_factory.mktemp("stack")
    if REAL:
        yield Stack(root=Path(root), kubeconfig=Path(REAL), database_url="", replay_url="",
                    namespace=os.environ.get("SESSIONOPS_E2E_NAMESPACE", "sessionops-e2e"),
                    webhook_port=0, metrics_port=0)
        return
    async with running_stack(Path(root), checkpoint_retention=1) as (s, _cluster):
        yield s


@pytest.fixture()
def kill_worker(stack: Stack) -> Callable[[str], Awaitable[None]]:
    """Kills the running worker of a Job at once, without a grace period: on a real cluster
    ``kubectl delete pod --grace-period=0 --force``, locally the pod runner's SIGKILL (the
    kubelet's part). The worker gets no chance to release its Lease or write anything."""
    async def kill(job: str) -> None:
        if REAL:
            await stack.kubectl("delete", "pod", "-l", f"job-name={job}", "--grace-period=0", "--force")
        else:
            await asyncio.to_thread(stack.pod_runner.kill, job, signal.SIGKILL)
    return kill


@pytest.fixture()
def name() -> str:
    """A unique, short object name per test (sessions are at most 40 characters)."""
    return f"t{uuid.uuid4().hex[:8]}"


__all__ = ["OPERATOR_NS", "REAL"]

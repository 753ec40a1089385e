"""Shared fixtures: a running test API server (``cluster``) and the real kubectl binary (``kubectl``).

The run's PostgreSQL is ``DATABASE_URL`` when set (checked once, before any test), else an
embedded server started here for the whole run; pytest-xdist workers inherit its URL.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from testcluster import FaithfulCluster, running_cluster
from testcluster.client import ApiClient
from tests import pgserver
from tests.stack import GO_BINARY, ROOT, Completed, run_cli

TOOLS = ROOT / '.tools' / 'bin'
# The test cluster decodes protobuf requests with this checkout's kubectl, whatever PATH says.
os.environ.setdefault(*GO_BINARY)


# One implementation of "run a CLI without blocking the loop the test API server serves from".
run_tool = run_cli

DATABASE = pytest.StashKey[contextlib.ExitStack]()


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the controller chose the server
        return
    database = contextlib.ExitStack()
    try:
        database.enter_context(pgserver.database_url())
    except pgserver.EmbeddedPostgresError as err:
        pytest.exit(str(err), returncode=pytest.ExitCode.USAGE_ERROR)
    config.stash[DATABASE] = database


# Tiers (``-m unit`` is ``make test-fast``): e2e scenarios drive the whole product; integration
# tests use a server, a database, a subprocess or a binary; unit tests are pure and are held to it.
E2E = ("tests/e2e/", "tests/test_localstack.py", "tests/test_localstack_model.py")
INTEGRATION = (
    "tests/integration/", "tests/testcluster/tests/test_runner.py", "tests/testcluster/tests/test_volumes.py",
    "tests/testcluster/tests/test_envresolve.py", "tests/test_pgserver.py", "tests/worker/test_lease.py",
    "tests/worker/test_mcp.py", "tests/replay/test_branches.py", "tests/replay/test_server.py",
    "tests/replay/test_cli.py", "tests/replay/test_turns.py", "tests/chart/test_dockerfile.py",
)
INTEGRATION_FIXTURES = frozenset({
    "cluster", "kubectl", "api", "stack", "local", "replay", "threaded_replay", "pg_template", "pg_dsn", "saver",
    "helm", "renderer", "rendered", "default",
})


def tier(item: pytest.Item) -> str:
    path = Path(str(item.path)).resolve().relative_to(ROOT).as_posix()
    if path.startswith(E2E) or item.get_closest_marker("e2e"):
        return "e2e"
    if (path.startswith(INTEGRATION) or item.get_closest_marker("integration")
            or INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ()))):
        return "integration"
    return "unit"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not item.get_closest_marker(name := tier(item)):
            item.add_marker(name)


@pytest.fixture(autouse=True)
def _unit_tests_do_no_io(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test in the unit tier that opens a connection or starts a process fails, naming the tier rule."""
    if request.node.get_closest_marker("unit") is None:
        return

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a unit test made a connection or started a process: use an integration "
                             "fixture or list its module in INTEGRATION (tests/conftest.py)")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)


def pytest_unconfigure(config: pytest.Config) -> None:
    if (database := config.stash.get(DATABASE, None)) is not None:
        database.close()


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
    """A plain JSON client (aiohttp) for ``cluster``, as the administrator."""
    async with ApiClient(cluster.api_url, headers=cluster.admin_headers, ssl=cluster.client_ssl()) as client:
        yield client

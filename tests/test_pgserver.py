"""The embedded PostgreSQL (``tests.pgserver``): as root and as a normal user, contained, stopped cleanly."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests import pgserver
from tests.stack import ROOT

IS_ROOT = os.geteuid() == 0
SYSTEM_PYTHON = Path("/usr/bin/python3")


def modes(paths: list[Path]) -> dict[str, tuple[int, int, int]]:
    """Mode and owner of each path and of every directory above it."""
    seen: dict[str, tuple[int, int, int]] = {}
    for path in paths:
        for p in [path, *path.parents]:
            st = p.stat()
            seen[str(p)] = (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
    return seen


def server_uid(pid: int) -> int:
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Uid:"))
    return int(line.split()[1])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def base() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="sessionops-pgtest-"))
    try:
        yield path
    finally:
        pgserver.stop(path)
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(not IS_ROOT, reason="the root path: the suite runs as a normal user here")
def test_as_root_the_server_runs_as_nobody_and_changes_no_permission_outside_its_directory(base: Path) -> None:
    wheel_bin = pgserver.bin_dir()
    before = modes([base, wheel_bin / "postgres", Path(tempfile.gettempdir())])
    passwd = Path("/etc/passwd").read_text()

    server = pgserver.start(base)
    pid = server.postmaster_pid()
    assert pid is not None and server_uid(pid) == pwd.getpwnam("nobody").pw_uid
    assert server.private and server.runtime.parent == Path(tempfile.gettempdir())
    assert stat.S_IMODE(server.runtime.stat().st_mode) == 0o700
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("CREATE DATABASE contained")
    assert pgserver.start(base).port == server.port, "a running server is reused, not started twice"

    assert pgserver.stop(base)
    assert not alive(pid) and not server.runtime.exists() and not (base / pgserver.STATE).exists()
    assert modes([base, wheel_bin / "postgres", Path(tempfile.gettempdir())]) == before
    assert Path("/etc/passwd").read_text() == passwd, "no system user was added"


def test_as_a_normal_user_the_server_runs_in_place_and_keeps_its_data_for_the_next_start(tmp_path: Path) -> None:
    """Run as ``nobody`` with the system Python when the suite is root; as the current user otherwise."""
    if IS_ROOT and not SYSTEM_PYTHON.exists():
        pytest.skip("no system Python to run the module as an unprivileged user")
    user = pwd.getpwnam("nobody") if IS_ROOT else pwd.getpwuid(os.getuid())
    home = Path(tempfile.mkdtemp(prefix="sessionops-pguser-"))
    try:
        # What a normal user's checkout has: the module and the wheel's layout, all theirs.
        package = pgserver.bin_dir().parents[1]
        shutil.copytree(package / "pginstall", home / "site" / package.name / "pginstall",
                        copy_function=pgserver._link_or_copy)
        libs = package.parent / f"{package.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, home / "site" / libs.name, copy_function=pgserver._link_or_copy)
        shutil.copy(ROOT / "tests" / "pgserver.py", home / "pgserver.py")
        (home / "base").mkdir()
        for path in (home, home / "base"):
            os.chown(path, user.pw_uid, user.pw_gid)
        before = modes([home / "base"])

        def as_user(*args: str) -> str:
            python = str(SYSTEM_PYTHON) if IS_ROOT else sys.executable
            ids = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []} if IS_ROOT else {}
            done = subprocess.run(
                [python, str(home / "pgserver.py"), *args], cwd=home, capture_output=True, text=True, timeout=120,
                env={"PATH": "/usr/bin:/bin", "SESSIONOPS_PG_BIN": str(home / "site" / package.name / "pginstall" / "bin")},
                **ids)
            assert done.returncode == 0, done.stdout + done.stderr
            return done.stdout.strip()

        dsn = as_user("start", str(home / "base"))
        server = pgserver.Server.load(home / "base")
        assert server is not None and not server.private and server.runtime == home / "base"
        pid = server.postmaster_pid()
        assert pid is not None and server_uid(pid) == user.pw_uid
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE DATABASE kept")
        assert as_user("start", str(home / "base")) == dsn, "a running server is reused"

        as_user("stop", str(home / "base"))
        assert not alive(pid) and (home / "base" / "data" / "PG_VERSION").exists()
        dsn = as_user("start", str(home / "base"))
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT 1 FROM pg_database WHERE datname = 'kept'").fetchone() == (1,)
        as_user("stop", str(home / "base"))
        assert modes([home / "base"]) == before
    finally:
        pgserver.stop(home / "base")
        shutil.rmtree(home, ignore_errors=True)


def test_an_unreachable_database_url_stops_the_local_stack_with_one_line_before_anything_starts(
        tmp_path: Path) -> None:
    dsn = f"postgresql://postgres@127.0.0.1:{closed_port()}/postgres"
    done = subprocess.run([sys.executable, "-m", "tests.localstack", "up"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60,
                          env={**os.environ, "DATABASE_URL": dsn, "SESSIONOPS_DEV_DIR": str(tmp_path / "dev")})
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"cannot reach PostgreSQL at DATABASE_URL={dsn}"), done.stderr
    assert "unset DATABASE_URL to use the embedded server" in lines[0]
    assert done.stdout == ""
    assert not (tmp_path / "dev" / "pids").exists() and not list((tmp_path / "dev").glob("*.log"))


def test_an_unreachable_database_url_stops_the_suite_before_any_test(tmp_path: Path) -> None:
    dsn = f"postgresql://postgres@127.0.0.1:{closed_port()}/postgres"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                           "tests/api/test_models.py"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DATABASE_URL": dsn})
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert f"cannot reach PostgreSQL at DATABASE_URL={dsn}" in done.stdout + done.stderr

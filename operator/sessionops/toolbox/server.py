"""``python -m sessionops.toolbox``: the tools process, serving ``protocol`` on a Unix socket.

Environment (the tools container's own, written by ``execution.jobs``): ``SESSIONOPS_WORKDIR``
(the shared work directory), ``SESSIONOPS_TOOLS_SOCKET`` (default ``protocol.SOCKET_PATH``),
``SESSIONOPS_TOOLS_MAX_TIMEOUT_SECONDS`` (run_shell's upper bound, enforced here: a command
that runs longer has its whole process group killed). Runs until SIGTERM (the kubelet stops
a native sidecar once the worker has exited), then exits 0.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socketserver
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from sessionops.toolbox import protocol
from sessionops.toolbox.ops import MAX_SHELL_TIMEOUT, Operations, ToolError

logger = logging.getLogger("sessionops.toolbox")

READ_TIMEOUT = 30.0
"""Seconds a client has to send its request once connected."""


class _Handler(socketserver.StreamRequestHandler):
    server: ToolsServer

    def setup(self) -> None:
        self.request.settimeout(READ_TIMEOUT)
        super().setup()

    def handle(self) -> None:
        started = time.monotonic()
        op = "?"
        try:
            line = self.rfile.readline(protocol.MAX_REQUEST_BYTES + 1)
            op, args = protocol.parse_request(protocol.decode(line, protocol.MAX_REQUEST_BYTES))
        except (protocol.ProtocolError, OSError) as e:
            response: dict[str, Any] = {"ok": False, "error": str(e), "fault": True}
        else:
            # The request's socket has no timeout while the operation runs: run_shell
            # enforces its own, and the client waits for it.
            self.request.settimeout(None)
            response = self.server.execute(op, args)
        # OSError: the client gave up (its own timeout), nothing to answer to.
        with contextlib.suppress(OSError):
            self.wfile.write(protocol.encode(response))
        # Operation names and outcomes only: arguments and results are the model's.
        logger.info("%s %s in %.1f ms", op, "ok" if response["ok"] else
                    ("fault" if response.get("fault") else "error"), (time.monotonic() - started) * 1000)


class ToolsServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """Concurrent requests (the graph runs parallel tool calls in threads), one thread each."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(self, path: Path, ops: Operations) -> None:
        self.ops = ops
        self.path = path
        # Bound and listening under a temporary name, then renamed: a client that sees the
        # socket can connect to it.
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.unlink(missing_ok=True)
        super().__init__(str(temporary), _Handler)
        # The worker runs as another UID sharing the volume's group (the pod's fsGroup).
        os.chmod(temporary, 0o660)
        os.replace(temporary, path)

    def execute(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        try:
            return {"ok": True, "result": self.ops.call(op, args)}
        except ToolError as e:
            return {"ok": False, "error": str(e)}
        except protocol.ProtocolError as e:
            return {"ok": False, "error": str(e), "fault": True}
        except OSError as e:  # the filesystem refused (permissions, disk full): the model may adapt
            return {"ok": False, "error": f"{op}: {e.strerror or type(e).__name__}"}

    def server_close(self) -> None:
        super().server_close()
        self.path.unlink(missing_ok=True)


def max_timeout(environ: dict[str, str] | os._Environ[str]) -> int:
    raw = environ.get("SESSIONOPS_TOOLS_MAX_TIMEOUT_SECONDS", "").strip()
    if not raw:
        return MAX_SHELL_TIMEOUT
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit("SESSIONOPS_TOOLS_MAX_TIMEOUT_SECONDS is not an integer") from None
    if not 1 <= value <= MAX_SHELL_TIMEOUT:
        raise SystemExit(f"SESSIONOPS_TOOLS_MAX_TIMEOUT_SECONDS must be between 1 and {MAX_SHELL_TIMEOUT}")
    return value


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    workdir = os.environ.get("SESSIONOPS_WORKDIR", "").strip()
    if not workdir:
        raise SystemExit("SESSIONOPS_WORKDIR is not set")
    path = Path(os.environ.get("SESSIONOPS_TOOLS_SOCKET", "").strip() or protocol.SOCKET_PATH)
    # Files the tools write are the group's too: the worker container shares the volume by group.
    os.umask(0o002)
    Path(workdir).mkdir(parents=True, exist_ok=True)
    server = ToolsServer(path, Operations(Path(workdir), max_timeout=max_timeout(os.environ)))
    stopping = threading.Event()

    def terminate(signum: int, frame: FrameType | None) -> None:
        stopping.set()
        # shutdown() waits for serve_forever to return: never call it from the serving thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)
    logger.info("serving %s on %s (uid %d, run_shell at most %d s)", workdir, path, os.getuid(),
                server.ops.max_timeout)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    logger.info("stopped")



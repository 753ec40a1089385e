"""The worker's side of ``protocol``: one connection per call to the tools process."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

from sessionops.toolbox import protocol
from sessionops.toolbox.ops import ToolError

CALL_TIMEOUT = 120.0
"""Seconds a call other than run_shell may take (they are bounded file operations)."""
SHELL_MARGIN = 15.0
"""Seconds a run_shell call may take beyond its command timeout (the tools process kills the
command at the timeout and then answers)."""


class ToolboxUnavailable(ToolError):
    """The tools process did not answer (not started, gone, restarting). A tool error: the model
    reads it and the turn goes on; a restarted sidecar serves the next call."""


class ToolboxFault(RuntimeError):
    """The tools process refused a request as malformed: a bug, not the model's doing."""


class ToolboxClient:
    def __init__(self, path: str | Path = protocol.SOCKET_PATH) -> None:
        self.path = str(path)

    def call(self, op: str, args: dict[str, Any], timeout: float = CALL_TIMEOUT) -> dict[str, Any]:
        """The op's result; a ToolError with the tools process's message when it failed."""
        data = protocol.encode(protocol.request(op, args))
        if len(data) > protocol.MAX_REQUEST_BYTES:
            raise ToolError(f"{op}: the request is larger than {protocol.MAX_REQUEST_BYTES} bytes")
        response = self._exchange(data, timeout)
        if response.get("ok") is True and isinstance(response.get("result"), dict):
            return response["result"]
        error = response.get("error")
        if not isinstance(error, str) or response.get("ok") is not False:
            raise ToolboxFault(f"{op}: malformed response from the tools process")
        if response.get("fault"):
            raise ToolboxFault(f"{op}: the tools process refused the request: {error}")
        raise ToolError(error)

    def _exchange(self, data: bytes, timeout: float) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            try:
                sock.connect(self.path)
                sock.sendall(data)
                sock.shutdown(socket.SHUT_WR)
                reply = _read_line(sock, protocol.MAX_RESPONSE_BYTES)
            except TimeoutError:
                raise ToolboxUnavailable(f"the tools process did not answer within {timeout:.0f}s") from None
            except OSError as e:
                raise ToolboxUnavailable(f"the tools process is unavailable ({e.strerror or type(e).__name__})") from None
            except protocol.ProtocolError as e:
                raise ToolboxFault(f"bad response from the tools process: {e}") from None
        try:
            return protocol.decode(reply, protocol.MAX_RESPONSE_BYTES)
        except protocol.ProtocolError as e:
            raise ToolboxFault(f"bad response from the tools process: {e}") from None

    def wait_ready(self, timeout: float, *, interval: float = 0.05) -> dict[str, Any]:
        """Ping until the tools process answers; its ping result (``maxTimeoutSeconds``).
        ``ToolboxUnavailable`` naming the socket and the wait when it never does."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.call("ping", {}, timeout=max(0.5, min(5.0, deadline - time.monotonic())))
            except ToolboxUnavailable as e:
                if time.monotonic() >= deadline:
                    raise ToolboxUnavailable(f"no tools process answered on {self.path} within {timeout:.0f}s: "
                                             f"{e}") from None
            time.sleep(interval)


def _read_line(sock: socket.socket, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise protocol.ProtocolError(f"response larger than {limit} bytes")
        if chunk.endswith(b"\n"):
            break
    return b"".join(chunks)

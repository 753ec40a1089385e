"""The worker <-> tools process protocol (version 1).

Transport: a Unix stream socket (``SOCKET_PATH`` by default, on an emptyDir both containers
mount). One request per connection: the client sends one JSON object, UTF-8, ended by a
newline; the server answers with one JSON object ended by a newline and closes.

Request: ``{"v": 1, "op": <op>, "args": {...}}`` with ``op`` one of ``OPS``:

=============  ==============================================  ==============================
op             args                                            result
=============  ==============================================  ==============================
ping           {}                                              {"maxTimeoutSeconds": int}
read_file      {"path": str}                                   {"text": str}
write_file     {"path": str, "content": str}                   {"path": rel, "text": str}
list_files     {"path": str}                                   {"text": str}
run_shell      {"command": str, "timeoutSeconds": int}         {"text": str}
=============  ==============================================  ==============================

Response: ``{"ok": true, "result": {...}}``, or ``{"ok": false, "error": str}`` for an expected
failure the model should read (a path outside the work directory, a timeout: the tool's
error result), or ``{"ok": false, "error": str, "fault": true}`` for a malformed request
(a bug on the worker's side). Sizes are bounded both ways: a request over
``MAX_REQUEST_BYTES`` is refused, and the tools' own bounds (``ops``) keep every response
under ``MAX_RESPONSE_BYTES``, which the client enforces as well.
"""

from __future__ import annotations

import json
from typing import Any

VERSION = 1
SOCKET_PATH = "/run/sessionops-tools/tools.sock"
"""Where the Job puts the socket (the ``tools-socket`` emptyDir)."""
OPS = ("ping", "read_file", "write_file", "list_files", "run_shell")
MAX_REQUEST_BYTES = 32 * 1024 * 1024
"""write_file's largest content (4 Mi characters) in UTF-8 with JSON escapes fits."""
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
"""Far above the tools' own bounds (256 KiB reads, 32 KiB of shell output, 1000 list entries)."""


class ProtocolError(Exception):
    """A message that is not a valid request or response (never the model's fault)."""


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes, limit: int) -> dict[str, Any]:
    if len(line) > limit:
        raise ProtocolError(f"message larger than {limit} bytes")
    if not line.endswith(b"\n"):
        raise ProtocolError("message not terminated by a newline (connection closed early)")
    try:
        message = json.loads(line)
    except ValueError as e:
        raise ProtocolError(f"message is not JSON: {e}") from None
    if not isinstance(message, dict):
        raise ProtocolError("message is not a JSON object")
    return message


def request(op: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"v": VERSION, "op": op, "args": args}


def parse_request(message: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if message.get("v") != VERSION:
        raise ProtocolError(f"unsupported protocol version {message.get('v')!r} (this server speaks {VERSION})")
    op, args = message.get("op"), message.get("args", {})
    if op not in OPS:
        raise ProtocolError(f"unknown op {op!r} (known: {', '.join(OPS)})")
    if not isinstance(args, dict):
        raise ProtocolError("args must be a JSON object")
    return op, args

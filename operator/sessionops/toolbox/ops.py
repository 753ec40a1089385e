"""The workspace and shell operations, confined to one work directory.

The tools process runs them for the worker (``server``); tests and benchmarks run them in
process (``LocalToolbox``). Expected failures (a path outside the work directory, a missing
file, a timeout) are ``ToolError``s: the model reads them as the tool's error result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path, PurePosixPath
from typing import IO, Any

from sessionops.toolbox.protocol import ProtocolError

MAX_READ_BYTES = 256 * 1024
"""read_file returns at most this many bytes of a file (the rest is cut, with a note)."""
MAX_WRITE_CHARS = 4 * 1024 * 1024
"""write_file refuses larger contents: a model that writes more is looping."""
MAX_LIST_ENTRIES = 1000
"""list_files lists at most this many entries of one directory."""
MAX_SHELL_OUTPUT = 32 * 1024
"""run_shell returns at most this many bytes of output: the head and the tail."""
MAX_SHELL_TIMEOUT = 3600
"""Upper bound of run_shell's timeout, in seconds, unless the operator sets a lower one."""
DEFAULT_SHELL_TIMEOUT = 60
"""run_shell's timeout when the model gives none (or the maximum, when lower)."""
SHELL_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TZ")
"""Environment variables run_shell inherits from the tools process."""


class ToolError(Exception):
    """An expected failure, returned to the model as the tool's error result."""


class Workspace:
    """A work directory; ``resolve`` maps a model-given path into it or refuses."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))
        if not self.root.is_dir():
            raise ValueError(f"work directory {root} does not exist")

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` inside the work directory, or a ToolError saying why not."""
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path must be a non-empty path relative to the work directory")
        if "\x00" in path:
            raise ToolError("path must not contain NUL characters")
        pure = PurePosixPath(path)
        if pure.is_absolute() or path.startswith("~"):
            raise ToolError(f"path {path!r} is absolute; use a path relative to the work directory")
        if ".." in pure.parts:
            raise ToolError(f"path {path!r} contains '..'; paths must stay inside the work directory")
        # realpath resolves symlinks in every existing component, so a link that points
        # outside the work directory is caught even when the final file does not exist yet.
        real = Path(os.path.realpath(self.root / pure))
        if real != self.root and self.root not in real.parents:
            raise ToolError(f"path {path!r} resolves outside the work directory (through a symlink)")
        return real

    def relative(self, real: Path) -> str:
        return real.relative_to(self.root).as_posix() or "."


class Operations:
    """The protocol's operations on one work directory; ``call`` dispatches a request."""

    def __init__(self, root: Path, *, max_timeout: int = MAX_SHELL_TIMEOUT) -> None:
        if not 1 <= max_timeout <= MAX_SHELL_TIMEOUT:
            raise ValueError(f"the maximum command timeout must be between 1 and {MAX_SHELL_TIMEOUT} seconds")
        self.ws = Workspace(root)
        self.max_timeout = max_timeout

    def call(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        if op == "ping":
            return {"maxTimeoutSeconds": self.max_timeout}
        if op == "read_file":
            return {"text": self.read_file(_arg(args, "path", str))}
        if op == "write_file":
            return self.write_file(_arg(args, "path", str), _arg(args, "content", str))
        if op == "list_files":
            return {"text": self.list_files(_arg(args, "path", str))}
        if op == "run_shell":
            timeout = args.get("timeoutSeconds")
            if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int)):
                raise ProtocolError("args.timeoutSeconds must be an integer or null")
            return {"text": self.run_shell(_arg(args, "command", str), timeout)}
        raise ProtocolError(f"unknown op {op!r}")

    def read_file(self, path: str) -> str:
        real = self.ws.resolve(path)
        if not real.exists():
            raise ToolError(f"read_file: {path!r} does not exist")
        if not real.is_file():
            raise ToolError(f"read_file: {path!r} is not a regular file")
        with real.open("rb") as f:
            data = f.read(MAX_READ_BYTES + 1)
        text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
        if len(data) > MAX_READ_BYTES:
            text += f"\n[... truncated: the file is larger than {MAX_READ_BYTES} bytes ...]"
        return text

    def write_file(self, path: str, content: str) -> dict[str, Any]:
        if len(content) > MAX_WRITE_CHARS:
            raise ToolError(f"write_file: content is longer than {MAX_WRITE_CHARS} characters")
        real = self.ws.resolve(path)
        if real.is_dir():
            raise ToolError(f"write_file: {path!r} is a directory")
        real.parent.mkdir(parents=True, exist_ok=True)
        real.write_text(content, encoding="utf-8")
        rel = self.ws.relative(real)
        return {"path": rel, "text": f"wrote {len(content)} characters to {rel}"}

    def list_files(self, path: str) -> str:
        real = self.ws.resolve(path)
        if not real.is_dir():
            raise ToolError(f"list_files: {path!r} is not a directory")
        entries = sorted(real.iterdir(), key=lambda p: p.name)
        lines = [f"{p.name}/" if p.is_dir() else p.name for p in entries[:MAX_LIST_ENTRIES]]
        if len(entries) > MAX_LIST_ENTRIES:
            lines.append(f"[... {len(entries) - MAX_LIST_ENTRIES} more entries ...]")
        return "\n".join(lines) if lines else "(empty directory)"

    def run_shell(self, command: str, timeout: int | None) -> str:
        if timeout is None:
            timeout = min(DEFAULT_SHELL_TIMEOUT, self.max_timeout)
        if not 1 <= timeout <= self.max_timeout:
            raise ToolError(f"run_shell: timeout_seconds must be between 1 and {self.max_timeout}")
        env = {k: os.environ[k] for k in SHELL_ENV_KEYS if k in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env.update(HOME=str(self.ws.root), PWD=str(self.ws.root))
        # Output goes to a file, not a pipe, so a chatty command costs disk, not memory.
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", command], cwd=self.ws.root, env=env, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
            try:
                code: int | None = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                # The command may have started children: kill its whole process group.
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                code = None
            output = bounded_output(out)
        if code is None:
            raise ToolError(f"run_shell: timed out after {timeout}s\n{output}")
        return f"exit code {code}\n{output}"


class LocalToolbox:
    """``Operations`` in this process, with the client's interface (tests, benchmarks, and the
    cancellation's checkpoint-only graph, which runs no tool)."""

    def __init__(self, root: Path, *, max_timeout: int = MAX_SHELL_TIMEOUT) -> None:
        self.ops = Operations(root, max_timeout=max_timeout)

    def call(self, op: str, args: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        return self.ops.call(op, args)


def _arg(args: dict[str, Any], name: str, kind: type) -> Any:
    value = args.get(name)
    if not isinstance(value, kind):
        raise ProtocolError(f"args.{name} must be a {kind.__name__}")
    return value


def bounded_output(out: IO[bytes]) -> str:
    """The file's content, or its head and tail with the omitted size, within MAX_SHELL_OUTPUT bytes."""
    size = out.seek(0, os.SEEK_END)
    half = MAX_SHELL_OUTPUT // 4
    if size <= MAX_SHELL_OUTPUT:
        out.seek(0)
        return out.read().decode("utf-8", errors="replace")
    out.seek(0)
    head = out.read(half)
    out.seek(size - (MAX_SHELL_OUTPUT - half))
    tail = out.read()
    omitted = size - len(head) - len(tail)
    return (head.decode("utf-8", errors="replace") + f"\n[... {omitted} bytes of output omitted ...]\n"
            + tail.decode("utf-8", errors="replace"))

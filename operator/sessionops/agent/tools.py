"""The built-in tools of ARCHITECTURE.md section 4, confined to one work directory.

Names and arguments are public (scenario files and prompts rely on them):
``read_file(path)``, ``write_file(path, content)``, ``list_files(path=".")``,
``run_shell(command, timeout_seconds=60)``, ``ask_user(questions)``, ``load_skill(name)``.
``delegate`` lives elsewhere and comes in through the builder's ``extra_tools``.

Expected failures (a path outside the work directory, a missing file, a timeout) are
``ToolException``s: the tool returns them to the model as an error result
(``status="error"``) instead of failing the turn.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.types import Command, interrupt
from pydantic import BaseModel, Field

from sessionops.api.run import Question

BUILTIN_TOOL_NAMES = ("read_file", "write_file", "list_files", "run_shell", "ask_user", "load_skill")

MAX_READ_BYTES = 256 * 1024
"""read_file returns at most this many bytes of a file (the rest is cut, with a note)."""
MAX_WRITE_CHARS = 4 * 1024 * 1024
"""write_file refuses larger contents: a model that writes more is looping."""
MAX_LIST_ENTRIES = 1000
"""list_files lists at most this many entries of one directory."""
MAX_SHELL_OUTPUT = 32 * 1024
"""run_shell returns at most this many bytes of output: the head and the tail."""
MAX_SHELL_TIMEOUT = 3600
"""Upper bound of run_shell's timeout_seconds, in seconds."""
SHELL_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TZ")
"""Environment variables run_shell inherits; the worker's own (DSN, API keys) never leak."""


class Workspace:
    """A work directory; ``resolve`` maps a model-given path into it or refuses."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))
        if not self.root.is_dir():
            raise ValueError(f"work directory {root} does not exist")

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` inside the work directory, or a ToolException saying why not."""
        if not isinstance(path, str) or not path.strip():
            raise ToolException("path must be a non-empty path relative to the work directory")
        if "\x00" in path:
            raise ToolException("path must not contain NUL characters")
        pure = PurePosixPath(path)
        if pure.is_absolute() or path.startswith("~"):
            raise ToolException(f"path {path!r} is absolute; use a path relative to the work directory")
        if ".." in pure.parts:
            raise ToolException(f"path {path!r} contains '..'; paths must stay inside the work directory")
        # realpath resolves symlinks in every existing component, so a link that points
        # outside the work directory is caught even when the final file does not exist yet.
        real = Path(os.path.realpath(self.root / pure))
        if real != self.root and self.root not in real.parents:
            raise ToolException(f"path {path!r} resolves outside the work directory (through a symlink)")
        return real

    def relative(self, real: Path) -> str:
        return real.relative_to(self.root).as_posix() or "."


class QuestionSpec(BaseModel):
    """One question of ``ask_user``."""

    question: str = Field(description="The question to ask.", min_length=1)
    options: list[str] = Field(default_factory=list, description="Suggested answers.")
    multi_select: bool = Field(default=False, description="The user may pick several options.")
    allow_other: bool = Field(default=False, description="The user may answer outside the options.")


def question_id(tool_call_id: str, index: int) -> str:
    """Deterministic id of the ``index``-th question of one ``ask_user`` call."""
    digest = hashlib.sha256(f"{tool_call_id}\x00{index}".encode()).hexdigest()[:16]
    return f"q-{digest}"


def question_payload(tool_call_id: str, questions: Sequence[QuestionSpec | Mapping[str, Any]]) -> dict[str, Any]:
    """The interrupt payload of an ``ask_user`` call (read back by ``waitpoints``)."""
    specs = [q if isinstance(q, QuestionSpec) else QuestionSpec.model_validate(q) for q in questions]
    return {
        "kind": "Question",
        "toolCallId": tool_call_id,
        "questions": [
            Question(question_id=question_id(tool_call_id, i), question=q.question, options=list(q.options),
                     multi_select=q.multi_select, allow_other=q.allow_other).dump()
            for i, q in enumerate(specs)
        ],
    }


def allowed_skills(skills: Mapping[str, str], selection: Literal["all"] | Sequence[str]) -> list[str]:
    """Names of the skills the agent may load: provided (visible now) and selected by the snapshot."""
    if selection == "all":
        return sorted(skills)
    return [name for name in selection if name in skills]


def builtin_tools(
    workdir: Path,
    *,
    skills: Mapping[str, str] | None = None,
    skill_selection: Literal["all"] | Sequence[str] = "all",
    shell_env: Mapping[str, str] | None = None,
) -> list[BaseTool]:
    """The six built-in tools bound to ``workdir`` (selection by name is the builder's job).

    ``skills`` is read at call time, so a live mapping (resolved from ConfigMaps by the
    worker) hides a skill revoked during the turn. ``shell_env`` is added to the minimal
    environment of ``run_shell``.
    """
    ws = Workspace(workdir)
    skill_map: Mapping[str, str] = skills if skills is not None else {}

    def read_file(path: str) -> str:
        """Read a UTF-8 text file of the work directory. `path` is relative to the work directory."""
        real = ws.resolve(path)
        if not real.exists():
            raise ToolException(f"read_file: {path!r} does not exist")
        if not real.is_file():
            raise ToolException(f"read_file: {path!r} is not a regular file")
        with real.open("rb") as f:
            data = f.read(MAX_READ_BYTES + 1)
        text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
        if len(data) > MAX_READ_BYTES:
            text += f"\n[... truncated: the file is larger than {MAX_READ_BYTES} bytes ...]"
        return text

    def write_file(path: str, content: str, runtime: ToolRuntime) -> Command:
        """Create or overwrite a text file of the work directory (parent directories are created)."""
        if len(content) > MAX_WRITE_CHARS:
            raise ToolException(f"write_file: content is longer than {MAX_WRITE_CHARS} characters")
        real = ws.resolve(path)
        if real.is_dir():
            raise ToolException(f"write_file: {path!r} is a directory")
        real.parent.mkdir(parents=True, exist_ok=True)
        real.write_text(content, encoding="utf-8")
        rel = ws.relative(real)
        # The write and its record go into the state together (one task write), so a
        # cancellation that merges this task's result records the file exactly once.
        return Command(update={
            "messages": [ToolMessage(content=f"wrote {len(content)} characters to {rel}",
                                     tool_call_id=runtime.tool_call_id, name="write_file")],
            "files_written": [rel],
        })

    def list_files(path: str = ".") -> str:
        """List a directory of the work directory, one entry a line; directories end with '/'."""
        real = ws.resolve(path)
        if not real.is_dir():
            raise ToolException(f"list_files: {path!r} is not a directory")
        entries = sorted(real.iterdir(), key=lambda p: p.name)
        lines = [f"{p.name}/" if p.is_dir() else p.name for p in entries[:MAX_LIST_ENTRIES]]
        if len(entries) > MAX_LIST_ENTRIES:
            lines.append(f"[... {len(entries) - MAX_LIST_ENTRIES} more entries ...]")
        return "\n".join(lines) if lines else "(empty directory)"

    def run_shell(command: str, timeout_seconds: int = 60) -> str:
        """Run a shell command (/bin/sh -c) in the work directory; returns the exit code and output."""
        if not 1 <= timeout_seconds <= MAX_SHELL_TIMEOUT:
            raise ToolException(f"run_shell: timeout_seconds must be between 1 and {MAX_SHELL_TIMEOUT}")
        env = {k: os.environ[k] for k in SHELL_ENV_KEYS if k in os.environ}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env.update(HOME=str(ws.root), PWD=str(ws.root), **(shell_env or {}))
        # Output goes to a file, not a pipe, so a chatty command costs disk, not worker memory.
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", command], cwd=ws.root, env=env, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
            try:
                code: int | None = proc.wait(timeout=timeout_seconds)
            except subprocess.TimeoutExpired:
                # The command may have started children: kill its whole process group.
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                code = None
            output = _bounded_output(out)
        if code is None:
            raise ToolException(f"run_shell: timed out after {timeout_seconds}s\n{output}")
        return f"exit code {code}\n{output}"

    def ask_user(questions: list[QuestionSpec], runtime: ToolRuntime) -> str:
        """Ask the user questions and wait for the answers (one answer per question, in order).

        Each question has `question`, optional `options`, `multi_select` (answer is a list of
        options) and `allow_other` (answers outside the options are accepted).
        """
        if not questions:
            raise ToolException("ask_user: give at least one question")
        payload = question_payload(runtime.tool_call_id, questions)
        # Resuming re-runs this tool from its start: nothing above has side effects.
        answers = interrupt(payload)
        pairs = [{"question": q["question"], "answer": a} for q, a in zip(payload["questions"], answers, strict=True)]
        return json.dumps(pairs, ensure_ascii=False)

    def load_skill(name: str) -> str:
        """Load a skill (instructions for a task) by name and return its text."""
        names = allowed_skills(skill_map, skill_selection)
        if name not in names:
            available = ", ".join(names) or "none"
            raise ToolException(f"load_skill: skill {name!r} is not available (available: {available})")
        return skill_map[name]

    return [
        StructuredTool.from_function(f, handle_tool_error=True)
        for f in (read_file, write_file, list_files, run_shell, ask_user, load_skill)
    ]


def _bounded_output(out: Any) -> str:
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

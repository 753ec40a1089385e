"""The built-in tools of ARCHITECTURE.md section 4, confined to one work directory.

Names and arguments are public (scenario files and prompts rely on them):
``read_file(path)``, ``write_file(path, content)``, ``list_files(path=".")``,
``run_shell(command, timeout_seconds=60)``, ``ask_user(questions)``, ``load_skill(name)``.
``delegate`` lives elsewhere and comes in through the builder's ``extra_tools``. The workspace
and shell tools run in a ``Toolbox``: in the worker, the tools process of the pod's other
container (``sessionops.toolbox``), which holds none of the worker's credentials.

Expected failures (a path outside the work directory, a missing file, a timeout) are
``ToolException``s: the tool returns them to the model as an error result
(``status="error"``) instead of failing the turn.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.types import Command, interrupt
from pydantic import BaseModel, Field

from sessionops.api.run import Question
from sessionops.toolbox.ops import (
    DEFAULT_SHELL_TIMEOUT,
    MAX_LIST_ENTRIES,
    MAX_READ_BYTES,
    MAX_SHELL_OUTPUT,
    MAX_SHELL_TIMEOUT,
    MAX_WRITE_CHARS,
    LocalToolbox,
    ToolError,
)

__all__ = ["BUILTIN_TOOL_NAMES", "MAX_LIST_ENTRIES", "MAX_READ_BYTES", "MAX_SHELL_OUTPUT", "MAX_SHELL_TIMEOUT",
           "MAX_WRITE_CHARS", "Toolbox", "builtin_tools", "question_id", "question_payload"]

BUILTIN_TOOL_NAMES = ("read_file", "write_file", "list_files", "run_shell", "ask_user", "load_skill")

SHELL_MARGIN = 15.0
"""Seconds a run_shell call may take beyond its command timeout before the worker gives up on
the tools process (which kills the command at the timeout and answers)."""


class Toolbox(Protocol):
    """Where the workspace and shell tools run: the tools process (``ToolboxClient``, in the
    worker) or this process (``LocalToolbox``: tests, benchmarks). See ``sessionops.toolbox``."""

    def call(self, op: str, args: dict[str, Any], timeout: float = ...) -> dict[str, Any]: ...


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
    workdir: Path | None = None,
    *,
    toolbox: Toolbox | None = None,
    skills: Mapping[str, str] | None = None,
    skill_selection: Literal["all"] | Sequence[str] = "all",
) -> list[BaseTool]:
    """The six built-in tools (selection by name is the builder's job).

    ``read_file``, ``write_file``, ``list_files`` and ``run_shell`` run in ``toolbox`` (the
    worker's is the tools process); without one, in this process on ``workdir``. ``skills`` is
    read at call time, so a live mapping (resolved from ConfigMaps by the worker) hides a
    skill revoked during the turn.
    """
    if toolbox is None:
        if workdir is None:
            raise ValueError("builtin_tools needs a workdir or a toolbox")
        toolbox = LocalToolbox(workdir)
    box = toolbox
    skill_map: Mapping[str, str] = skills if skills is not None else {}

    def use(op: str, args: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        try:
            return box.call(op, args, **kwargs)
        except ToolError as e:
            raise ToolException(str(e)) from None

    def read_file(path: str) -> str:
        """Read a UTF-8 text file of the work directory. `path` is relative to the work directory."""
        return str(use("read_file", {"path": path})["text"])

    def write_file(path: str, content: str, runtime: ToolRuntime) -> Command:
        """Create or overwrite a text file of the work directory (parent directories are created)."""
        result = use("write_file", {"path": path, "content": content})
        # The write and its record go into the state together (one task write), so a
        # cancellation that merges this task's result records the file exactly once.
        return Command(update={
            "messages": [ToolMessage(content=result["text"], tool_call_id=runtime.tool_call_id, name="write_file")],
            "files_written": [result["path"]],
        })

    def list_files(path: str = ".") -> str:
        """List a directory of the work directory, one entry a line; directories end with '/'."""
        return str(use("list_files", {"path": path})["text"])

    def run_shell(command: str, timeout_seconds: int | None = None) -> str:
        """Run a shell command (/bin/sh -c) in the work directory; returns the exit code and output.
        `timeout_seconds` defaults to 60 (or the operator's maximum, when lower)."""
        wait = (timeout_seconds or DEFAULT_SHELL_TIMEOUT) + SHELL_MARGIN
        return str(use("run_shell", {"command": command, "timeoutSeconds": timeout_seconds}, timeout=wait)["text"])

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

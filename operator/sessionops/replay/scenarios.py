"""Scenario files: the model, validation and loading.

A scenario is a list of canned assistant responses. Files are YAML or JSON::

    name: tools-then-answer          # optional, defaults to the file name without suffix
    description: free text           # optional
    responses:
      - toolCalls:
          - {name: list_files, args: {path: "."}}
      - content: "Done."
        usage: {promptTokens: 10, completionTokens: 2}   # optional override
        delaySeconds: 0.5            # optional: answer late (an in-flight model call)
    fallbackContent: "..."           # optional: answer for requests past the end
    branches:                        # optional: other conversations, checked in order
      - match: "summarize"           # substring of the conversation's first user message
        responses:                   # same format as above, at least one
          - content: "Summary: ..."
        fallbackContent: "..."       # optional, for this branch only

A response has `content`, `toolCalls`, or both. Unknown fields are rejected, so a typo
fails loading instead of silently replaying something else.

Branches let one scenario answer several conversations, e.g. an agent and the child
sessions it delegates to with the same model: a request is answered from the first
branch whose `match` occurs (case-sensitive) in the text of the first `user` message
of its history (list content: its text parts joined by newlines), otherwise from the
top-level `responses`. Within the chosen conversation the response index is still the
number of assistant messages in the history, and a branch falls back to its own
`fallbackContent` only. A branch's tool call ids carry `.b<branch index>` after the
scenario name (`call_<name>.b0_<index>_<position>`), so they never equal the main
conversation's ids.

A scenario with `turns` instead of `responses` holds any number of user turns (the demo
assistant): each user message is answered by the first turn script whose `cue` occurs
(case-insensitively) in the latest user message, or by the script without a cue::

    name: assistant
    turns:
      - cue: shell                 # the latest user message mentions "shell"
        responses:
          - toolCalls: [{name: run_shell, args: {command: ls}}]
          - content: "The command printed: {{tool_result}}"
      - responses:                 # no cue: every other message (at most one, the last)
          - content: "You said: {{message}}"

Within a turn the response index is the number of assistant messages after the latest
user message. `{{message}}` (the latest user message) and `{{tool_result}}` (the
results of the previous response's tool calls, one per line) are replaced in a turn
script's texts and string arguments, so the answer depends on the history only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

SCENARIO_SUFFIXES = (".yaml", ".yml", ".json")
ENV_DIRS = "SESSIONOPS_REPLAY_DIRS"
# Scenario names appear in model names (`replay/<name>`) and tool call ids.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolCall(_Strict):
    name: str = Field(min_length=1, description="Tool name, e.g. read_file.")
    args: dict[str, Any] = Field(default_factory=dict, description="Tool arguments (a JSON object).")


class Usage(_Strict):
    promptTokens: int | None = Field(default=None, ge=0)
    completionTokens: int | None = Field(default=None, ge=0)


class Response(_Strict):
    content: str | None = None
    toolCalls: list[ToolCall] = Field(default_factory=list)
    usage: Usage | None = None
    delaySeconds: float = Field(
        default=0,
        ge=0,
        le=300,
        description="Wait this long before answering (to test in-flight cancellation).",
    )

    @model_validator(mode="after")
    def _says_something(self) -> Response:
        if self.content is None and not self.toolCalls:
            raise ValueError("a response needs `content`, `toolCalls`, or both")
        return self


class Branch(_Strict):
    match: str = Field(
        min_length=1, description="Substring of the first user message that selects this branch."
    )
    responses: list[Response] = Field(min_length=1)
    fallbackContent: str | None = Field(
        default=None, description="Text answer past this branch's last response."
    )


class Turn(_Strict):
    cue: str | None = Field(
        default=None,
        min_length=1,
        description="Case-insensitive substring of the latest user message; none: any message.",
    )
    responses: list[Response] = Field(min_length=1)
    fallbackContent: str | None = Field(default=None, description="Text answer past this turn's last response.")


class Scenario(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = None
    responses: list[Response] = Field(
        default_factory=list, description="The answers, by the number of assistant messages in the history."
    )
    turns: list[Turn] = Field(
        default_factory=list, description="Per-user-message scripts chosen by cue; instead of `responses`."
    )
    fallbackContent: str | None = Field(
        default=None,
        description="Text answer for requests past the last response; without it they get a 400.",
    )
    branches: list[Branch] = Field(
        default_factory=list,
        description="Conversations selected by their first user message; the first match wins.",
    )

    @model_validator(mode="after")
    def _one_script(self) -> Scenario:
        if bool(self.responses) == bool(self.turns):
            raise ValueError("a scenario needs either `responses` (at least one) or `turns`, not both")
        if self.turns and (self.branches or self.fallbackContent is not None):
            raise ValueError("`turns` cannot be combined with `branches` or a top-level `fallbackContent`")
        catch_all = [i for i, turn in enumerate(self.turns) if turn.cue is None]
        if catch_all and catch_all != [len(self.turns) - 1]:
            raise ValueError(
                f"turns.{catch_all[0]}: only the last turn may omit `cue` (a turn without one answers any message)"
            )
        return self

    def every_response(self) -> list[Response]:
        """Every response of every script: main line, branches and turns."""
        return [
            *self.responses,
            *(r for b in self.branches for r in b.responses),
            *(r for t in self.turns for r in t.responses),
        ]


class ScenarioError(ValueError):
    """A scenario that cannot be loaded; the message names the file and the field."""


def parse_scenario(data: Any, source: str = "<scenario>", default_name: str | None = None) -> Scenario:
    """Validates one decoded scenario document; `source` is used in error messages."""
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{source}: a scenario must be a mapping, got {type(data).__name__}")
    if "name" not in data and default_name is not None:
        data = {**data, "name": default_name}
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in e.errors()
        )
        raise ScenarioError(f"{source}: {problems}") from None


def load_scenario_file(path: str | os.PathLike[str]) -> Scenario:
    """Reads a YAML or JSON scenario file; the name defaults to the file's stem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise ScenarioError(
            f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {e}"
        ) from None
    return parse_scenario(data, source=str(path), default_name=path.stem)


def load_scenario_dirs(dirs: Iterable[str | os.PathLike[str]]) -> dict[str, Scenario]:
    """Loads every scenario file directly in the given directories (not recursive).

    A missing directory or two files with the same scenario name are errors: both
    are configuration mistakes that would otherwise replay the wrong thing. A
    directory named twice (in the environment and on the command line) loads once.
    """
    scenarios: dict[str, Scenario] = {}
    sources: dict[str, Path] = {}
    seen: set[Path] = set()
    for d in dirs:
        directory = Path(d)
        if not directory.is_dir():
            raise ScenarioError(f"{directory}: scenario directory does not exist")
        if directory.resolve() in seen:
            continue
        seen.add(directory.resolve())
        for path in sorted(directory.iterdir()):
            if path.suffix not in SCENARIO_SUFFIXES or not path.is_file():
                continue
            scenario = load_scenario_file(path)
            if scenario.name in scenarios:
                raise ScenarioError(
                    f"{path}: scenario name {scenario.name!r} is already defined in {sources[scenario.name]}"
                )
            scenarios[scenario.name] = scenario
            sources[scenario.name] = path
    return scenarios


def dirs_from_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """The directories in SESSIONOPS_REPLAY_DIRS (os.pathsep-separated; empty parts ignored)."""
    value = (os.environ if environ is None else environ).get(ENV_DIRS, "")
    return [part for part in value.split(os.pathsep) if part]

"""Scenario files: the shipped examples load, and bad files fail naming file and field."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sessionops.replay import ScenarioError, dirs_from_env, load_scenario_dirs, load_scenario_file

from .conftest import EXAMPLES

SHIPPED = {"hello", "tools-then-answer", "parallel-approval", "ask-user", "three-parallel", "steer", "assistant"}


def test_all_example_scenarios_load() -> None:
    scenarios = load_scenario_dirs([EXAMPLES])
    assert set(scenarios) >= SHIPPED
    for path in EXAMPLES.glob("*.yaml"):
        assert load_scenario_file(path).name == path.stem, "example file names match their scenario names"


def test_examples_use_the_builtin_tools_with_their_documented_arguments() -> None:
    builtin = {
        "read_file": {"path"},
        "write_file": {"path", "content"},
        "list_files": {"path"},
        "run_shell": {"command", "timeout_seconds"},
        "ask_user": {"questions"},
        "load_skill": {"name"},
        "delegate": {"message", "name", "agent"},
    }
    for scenario in load_scenario_dirs([EXAMPLES]).values():
        for response in scenario.every_response():
            for call in response.toolCalls:
                assert call.name in builtin, f"{scenario.name}: unknown tool {call.name}"
                assert set(call.args) <= builtin[call.name], f"{scenario.name}: {call.name}({call.args})"
    ask = load_scenario_dirs([EXAMPLES])["ask-user"].responses[0].toolCalls[0].args["questions"]
    assert [set(q) for q in ask] == [{"question", "options", "multi_select", "allow_other"}] * 2


def test_parallel_examples_have_parallel_calls_in_one_response() -> None:
    scenarios = load_scenario_dirs([EXAMPLES])
    assert [c.name for c in scenarios["parallel-approval"].responses[0].toolCalls] == [
        "write_file",
        "run_shell",
    ]
    assert [c.name for c in scenarios["three-parallel"].responses[0].toolCalls] == [
        "read_file",
        "read_file",
        "run_shell",
    ]


def test_a_bad_scenario_file_names_the_file_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: broken\nresponses:\n  - toolCalls:\n      - args: {path: a}\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario_dirs([tmp_path])
    assert str(path) in str(caught.value)
    assert "responses.0.toolCalls.0.name: Field required" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("responses: []", "a scenario needs either `responses` (at least one) or `turns`"),
        ("responses: [{}]", "responses.0: Value error, a response needs `content`, `toolCalls`, or both"),
        ("responses: [{contnet: hi}]", "responses.0.contnet: Extra inputs are not permitted"),
        ("name: 'has space'\nresponses: [{content: hi}]", "name: String should match pattern"),
        ("responses: [{toolCalls: [{name: f, args: [1]}]}]", "responses.0.toolCalls.0.args"),
        ("- just a list", "a scenario must be a mapping"),
        ("responses: [{content: hi}", "not valid YAML"),
    ],
)
def test_invalid_scenarios_are_rejected_with_the_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError, match="bad.yaml") as caught:
        load_scenario_file(path)
    assert field in str(caught.value)


def test_json_files_load_and_the_name_defaults_to_the_file_name(tmp_path: Path) -> None:
    (tmp_path / "from-json.json").write_text(json.dumps({"responses": [{"content": "hi"}]}))
    (tmp_path / "notes.txt").write_text("not a scenario")
    assert list(load_scenario_dirs([tmp_path])) == ["from-json"]


def test_two_files_with_one_scenario_name_are_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("name: same\nresponses: [{content: a}]")
    (tmp_path / "b.yaml").write_text("name: same\nresponses: [{content: b}]")
    with pytest.raises(ScenarioError, match="'same' is already defined in .*a.yaml"):
        load_scenario_dirs([tmp_path])


def test_a_directory_named_twice_loads_once() -> None:
    assert set(load_scenario_dirs([EXAMPLES, str(EXAMPLES) + "/"])) == set(load_scenario_dirs([EXAMPLES]))


def test_a_missing_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="scenario directory does not exist"):
        load_scenario_dirs([tmp_path / "nope"])


def test_dirs_come_from_the_environment_separated_by_pathsep() -> None:
    assert dirs_from_env({"SESSIONOPS_REPLAY_DIRS": os.pathsep.join(["a", "", "b"])}) == ["a", "b"]
    assert dirs_from_env({}) == []

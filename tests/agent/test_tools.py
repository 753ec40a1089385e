"""The built-in tools on their own: confinement, bounds, error results."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage

from sessionops.agent import tools as builtin
from sessionops.agent.tools import builtin_tools, question_id, question_payload


def runtime() -> ToolRuntime:
    return ToolRuntime(state={}, context=None, config={}, stream_writer=None, tool_call_id="tc-1", store=None)


def invoke(tool_set: dict, tool_name: str, **args):
    if tool_name == "write_file":  # outside a graph, injected arguments are passed explicitly
        args["runtime"] = runtime()
    return tool_set[tool_name].invoke({"name": tool_name, "args": args, "id": "tc-1", "type": "tool_call"})


def call(tool_set: dict, tool_name: str, **args) -> ToolMessage:
    result = invoke(tool_set, tool_name, **args)
    if not isinstance(result, ToolMessage):  # write_file returns a Command with the message inside
        result = result.update["messages"][0]
    return result


@pytest.fixture
def tools(workdir: Path) -> dict:
    return {t.name: t for t in builtin_tools(workdir, skills={"deploy": "Deploy with care."},
                                             skill_selection=["deploy", "missing"])}


@pytest.mark.parametrize("path, reason", [
    ("../secret", "contains '..'"),
    ("a/../../secret", "contains '..'"),
    ("/etc/passwd", "is absolute"),
    ("~/x", "is absolute"),
    ("", "non-empty"),
])
@pytest.mark.parametrize("tool", ["read_file", "list_files"])
def test_paths_outside_the_work_directory_are_refused(tools, tool, path, reason):
    result = call(tools, tool, path=path)
    assert result.status == "error"
    assert reason in result.content


def test_a_symlink_pointing_outside_is_refused_for_read_write_and_list(tools, workdir, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret")
    os.symlink(outside, workdir / "link")
    for name, args in [("read_file", {"path": "link/secret.txt"}), ("list_files", {"path": "link"}),
                       ("write_file", {"path": "link/new.txt", "content": "x"})]:
        result = call(tools, name, **args)
        assert result.status == "error" and "outside the work directory" in result.content, name
    assert not (outside / "new.txt").exists()


def test_a_symlink_inside_the_work_directory_is_followed(tools, workdir):
    (workdir / "real.txt").write_text("hello")
    os.symlink(workdir / "real.txt", workdir / "alias.txt")
    assert call(tools, "read_file", path="alias.txt").content == "hello"


def test_write_then_read_and_list(tools, workdir):
    result = invoke(tools, "write_file", path="d/e/f.txt", content="hi")
    assert result.update["files_written"] == ["d/e/f.txt"]
    assert (workdir / "d/e/f.txt").read_text() == "hi"
    assert call(tools, "read_file", path="d/e/f.txt").content == "hi"
    assert call(tools, "list_files", path="d").content == "e/"
    assert call(tools, "list_files").content == "d/"


def test_read_of_a_missing_file_is_an_error_result(tools):
    result = call(tools, "read_file", path="nope.txt")
    assert result.status == "error" and "does not exist" in result.content


def test_large_files_are_truncated(tools, workdir):
    (workdir / "big.txt").write_text("x" * (builtin.MAX_READ_BYTES + 10))
    content = call(tools, "read_file", path="big.txt").content
    assert content.endswith("...]") and "truncated" in content


@pytest.mark.integration  # a real shell
def test_run_shell_runs_in_the_work_directory_without_the_worker_environment(tools, workdir, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://secret")
    result = call(tools, "run_shell", command="pwd; echo ${DATABASE_URL:-unset}; exit 3")
    assert result.content == f"exit code 3\n{workdir.resolve()}\nunset\n"


@pytest.mark.integration  # a real shell
def test_run_shell_times_out_and_kills_the_command(tools):
    result = call(tools, "run_shell", command="echo started; sleep 30", timeout_seconds=1)
    assert result.status == "error"
    assert "timed out after 1s" in result.content and "started" in result.content


@pytest.mark.integration  # a real shell
def test_run_shell_output_is_bounded(tools):
    result = call(tools, "run_shell", command="head -c 200000 /dev/zero | tr '\\0' 'a'")
    assert len(result.content) < builtin.MAX_SHELL_OUTPUT + 200
    assert "bytes of output omitted" in result.content


def test_load_skill_returns_only_selected_and_visible_skills(tools):
    assert call(tools, "load_skill", name="deploy").content == "Deploy with care."
    refused = call(tools, "load_skill", name="missing")
    assert refused.status == "error" and "available: deploy" in refused.content


def test_question_ids_are_deterministic_and_distinct():
    payload = question_payload("call_1", [{"question": "A?"}, {"question": "B?", "options": ["x"]}])
    ids = [q["questionId"] for q in payload["questions"]]
    assert ids == [question_id("call_1", 0), question_id("call_1", 1)]
    assert len(set(ids)) == 2
    assert question_payload("call_1", [{"question": "A?"}])["questions"][0]["questionId"] == ids[0]

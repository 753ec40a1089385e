"""Conversations driven with the plugin against the local stack (or the cluster of SESSIONOPS_E2E_KUBECONFIG).

The plugin runs in-process through typer's CliRunner, in a thread: the test API server lives
in this module's event loop and must keep serving while a command blocks. The last test runs
it as real processes: the console script, ``python -m sessionops.cli`` and ``kubectl sessionops``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sessionops.cli.main import app
from tests.e2e import manifests as m
from tests.stack import ROOT, TOOLS, Stack, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

AGENT = (ROOT / "examples" / "01-agent.yaml").read_text()  # Agent "helper": run_shell needs approval
RUN_TIMEOUT = "40"
runner = CliRunner()


async def plugin(stack: Stack, *args: str, input: str | None = None) -> Any:
    """``kubectl sessionops <args>`` in-process; connection options go before the command, as globals."""
    argv = ["--kubeconfig", str(stack.kubeconfig), "-n", stack.namespace, *args]
    return await asyncio.to_thread(runner.invoke, app, argv, input=input, env={"COLUMNS": "200"})


def lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


async def session(stack: Stack, name: str, model: str) -> None:
    await stack.apply(AGENT)
    await stack.apply(m.session(name, "helper", model=model))


async def session_phase(stack: Stack, name: str, phase: str) -> None:
    """The session's status follows its run's a moment later: wait for it before reading it."""
    await stack.wait_for("asess", name, lambda s: (s.get("status") or {}).get("phase") == phase, timeout=15)


async def test_approval_conversation(stack: Stack, name: str) -> None:
    await session(stack, name, "replay/parallel-approval")
    ns, run = stack.namespace, f"{name}-t1"

    res = await plugin(stack, "send", name, "Write hello.sh and run it.", "--key", "first")
    assert res.exit_code == 0, res.output
    assert f"sent input {name}-first to session {name} (sequence 1, phase Pending, FollowUp)" in res.stdout
    # The key makes a retry safe: the same request is recognized, a different one is refused.
    again = await plugin(stack, "send", name, "Write hello.sh and run it.", "--key", "first")
    assert again.exit_code == 0, again.output
    assert lines(again.stdout)[0].startswith(f"already received: input {name}-first (sequence 1, phase ")
    changed = await plugin(stack, "send", name, "Write hello.sh, please.", "--key", "first", "--steer")
    assert changed.exit_code == 2
    assert lines(changed.stderr) == [
        f'error: key "first" already used by input {name}-first for a different request (nothing was sent): '
        "spec.delivery; spec.messages[0].content",
        '  spec.delivery: this request "Steer", original "FollowUp"',
        '  spec.messages[0].content: this request "Write hello.sh, please.", original "Write hello.sh and run it."']
    listed = await stack.kubectl("get", "ainput", "-l", f"sessionops.dev/session={name}", "-o", "name")
    assert listed.stdout.split() == [f"agentinput.sessionops.dev/{name}-first"]

    res = await plugin(stack, "watch", name, "--timeout", RUN_TIMEOUT, "--interval", "0.2")
    assert res.exit_code == 0, res.output
    out = lines(res.stdout)
    assert f"{run}: Running -> Waiting" in out
    assert any(line.startswith("Approval needed (wp-") for line in out)
    [row] = [line for line in out if "run_shell" in line and "Approve/Reject" in line]
    assert 'command="sh hello.sh" timeout_seconds=30' in row
    # The steps so far, from the transcript, before the waitpoint table.
    calls = [line for line in out if "call run_shell" in line]
    assert len(calls) == 1 and out.index(calls[0]) < out.index(row)
    assert f"kubectl sessionops approve {run} -n {ns}" in out

    await session_phase(stack, name, "Waiting")
    res = await plugin(stack, "status", name)
    assert res.exit_code == 0, res.output
    out = lines(res.stdout)
    assert "Phase       Waiting" in out and "Model       replay/parallel-approval" in out
    assert f"Active run  {run} Waiting" in out
    assert any("run_shell" in line for line in out)

    # Admission refuses a message while the turn waits: one line, the field and the reason, exit 2.
    res = await plugin(stack, "send", name, "are you there?")
    assert res.exit_code == 2
    assert lines(res.stderr) == [f'error: conflict: spec.kind: messages are refused while turn "{run}" waits for '
                                 "a Resume input"]
    # A decision for a call that does not wait, sent past the plugin's own checks: admission's reason.
    res = await plugin(stack, "approve", run, "nope", "--no-client-checks")
    assert res.exit_code == 1
    assert lines(res.stderr) == ["error: rejected: spec.decisions[0].callId: 'nope' is not a pending call of "
                                 "this waitpoint"]

    res = await plugin(stack, "approve", run)
    assert res.exit_code == 0, res.output
    assert f"resumed run {run} with input {run}-wp-" in res.stdout
    # Following the transcript (watch API) prints the rest of the turn as it happens, each step once.
    res = await plugin(stack, "transcript", run, "--follow", "--timeout", RUN_TIMEOUT)
    assert res.exit_code == 0, res.output
    followed = lines(res.stdout)
    assert any("final answer: Wrote hello.sh and ran it." in line for line in followed), followed
    assert len(followed) == len(set(followed))
    res = await plugin(stack, "watch", run, "--timeout", RUN_TIMEOUT, "--interval", "0.2")
    assert res.exit_code == 0, res.output
    out = lines(res.stdout)
    assert out[out.index(f"result of {run}:") + 1] == "Wrote hello.sh and ran it."
    # watch prints the turn's steps (from watch events on its transcript) before the result.
    assert any("final answer: Wrote hello.sh and ran it." in line for line in out[:out.index(f"result of {run}:")])
    assert sum("call run_shell" in line for line in out) == 1

    # The whole turn, in order, through the Kubernetes API only.
    res = await plugin(stack, "transcript", run)
    assert res.exit_code == 0, res.output
    out = lines(res.stdout)
    assert out[0] == f"turn {run} (Succeeded)"
    kinds = [line.split("] ", 1)[1] for line in out[1:]]
    assert kinds[0] == "user: Write hello.sh and run it."
    assert kinds[2].startswith("call write_file ") and kinds[3] == 'call run_shell command="sh hello.sh" timeout_seconds=30'
    assert kinds[4].startswith("result write_file (success): wrote ")
    assert kinds[5] == "waiting for approval: run_shell"
    assert kinds[6].startswith("approved run_shell by ")
    assert kinds[7].startswith("result run_shell (success): exit code 0") and "hello from sessionops" in kinds[7]
    assert kinds[8].startswith("final answer: Wrote hello.sh and ran it. (")
    res = await plugin(stack, "transcript", name, "-o", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["run"] == run and doc["phase"] == "Succeeded"
    assert [s["kind"] for s in doc["steps"]] == ["UserMessage", "AssistantMessage", "ToolCall", "ToolCall",
                                                 "ToolResult", "Wait", "Decision", "ToolResult", "FinalAnswer"]
    listed = await stack.kubectl("get", "agenttranscripts", "-l", f"sessionops.dev/run={run}", "-o", "name")
    assert listed.stdout.split() == [f"agenttranscript.sessionops.dev/{run}-t0"]
    # The worker's log, where kubectl looks: each line names the run, the segment and the step.
    logs = await stack.kubectl("logs", f"job/{run}-2")
    assert f"run {run} segment {run}-2: step decision:call_parallel-approval_0_1 Decision run_shell" in logs.stdout
    assert f"run {run} segment {run}-2: reported Succeeded" in logs.stdout
    pods = await stack.kubectl("get", "pods", "-l", f"job-name={run}-1", "-o", "name")
    logs = await stack.kubectl("logs", pods.stdout.split()[0], "--tail", "2")
    messages = [json.loads(line)["message"] for line in lines(logs.stdout)]
    assert len(messages) == 2 and f"run {run} segment {run}-1: reported Waiting" in messages

    res = await plugin(stack, "approve", run)
    assert res.exit_code == 2
    assert lines(res.stderr) == [f"error: run {run} is not waiting for input (phase Succeeded)"]
    res = await plugin(stack, "status", name)
    assert any(line.startswith(f"│ {run}") and "Succeeded" in line and "Wrote hello.sh and ran it." in line
               for line in lines(res.stdout)), res.stdout


async def test_questions_are_answered_in_order(stack: Stack, name: str) -> None:
    await session(stack, name, "replay/ask-user")
    run = f"{name}-t1"
    res = await plugin(stack, "send", name, "Make an example.", "--watch", "--timeout", RUN_TIMEOUT)
    assert res.exit_code == 0, res.output
    out = lines(res.stdout)
    assert any(line.startswith("Questions (wp-") for line in out)
    assert any("Which language should the example use?" in line and "Python, Go, Rust" in line for line in out)
    assert any("Which checks should run?" in line and "several, comma-separated" in line for line in out)

    res = await plugin(stack, "answer", run, "Go")  # too few: the plugin's check
    assert res.exit_code == 1
    assert lines(res.stderr)[0] == "error: expected 2 answers (one per question, in order), got 1"
    res = await plugin(stack, "answer", run, "Go", "--no-client-checks")  # too few: admission's check
    assert res.exit_code == 1
    assert lines(res.stderr) == ["error: rejected: spec.answers: expected 2 answers (one per question, in order), "
                                 "got 1"]
    res = await plugin(stack, "answer", run, "Go", "lint,docs", "--no-client-checks")
    assert res.exit_code == 1
    assert lines(res.stderr) == ["error: rejected: spec.answers[1][1]: 'docs' is not one of the options: lint, "
                                 "unit tests, e2e tests"]

    res = await plugin(stack, "answer", run, "Go", "lint, unit tests", "--watch", "--timeout", RUN_TIMEOUT)
    assert res.exit_code == 0, res.output
    out = lines(res.stdout)
    assert out[out.index(f"result of {run}:") + 1] == "Thanks, I will use your choices for the example."
    resume = await stack.get("ainput", f"{run}-{_waitpoint(res.stdout)}")
    assert resume["spec"]["answers"] == ["Go", ["lint", "unit tests"]]


def _waitpoint(stdout: str) -> str:
    """The waitpoint id in 'resumed run X with input X-wp-...'."""
    word = next(w for w in stdout.split() if "-wp-" in w)
    return "wp-" + word.split("-wp-")[1]


async def test_cancel_pauses_the_queue_and_continue_resumes_it(stack: Stack, name: str) -> None:
    await session(stack, name, "replay/parallel-approval")
    ns, run = stack.namespace, f"{name}-t1"
    res = await plugin(stack, "send", name, "Write hello.sh and run it.", "--watch", "--timeout", RUN_TIMEOUT)
    assert res.exit_code == 0 and "Approval needed (wp-" in res.stdout, res.output

    res = await plugin(stack, "cancel", run, "--wait", "--timeout", RUN_TIMEOUT)
    assert res.exit_code == 0, res.output
    assert f"cancel requested for run {run} (was Waiting)" in res.stdout
    assert f"{run}: Cancelling -> Cancelled" in lines(res.stdout) or f"{run}: Waiting -> Cancelled" in lines(
        res.stdout), res.stdout
    res = await plugin(stack, "cancel", run)  # repeating is a no-op
    assert res.exit_code == 0 and lines(res.stdout) == [f"cancel already requested for run {run} (phase Cancelled)"]
    assert (await stack.get("arun", run))["status"]["phase"] == "Cancelled"
    await session_phase(stack, name, "Paused")
    # The cancelled turn's transcript holds the call that never ran, stored by the cancellation once.
    res = await plugin(stack, "transcript", run)
    assert res.exit_code == 0, res.output
    out = lines(res.stdout)
    assert out[0] == f"turn {run} (Cancelled)"
    assert out[-1].endswith(f"[{run}-1] result run_shell (cancelled): cancelled by the user"), out
    assert sum("result write_file (success)" in line for line in out) == 1
    chunks = json.loads((await stack.kubectl("get", "agenttranscripts", "-l", f"sessionops.dev/run={run}",
                                             "-o", "json")).stdout)["items"]
    steps = [s for c in sorted(chunks, key=lambda c: c["spec"]["index"]) for s in c["spec"]["steps"]]
    [cancelled] = [s for s in steps if s.get("status") == "cancelled"]
    [shell] = [s for s in steps if s["kind"] == "ToolCall" and s["tool"] == "run_shell"]
    assert (cancelled["id"], cancelled["kind"]) == (f"result:{shell['toolCallId']}", "ToolResult")
    assert len({s["id"] for s in steps}) == len(steps)

    res = await plugin(stack, "send", name, "Try again, please.", "--key", "again")
    assert res.exit_code == 0, res.output  # received and queued while the queue is paused
    res = await plugin(stack, "status", name)
    assert res.exit_code == 0, res.output
    out = lines(res.stdout)
    assert "Phase       Paused" in out
    assert any(line.startswith("Queue       1 pending, paused: ") and "cancelled" in line for line in out), out
    assert f"resume the queue: kubectl sessionops continue {name} -n {ns}" in out
    assert any(line.startswith(f"│ {name}-again") for line in out)
    assert any(line.startswith(f"│ {run}") and "Cancelled" in line for line in out)

    res = await plugin(stack, "continue", name, "--watch", "--timeout", RUN_TIMEOUT)
    assert res.exit_code == 0, res.output
    out = lines(res.stdout)
    # The queued message becomes the next turn; the cancelled one is never revived.
    assert out[out.index(f"result of {name}-t2:") + 1] == "Wrote hello.sh and ran it."
    res = await plugin(stack, "continue", name)
    assert res.exit_code == 2
    assert lines(res.stderr) == ["error: conflict: spec.kind: Continue is accepted only while the session's queue "
                                 "is paused"]


async def test_the_plugin_as_processes(stack: Stack, name: str) -> None:
    """The console script, ``python -m sessionops.cli`` and kubectl's plugin discovery."""
    await session(stack, name, "replay/hello")
    await session_phase(stack, name, "Idle")
    conn = ["--kubeconfig", str(stack.kubeconfig), "-n", stack.namespace]
    bin_dir = Path(sys.executable).parent
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "200"}
    res = await run_cli(bin_dir / "kubectl-sessionops", "status", name, *conn, check=False, env=env)
    assert res.returncode == 0 and "Phase       Idle" in res.stdout, res
    res = await run_cli(sys.executable, "-m", "sessionops.cli", "status", "no-such-session", *conn, check=False,
                        env=env)
    assert res.returncode == 3
    assert res.stderr.strip() == f'error: AgentSession "no-such-session" not found in namespace {stack.namespace}'
    # kubectl finds kubectl-sessionops on PATH (flags must follow the plugin name).
    res = await run_cli(TOOLS / "kubectl", "sessionops", "continue", name, "--key", "p1", *conn, check=False,
                        env=env)
    assert res.returncode == 2, res
    assert res.stderr.strip() == ("error: conflict: spec.kind: Continue is accepted only while the session's "
                                  "queue is paused")

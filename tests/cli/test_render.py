"""Rendering: waitpoint tables, hints, outcomes and the session overview (as plain text)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from sessionops.cli import render
from tests.cli.test_inputs import APPROVAL, QUESTIONS, SINGLE


def text(*renderables: Any, width: int = 160) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None, markup=False, highlight=False)
    for r in renderables:
        console.print(r)
    return console.file.getvalue()  # type: ignore[attr-defined]


def rows(table_text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("│ ").split("│")] for line in table_text.splitlines()
            if line.startswith("│")]


def test_approval_table_lists_every_pending_call() -> None:
    out = text(render.waitpoint_table(APPROVAL))
    assert out.splitlines()[0].strip() == "Approval needed (wp-a)"
    assert rows(out) == [
        ["1", "call-1", "write_file", 'path="a"', "Approve/Reject"],
        ["2", "call-2", "run_shell", 'command="ls"', "Approve/Reject"],
        ["3", "call-3", "run_shell", 'command="df"', "Approve/Reject"],
    ]


def test_question_table_says_how_to_answer() -> None:
    out = text(render.waitpoint_table(QUESTIONS))
    assert rows(out) == [
        ["1", "Which language?", "Python, Go", "one (or your own)"],
        ["2", "Which checks?", "lint, unit tests, e2e tests", "several, comma-separated"],
        ["3", "Anything else?", "-", "free text"],
    ]


def test_delegation_table_lists_children() -> None:
    out = text(render.waitpoint_table({"id": "wp-d", "kind": "Delegation", "children": ["child-1"]}))
    assert "child-1" in out and "Waiting for delegated sessions" in out


def test_delegation_table_shows_what_each_child_needs() -> None:
    waitpoint = {"id": "wp-d", "kind": "Delegation", "children": ["rev-1", "w-2", "w-3"]}
    children = [{"name": "reviewer", "session": "rev-1", "phase": "Waiting", "waitingAt": "rev-1/rev-1-t1/wp-q"},
                {"name": "w2", "session": "w-2", "phase": "Queued", "heldBack": "tree full"},
                {"name": "w3", "session": "w-3", "phase": "Running"}]
    flat = [" ".join(w for w in line.split() if w != "│")
            for line in text(render.waitpoint_table(waitpoint, children)).splitlines()]
    assert any("rev-1 reviewer Waiting an answer at rev-1/rev-1-t1/wp-q" in line for line in flat), flat
    assert any("w-2 w2 Queued tree full" in line for line in flat), flat
    assert any("w-3 w3 Running -" in line for line in flat), flat


def test_args_are_one_line_and_bounded() -> None:
    assert render.format_args({"path": "x.sh", "content": "line\n" * 100, "n": 3}).startswith(
        'path="x.sh" content="line\\nline')
    assert len(render.format_args({"content": "y" * 500})) < 70
    assert render.format_args(None) == ""


def test_hints_are_runnable_commands() -> None:
    assert render.waitpoint_hints("demo-t1", SINGLE, " -n team-a") == [
        "kubectl sessionops approve demo-t1 -n team-a",
        'kubectl sessionops reject demo-t1 --message "why not" -n team-a']
    assert render.waitpoint_hints("demo-t1", APPROVAL)[0] == "kubectl sessionops approve demo-t1 --all"
    assert render.waitpoint_hints("qa-t1", QUESTIONS)[0].startswith(
        'kubectl sessionops answer qa-t1 Python "lint,unit tests" "your answer"')


def run(name: str, phase: str, seq: int, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"sessionops.dev/sequence": str(seq)}},
            "spec": {"sessionRef": {"name": "demo"}, "inputs": [f"in-{seq}"]},
            "status": {"phase": phase, **status}}


def test_outcomes() -> None:
    assert render.outcome_line(run("r", "Succeeded", 1, result={"text": "Done.\nReally."})) == "Done. Really."
    failed = run("r", "Failed", 1, conditions=[{"type": "Failed", "status": "True", "reason": "ModelError",
                                                "message": "400 from the model"}])
    assert render.outcome_line(failed) == "ModelError: 400 from the model"
    cancelled = run("r", "Cancelled", 1, cancellation={"completedSteps": ["MergeCompletedTasks"]})
    assert render.outcome_line(cancelled) == "cancelled (cleanup: MergeCompletedTasks)"
    assert render.outcome_line(run("r", "Waiting", 1, waitpoint=APPROVAL)) == "Approval: 3 call(s) to decide"
    block = text(render.result_block(run("demo-t1", "Succeeded", 1, result={"text": "Wrote hello.sh.\nRan it."},
                                         usage={"inputTokens": 10, "outputTokens": 2}, segments=[{}, {}])))
    assert block.splitlines() == ["result of demo-t1:", "Wrote hello.sh.", "Ran it.",
                                  "(10 in / 2 out tokens, 2 segment(s))"]


def test_session_overview_shows_phase_queue_waitpoint_and_recent_runs() -> None:
    session = {"metadata": {"name": "demo", "namespace": "team-a"},
               "spec": {"agentRef": {"name": "helper"}, "contextSnapshot": {"model": "m0"}},
               "status": {"phase": "Waiting", "model": "replay/parallel-approval", "approvalMode": "Default",
                          "activeRun": "demo-t3", "queue": {"pending": 1, "paused": False}}}
    runs = [run("demo-t1", "Succeeded", 1, result={"text": "first"}),
            run("demo-t3", "Waiting", 3, waitpoint=SINGLE),
            run("demo-t2", "Cancelled", 2)]
    inputs = [{"metadata": {"name": "demo-k9"}, "spec": {"sequence": 5, "kind": "Message", "delivery": "FollowUp",
                                                          "messages": [{"content": "later please"}]}},
              {"metadata": {"name": "demo-k1"}, "spec": {"sequence": 1}, "status": {"phase": "Consumed"}}]
    out = text(*render.session_overview(session, runs, inputs, ns=" -n team-a"))
    lines = [line.rstrip() for line in out.splitlines()]
    assert "Session     demo (namespace team-a, agent helper)" in lines
    assert "Phase       Waiting" in lines
    assert "Model       replay/parallel-approval" in lines
    assert "Approval    Default" in lines
    assert "Queue       1 pending" in lines
    assert "Active run  demo-t3 Waiting" in lines
    assert "kubectl sessionops approve demo-t3 -n team-a" in lines
    assert ["demo-k9", "5", "Message", "FollowUp", "later please"] in rows(out)
    run_rows = [r for r in rows(out) if r[0].startswith("demo-t")]
    assert [r[0] for r in run_rows] == ["demo-t3", "demo-t2", "demo-t1"]
    assert run_rows[-1] == ["demo-t1", "Succeeded", "in-1", "0", "first"]


def test_paused_session_says_how_to_continue() -> None:
    session = {"metadata": {"name": "demo", "namespace": "team-a"}, "spec": {"agentRef": {"name": "helper"}},
               "status": {"phase": "Paused", "queue": {"pending": 0, "paused": True,
                                                        "pausedReason": 'turn "demo-t1" was cancelled'}}}
    out = text(*render.session_overview(session, [], []))
    assert 'Queue       0 pending, paused: turn "demo-t1" was cancelled' in out
    assert "resume the queue: kubectl sessionops continue demo" in out


def test_the_queue_count_includes_an_input_the_operator_has_not_reconciled_yet() -> None:
    """``send`` returns once the input is admitted; the session status catches up a moment later."""
    session = {"metadata": {"name": "demo", "namespace": "team-a"}, "spec": {"agentRef": {"name": "helper"}},
               "status": {"phase": "Paused", "queue": {"pending": 0, "paused": True,
                                                        "pausedReason": 'turn "demo-t1" was cancelled'}}}
    inputs = [{"metadata": {"name": "demo-again"}, "spec": {"sequence": 2, "messages": [{"content": "again"}]}},
              {"metadata": {"name": "demo-k1"}, "spec": {"sequence": 1}, "status": {"phase": "Consumed"}},
              # Being deleted: it has left the queue, as the operator counts it.
              {"metadata": {"name": "demo-gone", "deletionTimestamp": "2026-12-02T10:00:00Z"},
               "spec": {"sequence": 3}, "status": {"phase": "Pending"}}]
    out = text(*render.session_overview(session, [], inputs))
    assert "demo-gone" not in out
    assert 'Queue       1 pending, paused: turn "demo-t1" was cancelled' in out
    assert ["demo-again", "2", "Message", "-", "again"] in rows(out)

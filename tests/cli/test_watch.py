"""The watcher against scripted runs: what it prints and when it stops."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from sessionops.cli.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_FAILED, EXIT_TIMEOUT
from sessionops.cli.watch import Watcher, run_events
from tests.cli.fake import FakeKube, an_input, run, session
from tests.cli.test_inputs import QUESTIONS, SINGLE

SEG1 = {"name": "demo-t1-1", "kind": "Start", "job": "demo-t1-1"}
SEG1_WAITING = {**SEG1, "outcome": "Waiting"}
SEG2 = {"name": "demo-t1-2", "kind": "Resume", "job": "demo-t1-2"}
DONE = {"text": "Wrote hello.sh and ran it.", "segment": "demo-t1-2"}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def watcher(kube: FakeKube, **kw: Any) -> tuple[Watcher, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, width=160, color_system=None, markup=False, highlight=False)
    clock = Clock()
    return Watcher(kube, console, interval=1.0, clock=clock, sleep=clock.sleep, **kw), out


def test_run_events_report_phases_segments_steers_and_cleanup() -> None:
    a = run(phase="Pending")
    b = run(phase="Running", segments=[SEG1], steered=["demo-s1"])
    c = run(phase="Cancelling", segments=[{**SEG1, "outcome": "Cancelled"}], steered=["demo-s1"],
            cancellation={"completedSteps": ["MergeCompletedTasks"]})
    assert [t.plain for t in run_events(None, a)] == ["demo-t1: Pending"]
    assert [t.plain for t in run_events(a, b)] == [
        "demo-t1: Pending -> Running", "  segment demo-t1-1 (Start) started", "  steered into the turn: demo-s1"]
    assert [t.plain for t in run_events(b, c)] == [
        "demo-t1: Running -> Cancelling", "  segment demo-t1-1 (Start): Cancelled",
        "  cancellation step done: MergeCompletedTasks"]
    assert run_events(c, c) == []


def test_stops_at_an_unanswered_waitpoint_with_the_table_and_hints() -> None:
    kube = FakeKube()
    kube.script("agentruns", "demo-t1", [run(phase="Pending"), run(segments=[SEG1]),
                                         run(phase="Waiting", segments=[SEG1_WAITING], waitpoint=SINGLE)])
    w, out = watcher(kube)
    assert w.watch("demo-t1") == EXIT_OK
    text = out.getvalue()
    assert "demo-t1: Running -> Waiting" in text
    assert "Approval needed (wp-s)" in text and "call-2" in text and "run_shell" in text
    assert "kubectl sessionops approve demo-t1 -n team-a" in text


def test_an_answered_waitpoint_does_not_stop_the_watch() -> None:
    kube = FakeKube()
    kube.script("agentruns", "demo-t1", [
        run(phase="Waiting", segments=[SEG1_WAITING], waitpoint=SINGLE),
        run(phase="Waiting", segments=[SEG1_WAITING], waitpoint=SINGLE),
        run(segments=[SEG1_WAITING, SEG2]),
        run(phase="Succeeded", segments=[SEG1_WAITING, {**SEG2, "outcome": "Succeeded"}], result=DONE,
            usage={"inputTokens": 5, "outputTokens": 1})])
    kube.put("agentinputs", an_input("demo-t1-wp-s", kind="Resume", run="demo-t1", waitpointId="wp-s"))
    w, out = watcher(kube)
    assert w.watch("demo-t1") == EXIT_OK
    text = out.getvalue()
    assert "wp-s answered by demo-t1-wp-s; resuming" in text
    assert "Approval needed" not in text
    assert "result of demo-t1:\nWrote hello.sh and ran it.\n(5 in / 1 out tokens, 2 segment(s))" in text
    assert w.final_phase == "Succeeded"


def test_ignored_waitpoints_and_until_done() -> None:
    kube = FakeKube()
    states = [run(phase="Waiting", waitpoint=SINGLE), run(phase="Waiting", waitpoint=QUESTIONS),
              run(phase="Waiting", waitpoint=QUESTIONS), run(phase="Succeeded", result=DONE)]
    kube.script("agentruns", "demo-t1", list(states))
    w, out = watcher(kube, until_done=True)
    assert w.watch_run("demo-t1", ignore_waitpoints=["wp-s"]) == EXIT_OK
    text = out.getvalue()
    assert "Approval needed" not in text  # the waitpoint being answered
    assert text.count("Questions (wp-q)") == 1  # shown once, then followed to the end
    assert "result of demo-t1:" in text


def test_failed_and_cancelled_runs_exit_4() -> None:
    kube = FakeKube()
    kube.put("agentruns", run(phase="Failed", conditions=[
        {"type": "Failed", "status": "True", "reason": "ModelError", "message": "scenario exhausted"}]))
    w, out = watcher(kube)
    assert w.watch("demo-t1") == EXIT_RUN_FAILED
    assert "demo-t1 failed: ModelError: scenario exhausted" in out.getvalue()
    kube.put("agentruns", run(phase="Cancelled", cancellation={"completedSteps": ["ClearTasks"]}))
    w, out = watcher(kube)
    assert w.watch("demo-t1") == EXIT_RUN_FAILED
    assert "demo-t1 was cancelled: cancelled (cleanup: ClearTasks)" in out.getvalue()


def test_timeout_exits_5_and_says_where_the_run_is() -> None:
    kube = FakeKube()
    kube.put("agentruns", run(phase="Running"))
    w, out = watcher(kube, timeout=3)
    assert w.watch("demo-t1") == EXIT_TIMEOUT
    assert "timed out after 3s: run demo-t1 is Running" in out.getvalue()
    assert kube.gets <= 6


def test_ctrl_c_exits_130() -> None:
    kube = FakeKube()
    kube.put("agentruns", run(phase="Running"))
    w, out = watcher(kube)

    def interrupt(_: float) -> None:
        raise KeyboardInterrupt

    w._sleep = interrupt
    assert w.watch("demo-t1") == EXIT_INTERRUPTED
    assert "interrupted: run demo-t1 is Running" in out.getvalue()


def test_a_session_is_followed_through_the_run_its_queued_input_becomes() -> None:
    kube = FakeKube()
    kube.script("agentsessions", "demo", [session(), session(), session(activeRun="demo-t1", phase="Running")])
    kube.script("agentinputs", "demo-k1", [an_input("demo-k1", sequence=1)])
    kube.put("agentruns", run(phase="Succeeded", result=DONE))
    w, out = watcher(kube)
    assert w.watch("demo") == EXIT_OK
    assert "session demo: active run demo-t1" in out.getvalue()
    assert "result of demo-t1:" in out.getvalue()


def test_a_run_that_ended_between_two_polls_is_still_found() -> None:
    kube = FakeKube()
    kube.put("agentsessions", session())
    kube.script("agentinputs", "demo-k1", [an_input("demo-k1")])
    kube.put("agentruns", run(phase="Succeeded", result=DONE))
    w, out = watcher(kube)
    real_list = kube.list
    calls = {"n": 0}

    def list_then_consume(plural: str, session_name: str | None = None) -> list[dict[str, Any]]:
        calls["n"] += plural == "agentinputs"
        if plural == "agentinputs" and calls["n"] > 1:
            kube.objects[("agentinputs", "demo-k1")] = an_input("demo-k1", phase="Consumed", run_name="demo-t1")
        return real_list(plural, session_name)

    kube.list = list_then_consume  # type: ignore[method-assign]
    assert w.watch("demo") == EXIT_OK
    assert "session demo: demo-k1 became run demo-t1" in out.getvalue()


def test_an_idle_or_paused_session_ends_the_watch_with_a_hint() -> None:
    kube = FakeKube()
    kube.put("agentsessions", session())
    kube.put("agentruns", run(phase="Succeeded", result=DONE))
    w, out = watcher(kube)
    assert w.watch("demo") == EXIT_OK
    assert "session demo is Idle: nothing is running or queued" in out.getvalue()
    assert "last run demo-t1 Succeeded: Wrote hello.sh and ran it." in out.getvalue()

    kube = FakeKube(namespace_explicit=False)
    kube.put("agentsessions", session(phase="Paused", queue={"pending": 1, "paused": True,
                                                           "pausedReason": 'turn "demo-t1" was cancelled'}))
    kube.put("agentinputs", an_input("demo-k2"))
    w, out = watcher(kube)
    assert w.watch("demo") == EXIT_OK
    assert 'session demo is Paused (1 queued): turn "demo-t1" was cancelled' in out.getvalue()
    assert "resume it: kubectl sessionops continue demo\n" in out.getvalue()


def test_an_input_is_followed_to_its_run() -> None:
    kube = FakeKube()
    kube.script("agentinputs", "demo-k1", [an_input("demo-k1", sequence=3),
                                           an_input("demo-k1", phase="Consumed", run_name="demo-t3")])
    kube.put("agentruns", run("demo-t3", phase="Succeeded", seq=3, result=DONE))
    w, out = watcher(kube)
    assert w.watch_input("demo-k1") == EXIT_OK
    text = out.getvalue()
    assert "demo-k1: queued (sequence 3)" in text and "demo-k1: Consumed by run demo-t3" in text

    kube.put("agentinputs", an_input("demo-bad", phase="Rejected", conditions=[]))
    kube.objects[("agentinputs", "demo-bad")]["status"]["conditions"] = [
        {"type": "Rejected", "status": "True", "message": "stale waitpoint"}]
    w, out = watcher(kube)
    assert w.watch("demo-bad") == EXIT_RUN_FAILED  # found as an input
    assert "demo-bad: Rejected: stale waitpoint" in out.getvalue()


def test_unknown_names_are_not_found() -> None:
    from sessionops.cli.errors import EXIT_NOT_FOUND, CliError

    w, _ = watcher(FakeKube())
    try:
        w.watch("nope")
    except CliError as e:
        assert e.code == EXIT_NOT_FOUND
        assert e.message == 'no AgentRun, AgentSession or AgentInput "nope" in namespace team-a'
    else:
        raise AssertionError("no error")


def test_a_session_resuming_from_a_continue_is_followed_to_its_next_run() -> None:
    kube = FakeKube()
    paused = {"phase": "Paused", "queue": {"pending": 1, "paused": True, "pausedReason": "cancelled"}}
    kube.script("agentsessions", "demo", [session(**paused), session(**paused),
                                          session(phase="Running", activeRun="demo-t2")])
    kube.put("agentinputs", an_input("demo-m2", sequence=2))
    kube.put("agentinputs", an_input("demo-continue-c", kind="Continue", sequence=3))
    kube.put("agentruns", run("demo-t2", phase="Succeeded", seq=2, result=DONE))
    w, out = watcher(kube)
    assert w.watch("demo") == EXIT_OK
    assert "Paused" not in out.getvalue()
    assert "session demo: active run demo-t2" in out.getvalue()


def test_a_run_the_session_status_does_not_show_yet_is_followed() -> None:
    kube = FakeKube()
    kube.put("agentsessions", session())  # no activeRun yet
    kube.put("agentruns", run("demo-t1", phase="Succeeded", result=DONE))
    kube.put("agentruns", run("demo-t2", phase="Pending", seq=2))
    kube.script("agentruns", "demo-t2", [run("demo-t2", phase="Running", seq=2),
                                         run("demo-t2", phase="Succeeded", seq=2, result=DONE)])
    w, out = watcher(kube)
    assert w.watch("demo") == EXIT_OK
    assert "session demo: active run demo-t2" in out.getvalue()


def test_a_consumed_continue_with_nothing_queued_ends_the_watch() -> None:
    kube = FakeKube()
    kube.put("agentsessions", session())
    kube.put("agentinputs", an_input("demo-continue-c", kind="Continue", phase="Consumed"))
    w, out = watcher(kube, timeout=5)
    assert w.watch("demo") == EXIT_OK
    assert "session demo is Idle: nothing is running or queued" in out.getvalue()

"""The watch-fed cache: which sessions a safety scan must visit, and which runs are unfinished."""

from __future__ import annotations

from typing import Any

from sessionops.api.names import INPUT_FINALIZER, SESSION_FINALIZER
from sessionops.platform.cache import Cache


def session(name: str, phase: str | None = "Idle", pending: int = 0, **meta: Any) -> dict[str, Any]:
    status = {"phase": phase, "queue": {"pending": pending, "paused": False}} if phase else {}
    return {"metadata": {"namespace": "ns", "name": name, "finalizers": [SESSION_FINALIZER], **meta},
            "status": status}


def inp(name: str, session_name: str, phase: str | None = None, kind: str | None = None,
        **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"sessionRef": {"name": session_name}}
    if kind:
        spec["kind"] = kind
    return {"metadata": {"namespace": "ns", "name": name, **meta}, "spec": spec,
            "status": {"phase": phase} if phase else {}}


def test_consistent_idle_sessions_need_no_visit() -> None:
    cache = Cache()
    for i in range(3):
        cache.see_session(session(f"s{i}"))
        cache.see_input(inp(f"s{i}-1", f"s{i}", "Consumed"))
    cache.see_session(session("busy", "Running", pending=1))
    cache.see_input(inp("busy-2", "busy"))
    assert cache.sessions_out_of_step() == []


def test_a_missed_input_event_or_a_missed_claim_shows() -> None:
    cache = Cache()
    cache.see_session(session("a"))
    cache.see_input(inp("a-1", "a"))  # pending, but the status says 0 pending
    cache.see_session(session("b", pending=1))  # Idle with a queue, not paused: a claim is due
    cache.see_input(inp("b-1", "b"))
    cache.see_session(session("c", phase=None))  # never reconciled
    held = session("d", pending=1)
    held["status"]["queue"]["heldBack"] = "delegation tree full"  # its wake-up is another object's event
    cache.see_session(held)
    cache.see_input(inp("d-1", "d"))
    assert sorted(cache.sessions_out_of_step()) == [("ns", "a"), ("ns", "b"), ("ns", "c"), ("ns", "d")]


def test_deletions_and_continues_wait_for_a_pass() -> None:
    cache = Cache()
    cache.see_session(session("gone", deletionTimestamp="2026-01-01T00:00:00Z"))
    cache.see_session(session("released", deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[]))
    cache.see_session(session("held"))
    cache.see_input(inp("held-1", "held", "Consumed", deletionTimestamp="x", finalizers=[INPUT_FINALIZER]))
    cache.see_session(session("paused"))
    cache.see_input(inp("paused-2", "paused", kind="Continue"))
    assert sorted(cache.sessions_out_of_step()) == [("ns", "gone"), ("ns", "held"), ("ns", "paused")]
    cache.see_session(session("gone"), deleted=True)
    cache.see_input(inp("held-1", "held"), deleted=True)
    cache.see_input(inp("paused-2", "paused", "Consumed", kind="Continue"))
    assert cache.sessions_out_of_step() == []


def test_only_unfinished_runs_are_kept_with_their_cancel_request() -> None:
    cache = Cache()
    run = {"metadata": {"namespace": "ns", "name": "r"}, "spec": {"cancel": False}, "status": {"phase": "Running"}}
    cache.see_run(run)
    assert cache.unfinished_runs == {("ns", "r"): False}
    cache.see_run({**run, "spec": {"cancel": True}})
    assert cache.unfinished_runs == {("ns", "r"): True}
    cache.see_run({**run, "status": {"phase": "Cancelled"}})
    assert cache.unfinished_runs == {}
    cache.see_run(run)
    cache.see_run(run, deleted=True)
    assert cache.unfinished_runs == {}


def test_a_run_is_due_after_any_event_and_after_a_pass_until_its_quiet_time() -> None:
    cache = Cache()
    key = ("ns", "r")
    run = {"metadata": {"namespace": "ns", "name": "r"}, "spec": {}, "status": {"phase": "Running"}}
    cache.see_run(run)
    assert cache.run_due(key, 0.0)  # never passed over
    cache.visiting(key, 10.0)
    cache.visited(key, 10.0, 70.0)
    assert not cache.run_due(key, 69.9) and cache.run_due(key, 70.0)
    cache.touch_run(key)  # its Job's event
    assert cache.run_due(key, 11.0)
    cache.visiting(key, 20.0)
    cache.touch_run(key)  # an event during the pass: the pass's verdict is not the last word
    cache.visited(key, 20.0, 80.0)
    assert cache.run_due(key, 21.0)
    cache.visited(key, 21.0, 81.0)
    cache.see_run({**run, "status": {"phase": "Succeeded"}})
    assert cache.run_visits == {}
    cache.touch_run(key)  # a late pod event of a finished run keeps nothing
    assert cache.run_visits == {}

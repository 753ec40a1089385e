"""Delegation trees as pure views: child names, what a waiting parent sees, when it resumes."""

from __future__ import annotations

import datetime
import re

from sessionops.api.session import SESSION_NAME_MAX
from sessionops.delegation import tree
from sessionops.delegation.names import child_input_name, child_session_name
from sessionops.execution.segments import decide

NOW = datetime.datetime(2026, 12, 2, 12, 0, tzinfo=datetime.UTC)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def test_a_child_name_is_the_same_for_the_same_run_and_call_and_a_valid_session_name() -> None:
    name = child_session_name("research-t12", "call_abc_0_1", "Summarize_Docs")
    assert name == child_session_name("research-t12", "call_abc_0_1", "Summarize_Docs")
    assert name.startswith("summarize-docs-") and DNS_LABEL.match(name)
    assert name != child_session_name("research-t12", "call_abc_0_2", "Summarize_Docs")
    assert name != child_session_name("research-t13", "call_abc_0_1", "Summarize_Docs")
    for given in ("x" * 64, "___", "-A-", "Z9_-"):
        child = child_session_name("r" * 40 + "-t999", "c", given)
        assert DNS_LABEL.match(child) and len(child) <= SESSION_NAME_MAX, child
        assert len(child_input_name(child)) <= 63
    assert child_session_name("r", "c", "___").startswith("child-")


def session(name: str, held: str | None = None) -> dict:
    return {"metadata": {"name": name}, "status": {"queue": {"heldBack": held}}}


def inp(phase: str = "Pending", run: str | None = None, message: str = "") -> dict:
    status: dict = {"phase": phase, **({"run": run} if run else {})}
    if message:
        status["conditions"] = [{"type": phase, "status": "True", "message": message}]
    return {"metadata": {"name": "i"}, "status": status}


def run(name: str, phase: str | None, **status) -> dict:
    return {"metadata": {"name": name}, "status": {"phase": phase, **status}}


def child(name: str = "c1", *, input_phase: str = "Consumed", run_phase: str | None = "Running", **status) -> tree.Child:
    return tree.Child(name, session(name), inp(input_phase, f"{name}-t1"),
                      run(f"{name}-t1", run_phase, **status) if run_phase else None)


def test_a_childs_phase_follows_its_input_then_its_run() -> None:
    assert tree.phase(tree.Child("c1", session("c1"), inp(), None)) == "Queued"
    assert tree.phase(child(run_phase=None)) == "Queued"
    assert tree.phase(child(run_phase="Waiting")) == "Waiting"
    assert tree.phase(tree.Child("c1", session("c1"), inp("Cancelled"), None)) == "Cancelled"
    assert tree.phase(tree.Child("c1", None, None, None)) == "Deleted"
    assert [tree.ended(c) for c in (child(), child(run_phase="Waiting"), child(run_phase="Failed"),
                                    tree.Child("c1", session("c1"), inp("Rejected"), None),
                                    tree.Child("c1", None, inp(), None))] == [False, False, True, True, True]


def test_a_question_deep_in_the_tree_shows_as_a_path() -> None:
    assert tree.waiting_at("c1", run("c1-t1", "Running")) is None
    asking = run("c1-t1", "Waiting", waitpoint={"id": "wp-q", "kind": "Question"})
    assert tree.waiting_at("c1", asking) == "c1/c1-t1/wp-q"
    delegating = run("c1-t1", "Waiting", waitpoint={"id": "wp-d", "kind": "Delegation"},
                     children=[{"name": "a", "session": "g1"}, {"name": "b", "session": "g2",
                                                                "waitingAt": "g2/g2-t1/wp-a"}])
    assert tree.waiting_at("c1", delegating) == "c1/c1-t1/g2/g2-t1/wp-a"
    status = tree.child_status("reviewer", tree.Child("c1", session("c1"), inp("Consumed", "c1-t1"), asking))
    assert status.dump() == {"name": "reviewer", "session": "c1", "run": "c1-t1", "phase": "Waiting",
                             "waitingAt": "c1/c1-t1/wp-q"}
    held = tree.child_status("w", tree.Child("c2", session("c2", "tree full"), inp(), None), cut_off=True)
    assert (held.phase, held.held_back, held.cut_off) == ("Queued", "tree full", True)


def test_a_parent_resumes_when_every_child_ended_or_at_the_deadline() -> None:
    since = NOW - datetime.timedelta(seconds=59)
    done = [child("a", run_phase="Succeeded"), child("b", run_phase="Failed")]
    assert tree.resume_due(done, since=since, now=NOW, timeout_seconds=60) == tree.ResumeDue(True)
    busy = [*done, child("c", run_phase="Waiting")]
    assert tree.resume_due(busy, since=since, now=NOW, timeout_seconds=60) == tree.ResumeDue(False)
    assert tree.resume_due(busy, since=since - datetime.timedelta(seconds=1), now=NOW, timeout_seconds=60) == \
        tree.ResumeDue(True, deadline_passed=True)
    assert tree.resume_due(busy, since=None, now=NOW, timeout_seconds=0) == tree.ResumeDue(False)


def test_the_waiting_time_starts_when_the_waiting_segment_was_recorded() -> None:
    segs = [{"name": "r-1", "outcome": "Waiting", "finishedAt": "2026-12-02T11:59:00Z"}]
    assert tree.waiting_since(run("r", "Waiting", segments=segs)) == NOW - datetime.timedelta(minutes=1)
    assert tree.waiting_since(run("r", "Waiting", segments=[{"name": "r-1"}])) is None


def test_a_childs_outcome_is_the_delegate_calls_resume_value() -> None:
    ok = child(run_phase="Succeeded", result={"text": "42"})
    assert tree.result(ok) == {"session": "c1", "phase": "Succeeded", "run": "c1-t1", "text": "42"}
    failed = child(run_phase="Failed", conditions=[{"type": "Failed", "status": "True", "message": "segment x: model down"}])
    assert tree.result(failed)["message"] == "segment x: model down"
    cancelled = tree.Child("c1", session("c1"), inp("Cancelled", message="the parent was cancelled"), None)
    assert tree.result(cancelled) == {"session": "c1", "phase": "Cancelled", "message": "the parent was cancelled"}
    assert tree.result(child(run_phase="Running"))["deadlinePassed"] is True
    assert tree.result(child(run_phase="Cancelled"), cut_off=True)["deadlinePassed"] is True


def test_turns_that_hold_no_pod_do_not_count_against_the_bound() -> None:
    runs = [run("a", None), run("b", "Running"), run("c", "Waiting"), run("d", "Succeeded"),
            run("e", "Cancelling"), run("f", "Pending")]
    assert tree.running_turns(runs) == 4
    assert tree.held_back("root", 3, 4) is None
    assert tree.held_back("root", 4, 4) == 'delegation tree "root" runs 4 turns (bound 4): waiting for one to finish'


def waiting_parent(kind: str = "Delegation") -> dict:
    return {"metadata": {"name": "p-t1"}, "spec": {"cancel": False},
            "status": {"phase": "Waiting", "waitpoint": {"id": "wp-d", "kind": kind, "children": ["c1"]},
                       "segments": [{"name": "p-t1-1", "kind": "Start", "job": "p-t1-1", "outcome": "Waiting",
                                     "finishedAt": "2026-12-02T11:59:00Z"}]}}


def test_the_run_controller_resumes_a_delegation_with_a_segment_that_has_no_input() -> None:
    kwargs = {"now": NOW, "max_retries": 2, "start_timeout_seconds": 60}
    stray = {"metadata": {"name": "r1"}, "spec": {"kind": "Resume", "run": "p-t1", "waitpointId": "wp-d"}}
    idle = decide(waiting_parent(), None, [stray], **kwargs)
    assert idle.start_segment is None and idle.consume_input is None and not idle.status
    plan = decide(waiting_parent(), None, [], delegation_due=True, **kwargs)
    assert plan.start_segment == (2, "Resume", None)
    assert plan.status["phase"] == "Running"
    assert plan.status["segments"][-1] == {"name": "p-t1-2", "kind": "Resume", "job": "p-t1-2",
                                           "startedAt": "2026-12-02T12:00:00Z"}
    # Only a Delegation waitpoint resumes without an input.
    assert decide(waiting_parent("Question"), None, [], delegation_due=True, **kwargs).start_segment is None

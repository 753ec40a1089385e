"""The queue rules as sentences: steer batch first, follow-ups FIFO, one active turn,
pauses after failure or cancellation, Continue resumes, crashes repair themselves."""

from __future__ import annotations

import datetime
from typing import Any

from sessionops.api.names import INPUT_FINALIZER, SEQUENCE_LABEL
from sessionops.scheduling.queue import NewRun, decide
from sessionops.scheduling.reconcile import run_body
from tests import factories

NOW = datetime.datetime(2026, 12, 3, 10, 0, tzinfo=datetime.UTC)
SNAP = {"model": "replay/hello", "approvalMode": "Default", "systemPrompt": "p"}


def session(**status: Any) -> dict:
    return factories.session(snapshot=SNAP, status=status)


def inp(name: str, seq: int, *, delivery: str = "FollowUp", kind: str = "Message", phase: str | None = None,
        run: str | None = None, deleting: bool = False, snapshot: dict | None = None) -> dict:
    obj: dict[str, Any] = {"metadata": {"name": name, "finalizers": [INPUT_FINALIZER]},
                           "spec": {"kind": kind, "sequence": seq, "contextSnapshot": snapshot or {**SNAP, "n": seq}},
                           "status": {}}
    if kind == "Message":
        obj["spec"]["delivery"] = delivery
    if phase:
        obj["status"]["phase"] = phase
    if run:
        obj["status"]["run"] = run
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return obj


def run(name: str, seq: int, phase: str | None, inputs: list[str]) -> dict:
    return {"metadata": {"name": name, "labels": {SEQUENCE_LABEL: str(seq)}},
            "spec": {"inputs": inputs}, "status": {"phase": phase} if phase else {}}


def test_idle_session_claims_the_oldest_follow_up_alone() -> None:
    plan = decide(session(), [inp("b", 2), inp("a", 1)], [])
    assert plan.create_run.name == "s1-t1" and plan.create_run.inputs == ["a"]
    assert plan.create_run.snapshot["n"] == 1
    assert plan.consume == {"a": "s1-t1"}
    assert plan.status["phase"] == "Running" and plan.status["queue"]["pending"] == 1


def test_pending_steers_form_one_batch_ahead_of_follow_ups_with_the_first_steer_config() -> None:
    plan = decide(session(), [inp("f", 1), inp("s2", 3, delivery="Steer"), inp("s1", 2, delivery="Steer")], [])
    assert plan.create_run.inputs == ["s1", "s2"] and plan.create_run.name == "s1-t2"
    assert plan.create_run.snapshot["n"] == 2


def test_an_active_turn_blocks_claiming_and_steers_stay_pending_for_the_worker() -> None:
    plan = decide(session(), [inp("a", 1, phase="Consumed", run="s1-t1"), inp("s", 2, delivery="Steer")],
                  [run("s1-t1", 1, "Running", ["a"])])
    assert plan.create_run is None and plan.consume == {}
    assert plan.status["activeRun"] == "s1-t1" and plan.status["queue"]["pending"] == 1


def test_session_phase_follows_the_active_run() -> None:
    for run_phase, phase in [("Pending", "Running"), (None, "Running"), ("Waiting", "Waiting"),
                             ("Cancelling", "Cancelling")]:
        plan = decide(session(), [], [run("s1-t1", 1, run_phase, ["a"])])
        assert plan.status["phase"] == phase


def test_a_failed_turn_pauses_the_queue_and_a_continue_resumes_it_in_the_same_pass() -> None:
    runs = [run("s1-t1", 1, "Failed", ["a"])]
    waiting = [inp("a", 1, phase="Consumed", run="s1-t1"), inp("b", 2)]
    plan = decide(session(), waiting, runs)
    assert plan.create_run is None
    assert plan.status["phase"] == "Paused" and plan.status["queue"]["paused"] is True
    assert "s1-t1" in plan.status["queue"]["pausedReason"]
    plan = decide(session(), [*waiting, inp("c", 3, kind="Continue")], runs)
    assert plan.create_run.inputs == ["b"]
    assert plan.consume == {"c": None, "b": "s1-t2"}


def test_a_cancelled_turn_pauses_and_an_older_continue_does_not_count() -> None:
    runs = [run("s1-t1", 1, "Failed", ["a"]), run("s1-t3", 3, "Cancelled", ["b"])]
    inputs = [inp("c", 2, kind="Continue", phase="Consumed"), inp("d", 4)]
    plan = decide(session(), inputs, runs)
    assert plan.status["queue"]["paused"] and "cancelled" in plan.status["queue"]["pausedReason"]
    assert plan.create_run is None


def test_a_succeeded_turn_lets_the_next_follow_up_run_fifo() -> None:
    plan = decide(session(), [inp("a", 1, phase="Consumed", run="s1-t1"), inp("c", 5), inp("b", 3)],
                  [run("s1-t1", 1, "Succeeded", ["a"])])
    assert plan.create_run.inputs == ["b"]


def test_a_crash_between_create_run_and_consume_is_repaired_without_duplicating() -> None:
    # The run exists (non-terminal) but its inputs were never marked consumed.
    plan = decide(session(), [inp("a", 1), inp("b", 2)], [run("s1-t1", 1, "Pending", ["a"])])
    assert plan.create_run is None and plan.consume == {"a": "s1-t1"}
    # ...or it already finished: the next pass consumes exactly its inputs, then moves on.
    plan = decide(session(), [inp("s", 1, delivery="Steer"), inp("t", 2, delivery="Steer")],
                  [run("s1-t1", 1, "Succeeded", ["s"])])
    assert plan.consume["s"] == "s1-t1"
    assert plan.create_run.inputs == ["t"] and plan.create_run.name == "s1-t2"


def test_deleting_a_pending_input_takes_it_out_of_the_queue() -> None:
    plan = decide(session(), [inp("a", 1, deleting=True), inp("b", 2)], [])
    assert plan.release == ["a"] and plan.create_run.inputs == ["b"]


def test_a_consumed_input_keeps_its_record_while_its_run_is_active() -> None:
    runs = [run("s1-t1", 1, "Running", ["a"])]
    plan = decide(session(), [inp("a", 1, phase="Consumed", run="s1-t1", deleting=True)], runs)
    assert plan.release == []
    runs[0]["status"]["phase"] = "Succeeded"
    plan = decide(session(), [inp("a", 1, phase="Consumed", run="s1-t1", deleting=True)], runs)
    assert plan.release == ["a"]


def test_status_projects_only_public_fields() -> None:
    plan = decide(session(), [], [], now=NOW)
    conditions = plan.status.pop("conditions")
    assert plan.status == {"phase": "Idle", "model": "replay/hello", "approvalMode": "Default", "activeRun": None,
                           "queue": {"pending": 0, "paused": False, "pausedReason": None, "heldBack": None},
                           "observedGeneration": None}
    assert [(c["type"], c["status"]) for c in conditions] == [("Ready", "True"), ("Active", "False"),
                                                               ("Paused", "False")]
    assert "contextSnapshot" not in str(plan.status) and "systemPrompt" not in str(plan.status)


def _conds(plan: Any) -> dict[str, dict]:
    return {c["type"]: c for c in plan.status["conditions"]}


def test_a_session_with_a_turn_under_way_is_active_and_ready_for_steers() -> None:
    conds = _conds(decide(session(), [inp("a", 1)], [], now=NOW))
    assert (conds["Active"]["status"], conds["Active"]["reason"]) == ("True", "Running")
    assert "s1-t1" in conds["Active"]["message"] and conds["Ready"]["status"] == "True"


def test_a_waiting_turn_makes_the_session_not_ready_for_messages() -> None:
    conds = _conds(decide(session(), [], [run("s1-t1", 1, "Waiting", ["a"])], now=NOW))
    assert (conds["Ready"]["status"], conds["Ready"]["reason"]) == ("False", "TurnWaiting")
    assert conds["Active"]["reason"] == "Waiting"


def test_a_paused_queue_says_why_in_the_paused_condition() -> None:
    for phase, reason in (("Failed", "TurnFailed"), ("Cancelled", "TurnCancelled")):
        conds = _conds(decide(session(), [inp("b", 2)], [run("s1-t1", 1, phase, ["a"])], now=NOW))
        assert (conds["Paused"]["status"], conds["Paused"]["reason"]) == ("True", reason)
        assert "s1-t1" in conds["Paused"]["message"] and "Continue" in conds["Paused"]["message"]
        assert (conds["Ready"]["status"], conds["Active"]["status"]) == ("False", "False")


def test_an_unchanged_session_projects_its_stored_conditions_again() -> None:
    first = decide(session(), [], [], now=NOW)
    later = decide(session(**first.status), [], [], now=NOW + datetime.timedelta(hours=1))
    assert later.status["conditions"] == first.status["conditions"]


def test_decide_is_stable_when_replayed() -> None:
    objects = (session(), [inp("a", 1), inp("b", 2, delivery="Steer")], [])
    assert decide(*objects, now=NOW) == decide(*objects, now=NOW)


def test_a_continue_that_unpaused_the_queue_does_not_excuse_the_turn_it_let_run() -> None:
    # t2 failed; message c (seq 3) and Continue k (seq 4) arrive; t3 is claimed after k and fails too.
    t3 = run("s1-t3", 3, "Failed", ["c"])
    t3["metadata"]["labels"]["sessionops.dev/claimed-at"] = "4"
    runs = [run("s1-t2", 2, "Failed", ["b"]), t3]
    inputs = [inp("k", 4, kind="Continue", phase="Consumed"), inp("c", 3, phase="Consumed", run="s1-t3"),
              inp("d", 5)]
    plan = decide(session(), inputs, runs)
    assert plan.status["queue"]["paused"] and plan.create_run is None
    plan = decide(session(), [*inputs, inp("k2", 6, kind="Continue")], runs)
    assert plan.create_run.inputs == ["d"]


def test_a_new_run_records_the_last_sequence_seen_when_claimed() -> None:
    plan = decide(session(), [inp("a", 1), inp("b", 7)], [])
    assert plan.create_run.claimed_at == 7


def test_a_status_written_once_is_not_written_again() -> None:
    from sessionops.scheduling.reconcile import _status_changed

    wanted = decide(session(), [], []).status
    stored = {**wanted, "queue": {"pending": 0, "paused": False}}  # the merge patch dropped the None
    stored.pop("activeRun")
    stored.pop("observedGeneration")
    assert not _status_changed({**stored, "lastSequence": 3}, wanted)
    assert _status_changed({**stored, "phase": "Running"}, wanted)


def test_a_full_delegation_tree_holds_the_head_back_and_says_why() -> None:
    why = 'delegation tree "root" runs 4 turns (bound 4): waiting for one to finish'
    plan = decide(session(), [inp("a", 1)], [], held_back=why)
    assert plan.create_run is None and plan.consume == {}
    assert plan.status["phase"] == "Idle" and plan.status["queue"] == {
        "pending": 1, "paused": False, "pausedReason": None, "heldBack": why}
    # Room again: the same inputs are claimed and the reason goes away.
    plan = decide(session(), [inp("a", 1)], [])
    assert plan.create_run.inputs == ["a"] and plan.status["queue"]["heldBack"] is None
    # Nothing pending, or a paused queue: nothing is held back by the tree.
    assert decide(session(), [], [], held_back=why).status["queue"]["heldBack"] is None


def test_runs_carry_their_tree_and_the_run_that_delegated() -> None:
    root = factories.session("root")
    root["metadata"]["uid"] = "u-root"
    labels = run_body(root, NewRun("root-t1", 1, ["a"], SNAP))["metadata"]["labels"]
    assert labels["sessionops.dev/tree"] == "root" and "sessionops.dev/parent-run" not in labels
    child = factories.session("kid")
    child["metadata"]["labels"] = {"sessionops.dev/tree": "root", "sessionops.dev/parent-run": "root-t1",
                                   "sessionops.dev/parent-session": "root"}
    labels = run_body(child, NewRun("kid-t1", 1, ["k"], SNAP))["metadata"]["labels"]
    assert {k: labels.get(k) for k in child["metadata"]["labels"]} == child["metadata"]["labels"]


def test_a_forged_last_sequence_is_put_back_ahead_of_every_claimed_turn() -> None:
    """Defence in depth (issue 12): even if a reset lastSequence were stored, the next pass repairs it."""
    runs = [run("s1-t1", 1, "Succeeded", ["a"]), run("s1-t3", 3, "Succeeded", ["c"])]
    inputs = [inp("a", 1, phase="Consumed", run="s1-t1"), inp("c", 3, phase="Consumed", run="s1-t3")]
    assert decide(session(lastSequence=0), inputs, runs).status["lastSequence"] == 3
    assert "lastSequence" not in decide(session(lastSequence=3), inputs, runs).status  # never written needlessly
    assert "lastSequence" not in decide(session(lastSequence=9), inputs, runs).status  # never lowered


def test_a_sequence_allocated_twice_still_gets_its_own_turn() -> None:
    """A forged reset once let receipt hand out sequence 1 again: its run name collided with the finished
    s1-t1 and the input stayed pending forever. It now gets a deterministic name of its own."""
    first = run("s1-t1", 1, "Succeeded", ["a"])
    again = inp("b", 1)
    again["metadata"]["uid"] = "uid-b"
    inputs = [inp("a", 1, phase="Consumed", run="s1-t1"), again]
    plan = decide(session(), inputs, [first])
    assert plan.create_run is not None and plan.create_run.inputs == ["b"]
    assert plan.create_run.name.startswith("s1-t1-") and plan.create_run.name != "s1-t1"
    assert plan.consume == {"b": plan.create_run.name}
    assert decide(session(), inputs, [first]).create_run == plan.create_run  # deterministic
    # Once created, a repeated pass finds it (crash before consume) and creates nothing more.
    created = run(plan.create_run.name, 1, "Succeeded", ["b"])
    created["metadata"]["labels"]["sessionops.dev/claimed-at"] = "2"
    replay = decide(session(), inputs, [first, created])
    assert replay.create_run is None and replay.consume == {"b": plan.create_run.name}
    # The later of the two turns decides whether the queue is paused.
    created["status"]["phase"] = "Failed"
    assert decide(session(), [inputs[0], {**again, "status": {"phase": "Consumed"}}], [created, first]
                  ).status["queue"]["paused"]

"""The conditions helper by the API conventions, and the run's phase conditions."""

from __future__ import annotations

import datetime

import pytest

from sessionops.api.conditions import MESSAGE_MAX, condition, find, set_conditions, updated
from sessionops.api.run_conditions import phase_conditions, with_phase

T0 = datetime.datetime(2026, 12, 3, 10, 0, tzinfo=datetime.UTC)
T1 = T0 + datetime.timedelta(minutes=5)


def test_a_new_condition_is_stamped_with_the_time_and_generation() -> None:
    [cond] = set_conditions([], [condition("Ready", True, "PodRunning", "ok")], generation=3, now=T0)
    assert cond == {"type": "Ready", "status": "True", "reason": "PodRunning", "message": "ok",
                    "lastTransitionTime": "2026-12-03T10:00:00Z", "observedGeneration": 3}


def test_the_transition_time_is_kept_while_the_status_stays_even_if_the_reason_changes() -> None:
    first = set_conditions([], [condition("Ready", False, "PodPending")], generation=1, now=T0)
    second = set_conditions(first, [condition("Ready", False, "CreateContainerConfigError", "secret gone")],
                            generation=2, now=T1)
    assert second[0]["lastTransitionTime"] == "2026-12-03T10:00:00Z"
    assert (second[0]["reason"], second[0]["observedGeneration"]) == ("CreateContainerConfigError", 2)


def test_a_status_change_moves_the_transition_time() -> None:
    first = set_conditions([], [condition("Ready", False, "PodPending")], generation=1, now=T0)
    second = set_conditions(first, [condition("Ready", True, "PodRunning")], generation=1, now=T1)
    assert second[0]["lastTransitionTime"] == "2026-12-03T10:05:00Z"


def test_unchanged_conditions_come_back_equal_so_a_no_op_write_can_be_skipped() -> None:
    wanted = [condition("Ready", True, "A"), condition("Paused", False, "B")]
    first = set_conditions([], wanted, generation=1, now=T0)
    assert set_conditions(first, wanted, generation=1, now=T1) == first


def test_other_types_stay_as_stored_and_order_is_kept() -> None:
    stored = [{"type": "CleanupFailed", "status": "True", "reason": "Step2Failed", "message": "x",
               "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    result = set_conditions(stored, [condition("Ready", True, "Ok")], generation=None, now=T0)
    assert [c["type"] for c in result] == ["CleanupFailed", "Ready"] and result[0] == stored[0]
    assert "observedGeneration" not in result[1]


def test_bad_conditions_are_refused_and_long_messages_bounded() -> None:
    with pytest.raises(ValueError, match="status must be True, False or Unknown"):
        condition("Ready", "yes", "Why")
    with pytest.raises(ValueError, match="a reason is required"):
        condition("Ready", True, "")
    assert len(condition("Ready", False, "Long", "x" * 5000)["message"]) == MESSAGE_MAX


def test_updated_reads_the_objects_conditions_and_generation() -> None:
    obj = {"metadata": {"generation": 7}, "status": {"conditions": []}}
    assert updated(obj, [condition("Ready", True, "Ok")], T0)[0]["observedGeneration"] == 7


@pytest.mark.parametrize("phase", ["Succeeded", "Failed", "Waiting", "Cancelled"])
def test_exactly_the_phase_condition_is_true(phase: str) -> None:
    conds = {c["type"]: c for c in phase_conditions(phase, reason="Why", message="m")}
    assert {t for t, c in conds.items() if c["status"] == "True"} == {phase}
    assert (conds[phase]["reason"], conds[phase]["message"]) == ("Why", "m")
    assert all(c["reason"] == phase for t, c in conds.items() if t != phase)


def test_a_phase_write_carries_ready_unless_the_pod_state_is_given() -> None:
    run = {"metadata": {"generation": 1}, "status": {}}
    running = with_phase(run, {"phase": "Running"}, T0)
    assert find(running["conditions"], "Ready")["status"] == "True"
    pending = with_phase(run, {"phase": "Pending"}, T0,
                         extra=[condition("Ready", False, "ErrImagePull", "pull access denied")])
    ready = [c for c in pending["conditions"] if c["type"] == "Ready"]
    assert len(ready) == 1 and ready[0]["reason"] == "ErrImagePull"
    done = with_phase({"metadata": {}, "status": {"conditions": running["conditions"]}}, {"phase": "Succeeded"}, T1)
    assert find(done["conditions"], "Ready")["status"] == "False"
    assert find(done["conditions"], "Succeeded")["lastTransitionTime"] == "2026-12-03T10:05:00Z"
    assert find(done["conditions"], "Failed")["lastTransitionTime"] == "2026-12-03T10:00:00Z"

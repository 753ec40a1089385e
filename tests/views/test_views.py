"""The views read the fields the API models define, by their wire names, and read them as
the controllers did on raw dicts (missing, null and empty steps give the default)."""

from __future__ import annotations

from typing import Any

import pytest

from sessionops.api.input import AgentInput
from sessionops.api.run import AgentRun
from sessionops.api.session import AgentSession
from sessionops.api.transcript import AgentTranscript
from sessionops.views import InputView, RunView, SessionView
from sessionops.views.fields import Field, View
from sessionops.views.transcript import ChunkView, steps_in_order

# The ObjectMeta fields a view may read: the models leave metadata to the API server.
METADATA = {"name", "namespace", "uid", "generation", "resourceVersion", "labels", "annotations",
            "finalizers", "deletionTimestamp", "creationTimestamp", "ownerReferences"}


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """Follow ``$ref`` and the non-null branch of an optional field."""
    while True:
        if "$ref" in schema:
            schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
        elif "anyOf" in schema:
            schema = next(s for s in schema["anyOf"] if s.get("type") != "null")
        else:
            return schema


def missing_step(model: type, path: tuple[str, ...]) -> str | None:
    """The first step of ``path`` the model's JSON schema (by alias) does not define, or None."""
    root = model.model_json_schema(by_alias=True)
    if path[0] == "metadata":
        return None if len(path) == 2 and path[1] in METADATA else ".".join(path)
    schema = root
    for i, key in enumerate(path):
        properties = _resolve(schema, root).get("properties") or {}
        if key not in properties:
            return ".".join(path[:i + 1])
        schema = properties[key]
    return None


@pytest.mark.parametrize(("view", "model"), [(RunView, AgentRun), (SessionView, AgentSession),
                                             (InputView, AgentInput), (ChunkView, AgentTranscript)])
def test_every_field_a_view_reads_exists_in_its_model(view: type[View], model: type) -> None:
    fields = view.fields()
    assert len(fields) > 5
    assert {name: missing_step(model, f.path) for name, f in fields.items()
            if missing_step(model, f.path)} == {}


def test_a_renamed_field_is_caught() -> None:
    class Renamed(RunView):
        __slots__ = ()
        phase_typo: Field[str | None] = Field("status", "phaze", default=None)
        deep_typo: Field[str | None] = Field("status", "waitpoint", "kinds", default=None)
        meta_typo: Field[str | None] = Field("metadata", "lables", default=None)

    fields = Renamed.fields()
    assert missing_step(AgentRun, fields["phase_typo"].path) == "status.phaze"
    assert missing_step(AgentRun, fields["deep_typo"].path) == "status.waitpoint.kinds"
    assert missing_step(AgentRun, fields["meta_typo"].path) == "metadata.lables"
    assert missing_step(AgentRun, fields["session_name"].path) is None


@pytest.mark.parametrize("raw", [{}, {"status": None}, {"status": {}}, {"status": {"phase": None}},
                                 {"status": {"phase": ""}}])
def test_missing_null_or_empty_steps_read_as_the_default(raw: dict[str, Any]) -> None:
    view = RunView(raw)
    assert view.stored_phase is None
    assert view.phase == "Pending"
    assert view.segments == ()
    assert view.last_segment is None
    assert view.waitpoint_kind is None
    assert not view.cancel_requested


def test_views_read_the_dict_itself() -> None:
    segment = {"name": "s-t1-1", "kind": "Start", "job": "s-t1-1"}
    raw = {"metadata": {"name": "s-t1", "labels": {"sessionops.dev/sequence": "3"},
                        "deletionTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"sessionRef": {"name": "s"}, "cancel": True, "contextSnapshot": {"model": "m"}},
           "status": {"phase": "Waiting", "segments": [segment],
                      "waitpoint": {"id": "w1", "kind": "Question"}, "cancellation": {"completedSteps": ["a"]}}}
    run = RunView(raw)
    assert (run.name, run.session_name, run.phase, run.model) == ("s-t1", "s", "Waiting", "m")
    assert run.last_segment is segment
    assert run.waitpoint is raw["status"]["waitpoint"]
    assert (run.waitpoint_id, run.waitpoint_kind, run.completed_steps) == ("w1", "Question", ["a"])
    assert run.cancel_requested and run.deleting and not run.terminal
    assert run.sequence == 3 and run.claimed_at == 3


def test_session_and_input_views() -> None:
    session = SessionView({"status": {"activeRun": "s-t2", "lastSequence": 7,
                                      "queue": {"paused": True, "heldBack": "full"}}})
    assert (session.active_run, session.last_sequence, session.paused, session.held_back) == ("s-t2", 7, True, "full")
    assert SessionView({}).last_sequence == 0 and not SessionView({}).paused
    inp = InputView({"metadata": {"name": "i"}, "spec": {"sequence": 4, "run": "s-t1", "waitpointId": "w"}})
    assert (inp.kind, inp.sequence, inp.resume_run, inp.waitpoint_id, inp.phase) == ("Message", 4, "s-t1", "w",
                                                                                      "Pending")
    assert inp.pending
    assert not InputView({"status": {"phase": "Consumed", "run": "s-t1"}}).pending
    assert not InputView({"metadata": {"deletionTimestamp": "x"}}).pending
    assert InputView({"status": {"phase": "Consumed", "run": "s-t1"}}).consumed_by == "s-t1"


def test_transcript_steps_read_in_chunk_order() -> None:
    chunks = [{"spec": {"index": 1, "steps": [{"n": 3}]}}, {"spec": {"index": 0, "steps": [{"n": 1}, {"n": 2}]}},
              {"spec": {"index": 2}}]
    assert [s["n"] for s in steps_in_order(chunks)] == [1, 2, 3]

"""The cancelled calls as transcript steps (pure): what cleanup closed, once, in the bound."""

from __future__ import annotations

import copy
import datetime
from unittest import mock

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from sessionops.api.transcript import CHUNK_BYTES_MAX, chunks
from sessionops.cancellation.cleanup import CANCEL_CONTENT, cancel_message_id, cancelled_call_ids
from sessionops.cancellation.reconcile import record_cancelled
from sessionops.cancellation.transcript import cancelled_steps, chunk_writes
from sessionops.worker import transcript as worker_transcript

AT = "2026-12-03T12:00:00.000Z"


def call(tcid: str, tool: str = "run_shell", kind: str = "ToolCall", **extra: object) -> dict:
    return {"id": f"call:{tcid}", "kind": kind, "tool": tool, "toolCallId": tcid, "at": AT, "segment": "r-1",
            **extra}


def result(tcid: str, tool: str = "write_file") -> dict:
    return {"id": f"result:{tcid}", "kind": "ToolResult", "tool": tool, "toolCallId": tcid, "status": "success",
            "at": AT, "segment": "r-1"}


def test_the_closed_calls_get_a_cancelled_result_in_call_order() -> None:
    published = [call("c1", "write_file"), call("c2"), call("c3", "ask_user", kind="Question"),
                 call("c4", "delegate", args={"name": "helper", "message": "go"}), result("c1")]
    new = cancelled_steps(published, {"c2", "c3", "c4", "other-turn"}, text=CANCEL_CONTENT, segment="r-2", at=AT)
    assert new == [
        {"id": "result:c2", "kind": "ToolResult", "tool": "run_shell", "toolCallId": "c2", "status": "cancelled",
         "text": CANCEL_CONTENT, "at": AT, "segment": "r-2"},
        {"id": "result:c3", "kind": "ToolResult", "tool": "ask_user", "toolCallId": "c3", "status": "cancelled",
         "text": CANCEL_CONTENT, "at": AT, "segment": "r-2"},
        {"id": "result:c4", "kind": "Child", "tool": "delegate", "toolCallId": "c4", "status": "cancelled",
         "text": CANCEL_CONTENT, "at": AT, "segment": "r-2", "args": {"name": "helper", "message": "go"}},
    ]


def test_repeating_adds_nothing_and_a_call_with_a_result_is_never_cancelled() -> None:
    published = [call("c1", "write_file"), result("c1"), call("c2")]
    first = cancelled_steps(published, {"c1", "c2"}, text=CANCEL_CONTENT, segment="r-1", at=AT)
    assert [s["id"] for s in first] == ["result:c2"]
    assert cancelled_steps([*published, *first], {"c1", "c2"}, text=CANCEL_CONTENT, segment="r-1", at=AT) == []


def test_the_steps_are_what_the_worker_would_have_published() -> None:
    """Same id, kind, status and text as the worker's projection of the cancellation result."""
    messages = [HumanMessage("go", id="input:u:0"),
                AIMessage("", id="ai-1", tool_calls=[{"name": "run_shell", "args": {"command": "ls"}, "id": "c1"}]),
                ToolMessage(CANCEL_CONTENT, status="error", tool_call_id="c1", name="run_shell",
                            id=cancel_message_id("ai-1", "c1"))]
    projected = worker_transcript.project(messages, result_max=1024)
    assert cancelled_call_ids(messages) == ["c1"]
    [ours] = cancelled_steps(projected[:3], {"c1"}, text=CANCEL_CONTENT, segment=None, at=AT)
    assert {k: v for k, v in ours.items() if k != "at"} == projected[3]


def test_only_changed_chunks_are_written_and_a_retry_writes_the_rest() -> None:
    big = "x" * 100_000
    published = [call(f"c{i}", args={"content": big}) for i in range(5)]
    stored = [{"spec": {"index": i, "steps": part}} for i, part in enumerate(chunks(published))]
    new = cancelled_steps(published, {f"c{i}" for i in range(5)}, text=CANCEL_CONTENT, segment="r-1", at=AT)
    writes = chunk_writes(stored, new)
    assert [i for i, _ in writes] == [len(stored) - 1]  # the open chunk takes the small results
    assert all(len(str(steps)) < CHUNK_BYTES_MAX for _, steps in writes)
    # A full last chunk: the results open a new one; after that write, nothing is left to write.
    full = [call(f"d{i}", args={"content": "y" * 120_000}) for i in range(2)]
    stored = [{"spec": {"index": 0, "steps": full}}]
    new = cancelled_steps(full, {"d0", "d1"}, text=CANCEL_CONTENT + " " + "z" * 20_000, segment="r-1", at=AT)
    writes = chunk_writes(stored, new)
    assert [i for i, _ in writes] == [1]
    stored.append({"spec": {"index": 1, "steps": writes[0][1]}})
    assert chunk_writes(stored, []) == []


class FakeKube:
    """The chunks of one run as the API server keeps them: resourceVersions checked on patch."""

    def __init__(self, chunks_: list[list[dict]]) -> None:
        self.objects = {f"r-t{i}": {"metadata": {"name": f"r-t{i}", "resourceVersion": "1"},
                                    "spec": {"run": "r", "session": "s", "index": i, "steps": steps}}
                        for i, steps in enumerate(chunks_)}
        self.writes: list[tuple[str, str]] = []

    async def list(self, plural: str, namespace: str, label_selector: str = "") -> list[dict]:
        assert (plural, label_selector) == ("agenttranscripts", "sessionops.dev/run=r")
        return copy.deepcopy(list(self.objects.values()))

    async def patch(self, plural: str, namespace: str, name: str, body: dict) -> dict:
        obj = self.objects[name]
        assert body["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
        obj["spec"]["steps"] = body["spec"]["steps"]
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
        self.writes.append(("patch", name))
        return obj

    async def create(self, plural: str, namespace: str, body: dict) -> dict:
        assert body["metadata"]["name"] not in self.objects
        assert body["metadata"]["ownerReferences"][0]["uid"] == "uid-r"
        self.objects[body["metadata"]["name"]] = {**body, "metadata": {**body["metadata"], "resourceVersion": "1"}}
        self.writes.append(("create", body["metadata"]["name"]))
        return body


RUN = {"metadata": {"namespace": "ns", "name": "r", "uid": "uid-r"}, "spec": {"sessionRef": {"name": "s"}},
       "status": {"segments": [{"name": "r-1"}, {"name": "r-2"}]}}
NOW = datetime.datetime(2026, 12, 3, 12, 0, 0, 250_000, tzinfo=datetime.UTC)


async def test_record_cancelled_appends_once_and_a_repeat_writes_nothing() -> None:
    kube = FakeKube([[call("c1", "write_file"), result("c1"), call("c2")]])
    assert await record_cancelled(kube, RUN, ["c0-earlier-turn", "c2"], NOW) == 1
    assert kube.writes == [("patch", "r-t0")]
    [added] = kube.objects["r-t0"]["spec"]["steps"][3:]
    assert (added["id"], added["status"], added["segment"], added["at"]) == (
        "result:c2", "cancelled", "r-2", "2026-12-03T12:00:00.250Z")
    assert await record_cancelled(kube, RUN, ["c0-earlier-turn", "c2"], NOW) == 0  # a retried cleanup
    assert kube.writes == [("patch", "r-t0")]
    assert await record_cancelled(kube, RUN, [], NOW) == 0


async def test_record_cancelled_opens_the_next_chunk_when_the_last_is_full() -> None:
    full = [call(f"d{i}", args={"content": "y" * 120_000}) for i in range(2)]
    kube = FakeKube([full])
    long_run = {**RUN, "status": {"segments": [{"name": "r-1"}]}}
    with mock.patch("sessionops.cancellation.reconcile.CANCEL_CONTENT", "cancelled " + "z" * 20_000):
        assert await record_cancelled(kube, long_run, ["d0", "d1"], NOW) == 2
    assert kube.writes == [("create", "r-t1")]
    assert [s["id"] for s in kube.objects["r-t1"]["spec"]["steps"]] == ["result:d0", "result:d1"]
    assert kube.objects["r-t1"]["metadata"]["labels"] == {"sessionops.dev/session": "s", "sessionops.dev/run": "r"}

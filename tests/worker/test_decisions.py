"""The worker's pure decisions: environment, segment plan, verdict and status patch, Lease
state, and the SubjectAccessReview mapping."""

from __future__ import annotations

import collections
import datetime
import threading
from pathlib import Path

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver

from sessionops.agent import build_agent
from sessionops.agent.limits import step_limit_message
from sessionops.api.input import SubmittedBy
from sessionops.api.run import RESULT_TEXT_MAX, Waitpoint
from sessionops.api.snapshot import BUILTIN_TOOLS, ContextSnapshot, SnapshotSource
from sessionops.views.lease import Holder, LeaseView
from sessionops.worker import outcome, plan
from sessionops.worker.access import (
    Access,
    agent_check,
    review_spec,
    skill_check,
    subjects_of,
    tool_check,
    up_front_checks,
)
from sessionops.worker.env import EnvError, WorkerEnv
from sessionops.worker.segment import Segment
from tests.agent.scripted import ScriptedChatModel

NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
ENV = {"SESSIONOPS_NAMESPACE": "team-a", "SESSIONOPS_RUN": "s1-t1", "SESSIONOPS_SEGMENT": "2",
       "SESSIONOPS_SEGMENT_KIND": "Retry", "SESSIONOPS_TOOLS_SOCKET": "/run/sessionops-tools/tools.sock",
       "SESSIONOPS_MODEL_NAME": "replay/hello", "SESSIONOPS_MODEL_PROVIDER": "replay",
       "SESSIONOPS_MODEL_ID": "hello", "SESSIONOPS_MODEL_ENDPOINT": "http://replay/v1", "HOSTNAME": "s1-t1-2-abcde"}
DSN = "postgresql://worker:db-password@db/x"


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    """The Job's environment, with the credentials as mounted files (as the kubelet writes them)."""
    (tmp_path / "dsn").write_text(DSN + "\n")
    (tmp_path / "api-key").write_text("sk-secret")
    for f in ("dsn", "api-key"):
        (tmp_path / f).chmod(0o400)
    return {**ENV, "SESSIONOPS_DATABASE_URL_FILE": str(tmp_path / "dsn"),
            "SESSIONOPS_MODEL_API_KEY_FILE": str(tmp_path / "api-key")}


def inp(name: str, uid: str, sequence: int, *texts: str, delivery: str = "FollowUp", phase: str | None = None,
        run: str | None = None, kind: str = "Message") -> dict:
    status = {k: v for k, v in (("phase", phase), ("run", run)) if v}
    return {"metadata": {"name": name, "uid": uid}, "status": status,
            "spec": {"kind": kind, "delivery": delivery, "sequence": sequence,
                     "messages": [{"content": t} for t in texts]}}


# Environment.
def test_the_job_environment_parses_with_secrets_read_from_files_and_kept_out_of_repr(environ: dict) -> None:
    env = WorkerEnv.from_environ(environ)
    assert (env.segment_name, env.kind, env.lease_seconds, env.lease_wait_seconds) == ("s1-t1-2", "Retry", 30, 60)
    assert env.model is not None and env.model.model_id == "hello" and env.model.api_key == "sk-secret"
    assert env.database_url == DSN  # the file's trailing newline is not part of it
    assert "sk-secret" not in repr(env) and "db-password" not in repr(env) and "postgresql" not in repr(env)


def test_credentials_in_the_environment_are_not_read(environ: dict) -> None:
    """Only files count: a DSN or key in env (which tools would inherit) is never used."""
    leaked = {k: v for k, v in environ.items() if not k.endswith("_FILE")}
    leaked.update(DATABASE_URL=DSN, SESSIONOPS_MODEL_API_KEY="sk-secret")
    with pytest.raises(EnvError, match="SESSIONOPS_DATABASE_URL_FILE is not set"):
        WorkerEnv.from_environ(leaked)
    leaked["SESSIONOPS_DATABASE_URL_FILE"] = environ["SESSIONOPS_DATABASE_URL_FILE"]
    env = WorkerEnv.from_environ(leaked)
    assert env.model is not None and env.model.api_key is None


@pytest.mark.parametrize("variable", ["SESSIONOPS_DATABASE_URL_FILE", "SESSIONOPS_MODEL_API_KEY_FILE"])
@pytest.mark.parametrize("problem, error", [("missing", "No such file or directory"), ("empty", "is empty"),
                                            ("directory", "Is a directory")])
def test_an_unreadable_credential_file_names_the_variable_and_path_never_a_value(
        environ: dict, tmp_path: Path, variable: str, problem: str, error: str) -> None:
    path = tmp_path / "broken"
    if problem == "empty":
        path.write_text("\n")
    elif problem == "directory":
        path.mkdir()
    with pytest.raises(EnvError) as raised:
        WorkerEnv.from_environ({**environ, variable: str(path)})
    assert str(raised.value).startswith(f"{variable}: ") and str(path) in str(raised.value)
    assert error in str(raised.value)
    assert "sk-secret" not in str(raised.value) and "db-password" not in str(raised.value)


@pytest.mark.parametrize("change, error", [
    ({"SESSIONOPS_RUN": ""}, "SESSIONOPS_RUN is not set"),
    ({"SESSIONOPS_SEGMENT_KIND": "Again"}, "must be Start, Resume or Retry"),
    ({"SESSIONOPS_LEASE_SECONDS": "soon"}, "SESSIONOPS_LEASE_SECONDS is not a valid int"),
])
def test_a_broken_job_environment_names_the_variable(environ: dict, change: dict, error: str) -> None:
    with pytest.raises(EnvError, match=error):
        WorkerEnv.from_environ({**environ, **change})


def test_a_resume_segment_without_an_input_is_a_delegation_resume(environ: dict) -> None:
    env = WorkerEnv.from_environ({**environ, "SESSIONOPS_SEGMENT_KIND": "Resume"})
    assert (env.kind, env.resume_input) == ("Resume", None)


def test_a_model_missing_from_the_catalog_leaves_no_model_env(environ: dict) -> None:
    env = {k: v for k, v in environ.items() if not k.startswith("SESSIONOPS_MODEL")}
    assert WorkerEnv.from_environ(env).model is None


# Plan.
def test_start_messages_follow_input_order_with_ids_from_input_uids() -> None:
    messages = plan.start_messages([inp("b", "u2", 2, "third"), inp("a", "u1", 1, "first", "second")])
    assert [(m.id, m.content) for m in messages] == [
        ("input:u1:0", "first"), ("input:u1:1", "second"), ("input:u2:0", "third")]


def test_steer_candidates_are_pending_or_claimed_by_this_run_in_sequence_order() -> None:
    inputs = [
        inp("own", "u0", 1, "start", delivery="Steer", phase="Consumed", run="r1"),
        inp("late", "u3", 4, "later", delivery="Steer"),
        inp("claimed", "u2", 3, "again", delivery="Steer", phase="Consumed", run="r1"),
        inp("other-run", "u4", 5, "no", delivery="Steer", phase="Consumed", run="r0"),
        inp("follow-up", "u5", 2, "no"),
        inp("resume", "u6", 6, kind="Resume"),
        inp("cancelled", "u7", 7, "no", delivery="Steer", phase="Cancelled"),
    ]
    found = plan.steer_candidates(inputs, "r1", exclude=["own"])
    assert [i["metadata"]["name"] for i in found] == ["claimed", "late"]


@pytest.mark.parametrize("kind, started, has_next, waitpoint, resume_for, expected", [
    ("Start", False, False, None, None, plan.Action.START),
    ("Retry", False, False, None, None, plan.Action.START),
    ("Start", True, True, None, None, plan.Action.CONTINUE),
    ("Retry", True, True, None, None, plan.Action.CONTINUE),
    ("Retry", True, False, None, None, plan.Action.REPORT),
    ("Retry", True, True, "wp-1", "wp-1", plan.Action.RESUME),
    ("Retry", True, True, "wp-2", "wp-1", plan.Action.CONTINUE),
    ("Resume", True, True, "wp-1", "wp-1", plan.Action.RESUME),
    ("Resume", True, True, "wp-2", "wp-1", plan.Action.RESUME),
])
def test_segment_plan(kind: str, started: bool, has_next: bool, waitpoint: str | None, resume_for: str | None,
                      expected: plan.Action) -> None:
    resume = {"metadata": {"name": "r"}, "spec": {"waitpointId": resume_for}} if resume_for else None
    step = plan.plan_segment(kind, turn_started=started, has_next=has_next, waitpoint_id=waitpoint,
                             resume_input=resume)
    assert step.action == expected


def test_a_retry_looks_for_the_latest_resume_input() -> None:
    segments = [{"kind": "Start"}, {"kind": "Resume", "input": "r1"}, {"kind": "Resume", "input": "r2"},
                {"kind": "Retry"}]
    assert plan.last_resume_input(segments) == "r2"
    assert plan.last_resume_input([{"kind": "Start"}]) is None


# Verdict and status.
def test_the_verdict_of_an_answered_turn_is_succeeded_with_bounded_text() -> None:
    verdict = outcome.verdict_of([HumanMessage("q"), AIMessage("x" * (RESULT_TEXT_MAX + 10))], None,
                                 has_next=False, max_steps=5)
    assert verdict is not None and verdict.phase == "Succeeded" and len(verdict.text or "") == RESULT_TEXT_MAX


def test_the_step_limit_message_is_a_failed_verdict() -> None:
    verdict = outcome.verdict_of([HumanMessage("q"), AIMessage(step_limit_message(3))], None,
                                 has_next=False, max_steps=3)
    assert verdict is not None and (verdict.phase, verdict.reason) == ("Failed", "StepLimit")


def test_pending_tasks_without_an_interrupt_are_no_verdict() -> None:
    assert outcome.verdict_of([HumanMessage("q")], None, has_next=True, max_steps=3) is None
    assert outcome.verdict_of([AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c1"}])], None,
                              has_next=False, max_steps=3) is None


def test_usage_counts_the_ai_messages_of_this_turn_only() -> None:
    def ai(i: int, o: int) -> AIMessage:
        return AIMessage("a", usage_metadata={"input_tokens": i, "output_tokens": o, "total_tokens": i + o})

    messages = [HumanMessage("old", id="input:u0:0"), ai(100, 100), HumanMessage("new", id="input:u1:0"),
                ai(10, 1), ToolMessage("r", tool_call_id="c"), ai(20, 2)]
    usage = outcome.usage_of(outcome.turn_messages(messages, {"input:u1:0"}))
    assert (usage.input_tokens, usage.output_tokens) == (30, 3)


def test_status_patches_carry_absolute_values_and_keep_condition_times() -> None:
    run = {"metadata": {"generation": 1}, "status": {"usage": {"inputTokens": 50, "outputTokens": 5}, "conditions": [
        {"type": "Failed", "status": "True", "reason": "ModelError", "lastTransitionTime": "2025-01-01T00:00:00Z"},
        {"type": "Other", "status": "True"}]}}
    waiting = outcome.status_patch(outcome.Verdict("Waiting", waitpoint=Waitpoint(id="wp-1", kind="Question")),
                                   run=run, segment="s1-t1-2", usage=outcome.usage_of([]), now=NOW)
    conds = {c["type"]: c for c in waiting.pop("conditions")}
    assert waiting == {"phase": "Waiting", "waitpoint": {"id": "wp-1", "kind": "Question", "calls": [],
                                                         "questions": [], "children": []},
                       "usage": {"inputTokens": 50, "outputTokens": 5}}
    assert (conds["Waiting"]["status"], conds["Waiting"]["reason"]) == ("True", "Question")
    assert conds["Failed"]["status"] == "False" and conds["Other"] == {"type": "Other", "status": "True"}
    succeeded = outcome.status_patch(outcome.Verdict("Succeeded", text="done"), run=run, segment="s1-t1-2",
                                     usage=None, now=NOW)
    conds = {c["type"]: c for c in succeeded.pop("conditions")}
    assert succeeded == {"phase": "Succeeded", "waitpoint": None, "result": {"text": "done", "segment": "s1-t1-2"}}
    assert conds["Succeeded"]["status"] == "True" and conds["Ready"]["status"] == "False"
    failed = outcome.status_patch(outcome.failed("StepLimit", "too many"), run=run, segment="s1-t1-2",
                                  usage=None, now=NOW)
    assert failed["conditions"][:2] == [
        {"type": "Failed", "status": "True", "reason": "StepLimit", "message": "segment s1-t1-2: too many",
         "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": 1},
        {"type": "Other", "status": "True"}]


# Lease.
@pytest.mark.parametrize("spec, expected", [
    ({}, Holder.FREE),
    ({"holderIdentity": "pod:me", "renewTime": "2026-01-01T11:59:50.000000Z", "leaseDurationSeconds": 30},
     Holder.OURS),
    ({"holderIdentity": "pod:other", "renewTime": "2026-01-01T11:59:50.000000Z", "leaseDurationSeconds": 30},
     Holder.OTHER),
    ({"holderIdentity": "pod:other", "renewTime": "2026-01-01T11:59:00.000000Z", "leaseDurationSeconds": 30},
     Holder.FREE),
    ({"holderIdentity": None, "renewTime": "2026-01-01T11:59:59.000000Z", "leaseDurationSeconds": 30},
     Holder.FREE),
])
def test_lease_holder_state(spec: dict, expected: Holder) -> None:
    assert LeaseView.of({"spec": spec}).holder_state("pod:me", NOW) is expected


# Access.
def test_access_checks_map_to_subject_access_reviews() -> None:
    subject = SubmittedBy(username="alice", uid="u1", groups=["devs"], extra={"scopes": ["a"]})
    assert review_spec(subject, "team-a", tool_check("run_shell")) == {
        "user": "alice", "uid": "u1", "groups": ["devs"], "extra": {"scopes": ["a"]},
        "resourceAttributes": {"namespace": "team-a", "verb": "use", "group": "sessionops.dev",
                               "resource": "tools", "name": "run_shell"}}
    assert (agent_check("helper").verb, agent_check("helper").resource) == ("get", "agents")
    assert (tool_check("github__search").resource, tool_check("github__search").name) == ("mcpservers", "github")
    assert skill_check("style").resource == "skills"


class FakeReviews:
    def __init__(self, denied: set[tuple[str, str]], barrier: threading.Barrier | None = None) -> None:
        self.denied = denied
        self.barrier = barrier
        self.asked: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def access_review(self, spec: dict) -> tuple[bool, str]:
        key = (spec["user"], spec["resourceAttributes"]["name"])
        with self._lock:
            self.asked.append(key)
        if self.barrier is not None:
            self.barrier.wait()  # returns only once `parties` reviews are in flight together
        return key not in self.denied, "denied by policy" if key in self.denied else ""


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _alice_and_bob() -> list[SubmittedBy | None]:
    return subjects_of([{"spec": {"submittedBy": {"username": "alice"}}},
                        {"spec": {"submittedBy": {"username": "bob"}}},
                        {"spec": {"submittedBy": {"username": "alice"}}}])


def test_every_identity_of_the_turn_must_be_allowed_and_answers_are_cached() -> None:
    reviews = FakeReviews({("bob", "run_shell")})
    access = Access(reviews, "team-a", _alice_and_bob())  # type: ignore[arg-type]
    assert access.tool_filter(["read_file", "run_shell"]) == {"read_file"}
    assert access.tool_filter(["run_shell"]) == set()  # refused at the call boundary too
    assert access.review(tool_check("run_shell")) == (False, "bob may not use tools.sessionops.dev 'run_shell': "
                                                             "denied by policy")
    access.tool_filter(["read_file"])
    assert sorted(reviews.asked) == [("alice", "read_file"), ("alice", "run_shell"), ("bob", "read_file"),
                                     ("bob", "run_shell")]


def test_a_segment_reviews_each_identity_and_check_once_within_the_ttl_then_again_together() -> None:
    reviews = FakeReviews({("alice", "run_shell")})
    clock = Clock()
    access = Access(reviews, "team-a", _alice_and_bob(), ttl=30, clock=clock)  # type: ignore[arg-type]
    snapshot = ContextSnapshot(system_prompt="s", model="m", approval_mode="Default",
                               source=SnapshotSource(agent_name="helper"), skills=["style"])
    access.answers(up_front_checks(snapshot))
    assert sorted(reviews.asked) == sorted((user, name) for user in ("alice", "bob")
                                           for name in ["helper", *BUILTIN_TOOLS, "style"])
    # What a segment asks next: the Agent, the skills once, the tools at every model and tool call.
    asked = len(reviews.asked)
    assert access.allowed(agent_check("helper"))
    assert access.visible_skills({"style": "Be brief."}) == {"style": "Be brief."}
    for _ in range(3):
        clock.now += 9
        assert access.tool_filter(BUILTIN_TOOLS) == set(BUILTIN_TOOLS) - {"run_shell"}
        assert access.tool_filter(["run_shell"]) == set()
    assert len(reviews.asked) == asked, "an answer within the ttl was asked for again"

    clock.now += 9  # 36 s: every answer is stale; a model call asks for its tools again, once each
    access.tool_filter(BUILTIN_TOOLS)
    access.tool_filter(["read_file"])
    again = collections.Counter(reviews.asked[asked:])
    assert again == collections.Counter((user, name) for user in ("alice", "bob") for name in BUILTIN_TOOLS)


def test_the_reviews_asked_together_are_in_flight_at_once() -> None:
    # Four identity-check pairs: a barrier of four lets a review return only once all four are
    # in flight; reviews asked one after the other break the barrier (its timeout) and fail.
    reviews = FakeReviews(set(), barrier=threading.Barrier(4, timeout=20))
    access = Access(reviews, "team-a", _alice_and_bob())  # type: ignore[arg-type]
    assert access.tool_filter(["read_file", "write_file"]) == {"read_file", "write_file"}
    assert len(reviews.asked) == 4


def test_an_input_without_submitter_grants_nothing() -> None:
    access = Access(FakeReviews(set()), "team-a", subjects_of([{"spec": {}}]))  # type: ignore[arg-type]
    allowed, why = access.review(agent_check("helper"))
    assert not allowed and "submittedBy" in why


# Failure classification, on a real graph.
def test_a_tool_that_raises_fails_the_turn_with_tool_error(tmp_path: Path) -> None:
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("the disk is on fire")

    snapshot = ContextSnapshot(system_prompt="s", model="m", approval_mode="AlwaysTrust")
    graph = build_agent(snapshot, model=ScriptedChatModel(script=[[("explode", {})], "done"]), workdir=tmp_path,
                        checkpointer=InMemorySaver(), extra_tools=[StructuredTool.from_function(explode)])
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(RuntimeError) as raised:
        graph.invoke({"messages": [HumanMessage("go")]}, config, durability="sync")

    verdict = Segment._task_failure(graph, config, raised.value)
    assert verdict is not None and (verdict.reason, verdict.message) == ("ToolError", "RuntimeError: the disk is on fire")
    assert Segment._task_failure(graph, config, psycopg.OperationalError("db down")) is None


def test_outcomes_are_delivered_by_a_delegation_resume_or_the_retry_of_a_lost_one() -> None:
    resume, cont = plan.SegmentPlan(plan.Action.RESUME), plan.SegmentPlan(plan.Action.CONTINUE)
    start = {"kind": "Start", "outcome": "Waiting"}
    delegation_resume = {"kind": "Resume", "outcome": "Lost"}
    answer = {"kind": "Resume", "input": "s1-i2", "outcome": "Lost"}
    retry = {"kind": "Retry"}
    assert plan.delivers_outcomes(resume, None, [start, delegation_resume])
    assert plan.delivers_outcomes(cont, None, [start, delegation_resume, retry, retry])
    assert not plan.delivers_outcomes(cont, None, [start, retry])  # lost before it waited: wait again
    assert not plan.delivers_outcomes(cont, None, [start, answer, retry])
    assert not plan.delivers_outcomes(resume, {"metadata": {"name": "s1-i2"}}, [start, answer])
    assert not plan.delivers_outcomes(plan.SegmentPlan(plan.Action.START), None, [delegation_resume])

"""One execution segment, start to exit: the worker's orchestration.

1. Load the run; a cancelled or finished run needs nothing (exit 0).
2. Take the session Lease (one writer per thread); renew it in the background.
3. Re-check access for the turn's identities: a denied Agent fails the run before any
   model call (``AccessRevoked``), also on Resume (the approved call never runs).
4. Mark the run Running; build the agent from the run's frozen ``spec.contextSnapshot``
   with the PostgreSQL checkpointer (``thread_id`` = session uid, ``durability="sync"``).
5. Start / Resume / Continue the thread (``plan``), then report the verdict (``outcome``)
   with a compare-and-swap that never overwrites a cancel.

Exit codes: 0 when a verdict was written (Failed included) or nothing was to be done;
non-zero on infrastructure trouble, so the operator retries from the checkpoint:
``EXIT_ERROR`` (unexpected: API server, database, a bug), ``EXIT_CONFIG`` (the Job's
environment is broken), ``EXIT_LEASE_BUSY`` (another live writer kept the Lease),
``EXIT_LEASE_LOST`` (the Lease was lost mid-turn), ``EXIT_TOOLS_UNAVAILABLE`` (the tools
process of the pod's other container never answered), ``EXIT_TERMINATED`` (SIGTERM).
"""

from __future__ import annotations

import datetime
import logging
import os
import signal
import sys
import threading
import urllib.parse
from collections.abc import Callable
from types import FrameType
from typing import Any, NoReturn

import openai
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.errors import GraphRecursionError
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command
from pydantic import ValidationError
from urllib3.exceptions import HTTPError

from sessionops.agent.builder import AgentNodes, build_agent
from sessionops.agent.delegate import delegate_tool
from sessionops.agent.steering import SteeringMiddleware
from sessionops.agent.waitpoints import (
    ResumeInvalid,
    build_delegation_resume,
    build_resume,
    delegation_children,
    waitpoint_from_state,
)
from sessionops.api.run import RunPhase, SegmentKind, Usage, WaitpointKind
from sessionops.api.snapshot import ContextSnapshot
from sessionops.platform import checkpoints, logs
from sessionops.platform.errors import ApiException
from sessionops.platform.worker_kube import WorkerKube
from sessionops.policy import egress
from sessionops.toolbox.client import ToolboxClient, ToolboxUnavailable
from sessionops.views import InputView, RunView
from sessionops.worker import outcome, plan, thread, transcript
from sessionops.worker.access import Access, agent_check, subjects_of, up_front_checks
from sessionops.worker.delegation import Dispatcher
from sessionops.worker.env import EnvError, WorkerEnv
from sessionops.worker.lease import LeaseLost, LeaseUnavailable, SessionLease, worker_identity
from sessionops.worker.mcp import McpTools, server_connections
from sessionops.worker.model import ModelUnavailable, chat_model
from sessionops.worker.outcome import Verdict
from sessionops.worker.publish import Publisher
from sessionops.worker.steers import SteerDelivery

logger = logging.getLogger("sessionops.worker")

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CONFIG = 2
EXIT_LEASE_BUSY = 3
EXIT_LEASE_LOST = 4
EXIT_TOOLS_UNAVAILABLE = 5
EXIT_TERMINATED = 143


TERMINATE_TIMEOUT = 5.0
"""Seconds the SIGTERM path may spend releasing the Lease before exiting anyway (an
unreleased Lease expires on its own)."""
_held: list[SessionLease] = []
"""The Lease this process holds, for the SIGTERM path."""


class Segment:
    def __init__(self, env: WorkerEnv, kube: WorkerKube,
                 now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)) -> None:
        self.env = env
        self.kube = kube
        self.now = now
        self.publisher: Publisher | None = None
        self._projection: dict[str, Any] = {}

    def log(self, message: str, *args: Any) -> None:
        logger.info(f"run %s segment %s: {message}", self.env.run, self.env.segment_name, *args)

    def run(self) -> int:
        env = self.env
        run = self.kube.get("agentruns", env.namespace, env.run)
        if run is None or not RunView(run).writable_by_worker:
            self.log("the run is gone, cancelled or finished: nothing to do")
            return EXIT_OK
        session_name = RunView(run).session_name
        session = self.kube.get("agentsessions", env.namespace, session_name)
        if session is None:
            self.log("session %s is gone: nothing to do", session_name)
            return EXIT_OK
        identity = worker_identity(self.kube, env.namespace, env.identity, os.getpid())
        lease = SessionLease(self.kube, env.namespace, session_name, identity, env.lease_seconds)
        _held.append(lease)
        try:
            lease.acquire(env.lease_wait_seconds)
            lease.start_renewing(on_lost=_lease_lost)
            return self._under_lease(session)
        finally:
            lease.release()
            _held.clear()

    def _under_lease(self, session: dict[str, Any]) -> int:
        env = self.env
        # Re-read under the Lease: the run may have been cancelled while we waited.
        run = self.kube.get("agentruns", env.namespace, env.run)
        if run is None or not RunView(run).writable_by_worker:
            self.log("the run was cancelled or finished meanwhile: nothing to do")
            return EXIT_OK
        try:
            snapshot = ContextSnapshot.model_validate(RunView(run).context_snapshot)
        except ValidationError as e:
            # Field paths only: the values are the user's configuration and never go to logs.
            where = ", ".join(".".join(map(str, err["loc"])) for err in e.errors()) or "?"
            return self._report(outcome.failed(outcome.INVALID_SNAPSHOT, f"spec.contextSnapshot is invalid at {where}"))
        view = RunView(run)
        inputs = [i for name in view.inputs if (i := self.kube.get("agentinputs", env.namespace, name))]
        # A Retry may still have to deliver its run's last Resume input; a Resume segment
        # without an input answers a Delegation waitpoint with the children's outcomes.
        resume_name = env.resume_input or (plan.last_resume_input(view.segments)
                                           if env.kind == SegmentKind.RETRY.value else None)
        resume = self.kube.get("agentinputs", env.namespace, resume_name) if resume_name else None
        access = Access(self.kube, env.namespace, subjects_of([*inputs, *([resume] if resume else [])]))
        access.answers(up_front_checks(snapshot))  # together, before the first model call needs them

        agent = snapshot.source.agent_name if snapshot.source else ""
        allowed, why = access.review(agent_check(agent)) if agent else (False, "the snapshot names no Agent")
        if not allowed:
            return self._report(outcome.failed(outcome.ACCESS_REVOKED, f"access to agent {agent!r} is revoked: {why}"))
        if self.kube.update_run_status(env.namespace, env.run, lambda run: outcome.running_patch(run, self.now())) is None:
            self.log("the run was cancelled: nothing to do")
            return EXIT_OK
        if env.model is None:
            return self._report(outcome.failed(outcome.MODEL_UNAVAILABLE,
                                               f"model {snapshot.model!r} is not in the model catalog"))
        try:
            model = chat_model(env.model)
        except ModelUnavailable as e:
            return self._report(outcome.failed(outcome.MODEL_UNAVAILABLE, str(e)))

        skills = self._skills(snapshot, access)
        # The workspace and shell tools run in the tools process (the pod's other container,
        # without the worker's credentials); it must answer before the turn may call them.
        toolbox = ToolboxClient(env.tools_socket)
        toolbox.wait_ready(env.tools_wait_seconds)
        delivery = SteerDelivery(self.kube, env.namespace, session["metadata"]["name"], env.run,
                                 list(view.inputs))
        steering = SteeringMiddleware(fetch_steers=delivery.fetch, on_delivered=delivery.confirm)
        thread_id = session["metadata"]["uid"]
        # The MCP loop thread lives as long as the graph may call MCP tools: the whole segment.
        with McpTools() as mcp, checkpoints.connect(env.database_url) as conn:
            connections = server_connections(snapshot.mcp_servers, access=access, kube=self.kube,
                                             namespace=env.namespace,
                                             egress=egress.Policy.of(env.mcp_egress, os.environ))
            mcp_tools = mcp.load(connections)
            saver = PostgresSaver(conn)
            headers = [v for c in connections.values() for v in (c.get("headers") or {}).values()]
            redactor = transcript.Redactor([*headers, *_dsn_secrets(env.database_url),
                                            *([env.model.api_key] if env.model and env.model.api_key else [])])
            self._projection = {
                "start_ids": plan.turn_start_ids(inputs), "redactor": redactor,
                "decisions": transcript.decision_steps(view.waitpoint, resume),
                "answers": transcript.answer_steps(view.waitpoint, resume, redactor),
            }
            self.publisher = Publisher(self.kube, run, env.segment_name,
                                       now=self._step_time).start()
            dispatcher = Dispatcher(self.kube, env.namespace, env.run, snapshot, access, list(view.children))
            graph = build_agent(snapshot, model=model, toolbox=toolbox, checkpointer=saver,
                                skills=skills, extra_tools=[*mcp_tools, delegate_tool(dispatcher.dispatch)],
                                steering=steering, tool_filter=access.tool_filter)
            config = thread.run_config(thread_id, env.run, env.segment_name, snapshot.max_execution_steps)
            try:
                verdict = self._execute(graph, saver, config, thread_id, inputs, resume, snapshot, dispatcher,
                                        list(view.segments))
                if verdict is None:
                    # Tasks pend without an interrupt after the graph returned: langgraph stopped
                    # early. Not a verdict: let the operator retry from the checkpoint.
                    raise RuntimeError("the graph stopped with pending tasks and no interrupt")
                messages = graph.get_state(config).values.get("messages", [])
                # The whole transcript is written before the verdict: a reader that sees the
                # run finished reads every step.
                self._publish(messages, verdict)
                self.publisher.close()
            finally:
                self.publisher.stop()
        self._prune(thread_id)
        usage = outcome.usage_of(outcome.turn_messages(messages, plan.turn_start_ids(inputs)))
        return self._report(verdict, usage)

    def _step_time(self) -> str:
        """Milliseconds: steps of one second stay ordered by time, and readers can measure their delay."""
        return self.now().astimezone(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _prune(self, thread_id: str) -> None:
        """Retention after the segment's last write, still under the Lease, so no other writer of
        the thread runs; the latest checkpoints (the turn's state and its pending writes) are kept.
        Housekeeping, not a verdict: a failure is logged and the next segment prunes again."""
        try:
            deleted = checkpoints.prune(self.env.database_url, thread_id, self.env.checkpoint_retention)
        except checkpoints.DatabaseError as e:
            logger.warning("run %s: checkpoint retention failed (%s); the next segment retries it",
                           self.env.run, type(e).__name__)
            return
        if deleted:
            self.log("pruned %d checkpoint(s), keeping the latest %d", deleted, self.env.checkpoint_retention)

    def _skills(self, snapshot: ContextSnapshot, access: Access) -> dict[str, str]:
        """Skill texts the agent may load now: selected by the snapshot and allowed by access."""
        if not snapshot.skills and not snapshot.preload_skills:
            return {}
        wanted = set(snapshot.preload_skills) | (set() if snapshot.skills == "all" else set(snapshot.skills))
        found = self.kube.skills(self.env.namespace)
        if snapshot.skills != "all":
            found = {k: v for k, v in found.items() if k in wanted}
        return access.visible_skills(found)

    def _execute(self, graph: CompiledStateGraph, saver: PostgresSaver, config: dict[str, Any], thread_id: str,
                 inputs: list[dict[str, Any]], resume: dict[str, Any] | None,
                 snapshot: ContextSnapshot, dispatcher: Dispatcher,
                 segments: list[dict[str, Any]]) -> Verdict | None:
        state = graph.get_state(config)
        waitpoint = waitpoint_from_state(state)
        step = plan.plan_segment(self.env.kind, turn_started=thread.turn_started(saver, thread_id, self.env.run),
                                 has_next=bool(state.next), waitpoint_id=waitpoint.id if waitpoint else None,
                                 resume_input=resume)
        self.log("%s (%d input(s))", step.action.value, len(inputs))
        try:
            if step.action == plan.Action.START:
                if (closed := thread.close_leftovers(graph, thread_id)) is not None:
                    self.log("closed an earlier turn's open calls: %s", ", ".join(closed.committed) or "none")
                self._drive(graph, {"messages": plan.start_messages(inputs)}, config)
            elif plan.delivers_outcomes(step, resume, segments) and waitpoint is not None \
                    and waitpoint.kind == WaitpointKind.DELEGATION.value \
                    and set(waitpoint.children) == dispatcher.awaited:  # the wait the operator decided on
                command = build_delegation_resume(state, dispatcher.outcomes(delegation_children(state)))
                self._drive(graph, command, config)
            elif step.action == plan.Action.RESUME:
                answer = InputView(resume)
                command: Command = build_resume(state, waitpoint_id=answer.waitpoint_id, answers=answer.answers,
                                                decisions=answer.decisions)
                self._drive(graph, command, config)
            elif step.action == plan.Action.CONTINUE:
                self._drive(graph, None, config)
        except ResumeInvalid as e:
            return outcome.failed(outcome.RESUME_INVALID, f"resume input {step.resume_input}: {e}")
        except GraphRecursionError:
            return outcome.failed(outcome.STEP_LIMIT, f"the turn exceeded its graph step budget "
                                                      f"(maxExecutionSteps {snapshot.max_execution_steps})")
        except openai.APIError as e:
            return outcome.failed(outcome.MODEL_ERROR, f"model {snapshot.model!r}: {type(e).__name__}: {e}")
        except Exception as e:
            verdict = self._task_failure(graph, config, e)
            if verdict is None:
                raise
            return verdict
        state = graph.get_state(config)
        messages: list[BaseMessage] = state.values.get("messages", [])
        return outcome.verdict_of(messages, waitpoint_from_state(state), has_next=bool(state.next),
                                  max_steps=snapshot.max_execution_steps)

    def _drive(self, graph: CompiledStateGraph, value: Any, config: dict[str, Any]) -> None:
        """``invoke`` as a stream of states: each superstep's messages go to the transcript."""
        for state in graph.stream(value, config, durability="sync", stream_mode="values"):
            if isinstance(state, dict) and "messages" in state:
                self._publish(state["messages"])

    def _publish(self, messages: list[BaseMessage], verdict: Verdict | None = None) -> None:
        if self.publisher is None:
            return
        p = self._projection
        steps = transcript.project(outcome.turn_messages(messages, p["start_ids"]), decisions=p["decisions"],
                                   answers=p["answers"], redactor=p["redactor"],
                                   final=verdict is not None and verdict.phase == RunPhase.SUCCEEDED.value,
                                   result_max=self.env.transcript_tool_result_chars)
        if verdict is not None and verdict.waitpoint is not None:
            steps.append(transcript.wait_step(verdict.waitpoint.dump()))
        for step in self.publisher.update(steps):
            self.log("step %s %s%s", step["id"], step["kind"], f" {step['tool']}" if step.get("tool") else "")

    @staticmethod
    def _task_failure(graph: CompiledStateGraph, config: dict[str, Any], error: Exception) -> Verdict | None:
        """A tool that raised (instead of returning an error result) fails the turn; anything
        else (API server, database, our own bugs) is infrastructure: None, re-raised."""
        if _infrastructure(error):
            return None
        failed_tasks = [t for t in graph.get_state(config).tasks if t.error is not None]
        if failed_tasks and all(t.name == AgentNodes.TOOLS for t in failed_tasks):
            return outcome.failed(outcome.TOOL_ERROR, f"{type(error).__name__}: {error}")
        return None

    def _report(self, verdict: Verdict, usage: Usage | None = None) -> int:
        """Write the verdict unless the run was cancelled meanwhile (then the cancellation
        controller owns it and we exit quietly)."""
        env = self.env

        def change(run: dict[str, Any]) -> dict[str, Any]:
            return outcome.status_patch(verdict, run=run, segment=env.segment_name, usage=usage, now=self.now())

        if self.kube.update_run_status(env.namespace, env.run, change) is None:
            self.log("not reporting %s: the run was cancelled or finished meanwhile", verdict.phase)
        else:
            self.log("reported %s%s", verdict.phase, f" ({verdict.reason})" if verdict.reason else "")
        return EXIT_OK


def _dsn_secrets(dsn: str) -> list[str]:
    """The database password (and the whole DSN, which carries it) for redaction."""
    try:
        password = urllib.parse.urlsplit(dsn).password
    except ValueError:  # not a URL (a key=value DSN): the whole string is still redacted
        password = None
    return [dsn, *([urllib.parse.unquote(password)] if password else [])]


def _infrastructure(error: BaseException) -> bool:
    """Errors of the API server, the database or the Lease: never a verdict on the turn."""
    return isinstance(error, checkpoints.DatabaseError | ApiException | HTTPError | LeaseLost)


def _lease_lost(error: LeaseLost) -> None:
    """Another worker may write the thread now: stop at once, without another write.
    The checkpoints are durable (``durability="sync"``); the operator retries."""
    logger.error("%s: exiting", error)
    _exit(EXIT_LEASE_LOST)


def _terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM: the Job or pod is being deleted (a cancellation, an eviction). Stop now.

    Not by raising into the main thread: langgraph waits for running tool tasks before an
    exception leaves ``invoke``, which could outlast the grace period. A separate thread
    releases the Lease (so a cancellation's cleanup need not wait for it to expire) and
    exits; the pod is gone only once the process is, so cleanup never races this writer.
    """
    def stop() -> None:
        logger.warning("terminated (SIGTERM): releasing the lease and exiting")
        for lease in list(_held):
            lease.release()
        _exit(EXIT_TERMINATED)

    deadline = threading.Timer(TERMINATE_TIMEOUT, _exit, args=(EXIT_TERMINATED,))
    deadline.daemon = True
    deadline.start()
    threading.Thread(target=stop, name="sigterm", daemon=True).start()


def _exit(code: int) -> NoReturn:
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main() -> NoReturn:
    logs.configure(level=logging.getLevelName(os.environ.get("SESSIONOPS_LOG_LEVEL", "INFO")))
    for noisy in ("httpx", "httpx2", "openai", "urllib3", "kubernetes", "mcp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        env = WorkerEnv.from_environ()
    except EnvError as e:
        logger.error("invalid environment: %s", e)
        sys.exit(EXIT_CONFIG)
    signal.signal(signal.SIGTERM, _terminate)
    kube = WorkerKube.connect()
    code = EXIT_ERROR
    try:
        code = Segment(env, kube).run()
    except LeaseUnavailable as e:
        logger.error("run %s segment %s: %s", env.run, env.segment_name, e)
        code = EXIT_LEASE_BUSY
    except ToolboxUnavailable as e:
        logger.error("run %s segment %s: %s; the operator retries from the checkpoint", env.run, env.segment_name, e)
        code = EXIT_TOOLS_UNAVAILABLE
    except Exception:
        logger.exception("run %s segment %s: failed; the operator retries from the checkpoint",
                         env.run, env.segment_name)
        code = EXIT_ERROR
    finally:
        kube.close()
    # Exit at once: the interpreter's teardown of the agent stack takes most of a second,
    # and everything durable is written.
    _exit(code)

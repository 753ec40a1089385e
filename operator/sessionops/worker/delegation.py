"""The worker's side of ``delegate``: make (or find) the child, and read children's outcomes.

Creating goes through admission like any client: the child session names its parent run
in ``spec.delegation`` (admission checks that this worker may ``delegate`` for the run,
freezes the child's snapshot and adds the tree labels and the ownerReference), and the
delegated input carries the parent-run label (admission records the parent's submitter
as its ``submittedBy``, so the child acts for the same person, never for the worker).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.tools import ToolException

from sessionops.api.snapshot import ContextSnapshot
from sessionops.delegation import tree
from sessionops.delegation.names import PARENT_RUN_LABEL, child_input_name, child_session_name
from sessionops.platform.errors import ApiException, Conflict, status_message
from sessionops.platform.worker_kube import WorkerKube
from sessionops.views import SessionView
from sessionops.worker.access import Access, agent_check

logger = logging.getLogger("sessionops.worker")


class Dispatcher:
    """``dispatch`` for the delegate tool of one run; ``outcomes`` for its resume."""

    def __init__(self, kube: WorkerKube, namespace: str, run: str, snapshot: ContextSnapshot,
                 access: Access, children: Iterable[Mapping[str, Any]] = ()) -> None:
        """``children``: the run's ``status.children``, the operator's view of what it waits on."""
        self.kube = kube
        self.namespace = namespace
        self.run = run
        self.snapshot = snapshot
        self.access = access
        children = list(children)
        self.awaited = {c.get("session") for c in children}
        """The children the operator decided on when it started a Delegation resume."""
        self.cut_off = {c.get("session") for c in children if c.get("cutOff")}
        """Children it stopped waiting for at the deadline."""
        self.resolved: set[str] = set()
        """Children whose outcomes this segment delivers (a Delegation resume)."""

    def dispatch(self, tool_call_id: str, name: str, message: str, agent: str | None) -> str:
        child = child_session_name(self.run, tool_call_id, name)
        if child in self.resolved:
            # Resuming: the tool re-runs from its start only to receive this child's outcome.
            # Creating anything now would start a child nobody waits for (its session may be gone).
            return child
        existing = self.kube.get("agentsessions", self.namespace, child)
        if existing is None:
            if agent is not None:
                self._check_target(agent)
            self._create_session(child, tool_call_id, name, agent)
        else:
            self._check_ours(existing, tool_call_id)
        # The name is the idempotency key: an earlier attempt of this very call made it.
        self._create("agentinputs", {
            "apiVersion": "sessionops.dev/v1alpha1", "kind": "AgentInput",
            "metadata": {"name": child_input_name(child), "labels": {PARENT_RUN_LABEL: self.run}},
            "spec": {"sessionRef": {"name": child}, "kind": "Message", "delivery": "FollowUp",
                     "messages": [{"content": message}]}})
        logger.info("run %s: delegated %r to child session %s", self.run, name, child)
        return child

    def _check_target(self, agent: str) -> None:
        if self.kube.get("agents", self.namespace, agent) is None:
            raise ToolException(f"delegate: agent {agent!r} does not exist in namespace {self.namespace}")
        allowed, why = self.access.review(agent_check(agent))
        if not allowed:
            raise ToolException(f"delegate: refused: {why}")

    def _create_session(self, child: str, tool_call_id: str, name: str, agent: str | None) -> None:
        source = self.snapshot.source.agent_name if self.snapshot.source else ""
        body = {"apiVersion": "sessionops.dev/v1alpha1", "kind": "AgentSession",
                "metadata": {"name": child},
                "spec": {"agentRef": {"name": agent or source},
                         "delegation": {"parentRun": self.run, "toolCallId": tool_call_id, "name": name,
                                        "inherit": agent is None}}}
        self._check_ours(self._create("agentsessions", body), tool_call_id)

    def _create(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create through admission; on a name clash, the object that exists. A refusal by
        admission becomes a ToolException, so the model reads why."""
        try:
            return self.kube.create(plural, self.namespace, body)
        except Conflict as e:
            existing = self.kube.get(plural, self.namespace, body["metadata"]["name"])
            if existing is None:  # not a name clash: admission refused with 409
                raise ToolException(f"delegate: {e}") from None
            return existing
        except ApiException as e:
            if e.status is not None and 400 <= e.status < 500:
                raise ToolException(f"delegate: {status_message(e.body) or e.reason}") from None
            raise

    def _check_ours(self, session: dict[str, Any], tool_call_id: str) -> None:
        view = SessionView(session)
        if view.parent_run != self.run or view.tool_call_id != tool_call_id:
            raise ToolException(f"delegate: session {session['metadata']['name']} exists and is not this "
                                "call's child")

    def outcomes(self, children: list[str]) -> dict[str, dict[str, Any]]:
        """Each awaited child's outcome (the resume values); read now, after the operator
        decided that every child ended or the deadline passed."""
        self.resolved.update(children)
        values = {}
        for name in children:
            session = self.kube.get("agentsessions", self.namespace, name)
            inp = self.kube.get("agentinputs", self.namespace, child_input_name(name))
            run_name = tree.run_of(inp)
            run = self.kube.get("agentruns", self.namespace, run_name) if run_name else None
            values[name] = tree.result(tree.Child(name, session, inp, run), cut_off=name in self.cut_off)
        return values

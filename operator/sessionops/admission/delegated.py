"""Admission of what a ``delegate`` call creates (pure): the child session and its input.

A child session names its parent run in ``spec.delegation``. It is admitted only while that
run is active, and only for a requester who may ``delegate`` on that run (checked by the
adapter with a SubjectAccessReview; the chart grants it to the worker ServiceAccount).
Its snapshot is frozen here, at dispatch: the parent run's own snapshot when it inherits
(never the parent session's current one), else the named Agent's context resolved now with
the parent run's approval mode. The delegated input (labelled with the parent run) acts
for the parent run's submitter, not for the worker that created it.
"""

from __future__ import annotations

from typing import Any

from sessionops.admission.errors import CONFLICT, FORBIDDEN, NOT_FOUND, Rejection
from sessionops.admission.sessions import session_snapshot_on_create
from sessionops.api.config import OperatorConfig
from sessionops.api.input import InputKind, SubmittedBy
from sessionops.api.run import TERMINAL_PHASES
from sessionops.api.snapshot import ContextSnapshot
from sessionops.delegation.names import (
    DELEGATE_VERB,
    DEPTH_LABEL,
    PARENT_RUN_LABEL,
    PARENT_SESSION_LABEL,
    TREE_LABEL,
    child_input_name,
    depth,
    tree_root,
)
from sessionops.policy import authz
from sessionops.views import InputView, RunView, SessionView

FIELD = "spec.delegation.parentRun"


def check_parent(parent: dict[str, Any] | None, name: str) -> dict[str, Any]:
    """The parent run, if it may still delegate (it exists and its turn is active)."""
    if parent is None:
        raise Rejection(FIELD, f'agentrun "{name}" not found in this namespace', NOT_FOUND)
    view = RunView(parent)
    phase = view.stored_phase
    if phase in TERMINAL_PHASES or view.cancel_requested or view.deleting:
        raise Rejection(FIELD, f'agentrun "{name}" is not active (phase {phase}): it can no longer delegate',
                        CONFLICT)
    return parent


POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
"""userInfo.extra of a pod-bound ServiceAccount token: the pod the request comes from."""


def review_spec(userinfo: dict[str, Any], namespace: str, run: str) -> dict[str, Any]:
    """SubjectAccessReview: may the requester ``delegate`` on this run?"""
    return authz.review_spec(authz.subject_of(userinfo), namespace, DELEGATE_VERB, "agentruns", run)


def forbidden_message(userinfo: dict[str, Any], run: str, reason: str) -> str:
    return (f'{userinfo.get("username", "?")} may not {DELEGATE_VERB} on agentrun "{run}"'
            + (f": {reason}" if reason else ""))


def pod_name(userinfo: dict[str, Any]) -> str | None:
    names = (userinfo.get("extra") or {}).get(POD_NAME_EXTRA) or []
    return names[0] if names else None


def check_pod(userinfo: dict[str, Any], pod_run: str | None, run: str) -> None:
    """A request made with a pod-bound token must come from a worker pod of ``run``
    (``pod_run``: the run label of that pod): the worker ServiceAccount may delegate, but one
    run's pod (where ``run_shell`` runs) must not act for another run's submitter."""
    name = pod_name(userinfo)
    if name is None:
        return
    if pod_run != run:
        raise Rejection(FIELD, f'pod "{name}" is not a worker of agentrun "{run}": a worker delegates only '
                               "for its own run", FORBIDDEN)


def target_review_spec(submitted_by: dict[str, Any], namespace: str, agent: str) -> dict[str, Any]:
    """SubjectAccessReview: may the parent run's submitter use the Agent a child names?"""
    return authz.review_spec(SubmittedBy.model_validate(submitted_by), namespace, "get", "agents", agent)


def target_refused(submitted_by: dict[str, Any], agent: str, reason: str) -> Rejection:
    return Rejection("spec.agentRef.name", f'{submitted_by.get("username", "?")} may not get agent "{agent}"'
                     + (f": {reason}" if reason else ""), FORBIDDEN)


def child_snapshot(spec: dict[str, Any], parent: dict[str, Any], agent: dict[str, Any] | None,
                   config: OperatorConfig) -> ContextSnapshot:
    """The child's frozen configuration."""
    parent_snapshot = ContextSnapshot.model_validate(RunView(parent).context_snapshot)
    approval = parent_snapshot.approval_mode
    if (spec.get("delegation") or {}).get("inherit", True):
        for key in ("model", "approvalMode", "context"):
            if spec.get(key):
                raise Rejection(f"spec.{key}", "an inheriting child runs with its parent run's configuration: "
                                               "omit the field")
        source = parent_snapshot.source.agent_name if parent_snapshot.source else ""
        if (spec.get("agentRef") or {}).get("name") != source:
            raise Rejection("spec.agentRef.name", f'an inheriting child runs its parent run\'s agent "{source}"')
        return parent_snapshot.model_copy(deep=True)
    if spec.get("approvalMode") not in (None, approval):
        raise Rejection("spec.approvalMode", f"a delegated child runs with its parent run's approval mode "
                                             f"({approval})")
    return session_snapshot_on_create({**spec, "approvalMode": approval}, agent, config)


def child_labels(parent: dict[str, Any], parent_session: dict[str, Any] | None, max_depth: int) -> dict[str, str]:
    """The tree labels of a new child; refuses a child deeper than ``max_depth`` (an agent
    that keeps delegating to itself would otherwise grow the tree without end)."""
    session = RunView(parent).session_name
    root = tree_root(parent_session) if parent_session else session
    level = (depth(parent_session) if parent_session else 0) + 1
    if level > max_depth:
        raise Rejection(FIELD, f'session "{session}" is {level - 1} level(s) below its root "{root}": children '
                               f"may be at most {max_depth} level(s) deep (config delegationMaxDepth)")
    return {TREE_LABEL: root, PARENT_RUN_LABEL: parent["metadata"]["name"], PARENT_SESSION_LABEL: session,
            DEPTH_LABEL: str(level)}


def delegated_submitter(session: dict[str, Any] | None, parent: dict[str, Any] | None, run: str,
                        first_input: dict[str, Any] | None, input_name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The ``submittedBy`` of an input labelled with ``run``: the submitter of the parent
    run's first input. Only for the one follow-up message that run's delegate call sends to
    its own child, while the run is active."""
    field = f"metadata.labels[{PARENT_RUN_LABEL}]"
    if SessionView(session).parent_run != run:
        raise Rejection(field, f'the session was not delegated by agentrun "{run}"')
    check_parent(parent, run)
    child = (session or {}).get("metadata", {}).get("name", "")
    if input_name != child_input_name(child):
        raise Rejection("metadata.name", f'the delegated input of session "{child}" is named '
                                         f'"{child_input_name(child)}"')
    if (spec.get("kind") or InputKind.MESSAGE.value) != InputKind.MESSAGE.value:
        raise Rejection("spec.kind", "a delegated input is a Message")
    submitted = InputView(first_input).submitted_by
    if not submitted:
        raise Rejection(field, f'agentrun "{run}" has no admitted input to act for', CONFLICT)
    return dict(submitted)


TREE_LABELS = (TREE_LABEL, PARENT_RUN_LABEL, PARENT_SESSION_LABEL, DEPTH_LABEL)


def tree_label_problem(labels: dict[str, str], old: dict[str, str] | None, *, delegated: bool) -> str | None:
    """Why a session's tree labels are not acceptable (None: they are). On CREATE (``old``
    None) only a delegated child may carry them (admission set them); on UPDATE they never change."""
    for key in TREE_LABELS:
        if old is None and not delegated and key in labels:
            return f"metadata.labels[{key}]: set by sessionops on delegated child sessions only"
        if old is not None and labels.get(key) != old.get(key):
            return f"metadata.labels[{key}]: set by sessionops and immutable"
    return None

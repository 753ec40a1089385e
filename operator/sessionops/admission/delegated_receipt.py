"""The receipt adapter of delegation: reads what ``delegated`` decides on (the parent run, its
session, its submitter, the target Agent, the requester's rights) and returns the decision.

A delegated child session is admitted only when the parent run may delegate and the requester
may act for it (``delegate`` on the run and, with a pod-bound token, being that run's worker);
its snapshot is frozen now, and it carries the tree's labels and an ownerReference to the parent
run. A delegated input (labelled with its parent run) is submitted on behalf of the parent's
submitter. Safe to repeat: reads and SubjectAccessReviews only, nothing is written here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sessionops.admission import delegated
from sessionops.admission.errors import FORBIDDEN, Rejection
from sessionops.api.config import OperatorConfig
from sessionops.api.names import RUN_LABEL, owner_reference
from sessionops.api.snapshot import ContextSnapshot
from sessionops.delegation.names import PARENT_RUN_LABEL
from sessionops.platform.kube import Kube
from sessionops.views import InputView, RunView


@dataclasses.dataclass(frozen=True)
class Child:
    """What admission adds to a delegated child session."""

    snapshot: ContextSnapshot
    labels: dict[str, str]
    parent: dict[str, Any]

    def owner_references(self, current: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``current`` with the parent run as controller (replacing an earlier reference to it).
        No blockOwnerDeletion: with OwnerReferencesPermissionEnforcement it would require the
        worker to have update on agentruns/finalizers, and background deletion needs no block.
        Owned by the parent run: deleting the tree's root session removes the whole tree."""
        uid = self.parent["metadata"]["uid"]
        return [*(o for o in current if o.get("uid") != uid),
                owner_reference(self.parent, controller=True, block_owner_deletion=False)]


async def check_delegate(kube: Kube, userinfo: dict[str, Any], namespace: str, run: str) -> None:
    """The requester may ``delegate`` on the run and, with a pod-bound token, is that run's worker."""
    allowed, reason = await kube.access_review(delegated.review_spec(userinfo, namespace, run))
    if not allowed:
        raise Rejection(delegated.FIELD, delegated.forbidden_message(userinfo, run, reason), FORBIDDEN)
    if pod := delegated.pod_name(userinfo):
        found = await kube.get_pod(namespace, pod)
        delegated.check_pod(userinfo, ((found or {}).get("metadata", {}).get("labels") or {}).get(RUN_LABEL), run)


async def parent_submitter_input(kube: Kube, namespace: str, parent: dict[str, Any] | None) -> dict[str, Any] | None:
    """The first input of the parent run: whose turn it is."""
    first = RunView(parent).inputs
    return await kube.get("agentinputs", namespace, first[0]) if first else None


async def admit_child(kube: Kube, config: OperatorConfig, namespace: str, spec: dict[str, Any],
                      userinfo: dict[str, Any]) -> Child:
    """A delegated child session: the parent run may delegate, the requester may act for it."""
    run_name = spec["delegation"]["parentRun"]
    parent = delegated.check_parent(await kube.get("agentruns", namespace, run_name), run_name)
    await check_delegate(kube, userinfo, namespace, run_name)
    agent_name = (spec.get("agentRef") or {}).get("name", "")
    agent = None
    if not spec["delegation"].get("inherit", True):
        # The child acts for the parent's submitter: that person must be allowed to use the Agent.
        submitted = InputView(await parent_submitter_input(kube, namespace, parent)).submitted_by
        if submitted:
            allowed, reason = await kube.access_review(delegated.target_review_spec(submitted, namespace, agent_name))
            if not allowed:
                raise delegated.target_refused(submitted, agent_name, reason)
        agent = await kube.get("agents", namespace, agent_name) if agent_name else None
    snapshot = delegated.child_snapshot(spec, parent, agent, config)
    parent_session = await kube.get("agentsessions", namespace, RunView(parent).session_name)
    labels = delegated.child_labels(parent, parent_session, config.delegation_max_depth)
    return Child(snapshot=snapshot, labels=labels, parent=parent)


async def submitter(kube: Kube, namespace: str, labels: dict[str, str], name: str, spec: dict[str, Any],
                    userinfo: dict[str, Any]) -> dict[str, Any] | None:
    """For an input labelled with a parent run: the parent's submitter (None: not delegated)."""
    run_name = labels.get(PARENT_RUN_LABEL)
    if not run_name:
        return None
    session = await kube.get("agentsessions", namespace, (spec.get("sessionRef") or {}).get("name", ""))
    parent = await kube.get("agentruns", namespace, run_name)
    submitted = delegated.delegated_submitter(session, parent, run_name,
                                              await parent_submitter_input(kube, namespace, parent), name, spec)
    await check_delegate(kube, userinfo, namespace, run_name)
    return submitted

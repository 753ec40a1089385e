"""AgentSession admission rules (pure): CREATE freezes the snapshot, UPDATE may only
change model and approval mode, and server-owned fields are carried forward."""

from __future__ import annotations

from typing import Any

from sessionops.admission.errors import CONFLICT, Rejection
from sessionops.admission.snapshot import check_model, resolve_session_snapshot, with_model_and_approval
from sessionops.api.config import OperatorConfig
from sessionops.api.snapshot import ContextSnapshot

UPDATABLE = ("model", "approvalMode")
SERVER_OWNED = ("contextSnapshot",)


def session_snapshot_on_create(spec: dict[str, Any], agent: dict[str, Any] | None,
                               config: OperatorConfig) -> ContextSnapshot:
    """The snapshot a new session freezes; rejects a blank or unavailable model."""
    model = spec.get("model")
    if model is not None:
        check_model(config, model, "spec.model")
    return resolve_session_snapshot(
        agent, spec.get("agentRef", {}).get("name", ""), model=model,
        approval_mode=spec.get("approvalMode"), context=spec.get("context") or {}, config=config)


def session_snapshot_on_update(old: dict[str, Any], new: dict[str, Any],
                               config: OperatorConfig) -> ContextSnapshot | None:
    """The snapshot after an UPDATE, or None when the spec did not change.

    Only model and approval mode may change; removing a set field is rejected;
    the stored snapshot is carried forward whatever the client sent.
    """
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    user_old = {k: v for k, v in old_spec.items() if k not in SERVER_OWNED}
    user_new = {k: v for k, v in new_spec.items() if k not in SERVER_OWNED}
    stored = old_spec.get("contextSnapshot")
    if user_old == user_new:
        return ContextSnapshot.model_validate(stored) if stored is not None else None
    if old.get("metadata", {}).get("deletionTimestamp"):
        raise Rejection("spec", "the session is being deleted and can no longer be updated", CONFLICT)
    for key in sorted(set(user_old) | set(user_new)):
        if key in UPDATABLE or user_old.get(key) == user_new.get(key):
            continue
        raise Rejection(f"spec.{key}", "field is immutable: only spec.model and spec.approvalMode may change")
    for key in UPDATABLE:
        if key in user_old and user_new.get(key) is None:
            raise Rejection(f"spec.{key}", "may not be removed or set to null: omit the field to keep the "
                                           "current value")
    if stored is None:
        raise Rejection("spec.contextSnapshot", "the session has no snapshot; it was not admitted", CONFLICT)
    model = new_spec.get("model") if new_spec.get("model") != old_spec.get("model") else None
    approval = new_spec.get("approvalMode") if new_spec.get("approvalMode") != old_spec.get("approvalMode") else None
    return with_model_and_approval(ContextSnapshot.model_validate(stored), model=model,
                                   approval_mode=approval, config=config, field="spec")

"""Who may write the status of sessions, inputs and runs (pure; ARCHITECTURE section 9).

Status is the operator's record and, for its own turn, the worker's: a forged
``lastSequence`` reuses a run name and sticks the queue, a forged waitpoint reopens a
finished turn, a forged input phase takes an input out of (or back into) the queue.
The validating webhook on the ``status`` subresources allows:

- the operator's ServiceAccount (the chart also skips the webhook call for it with a
  matchCondition: its own bookkeeping is never slowed by its own webhook);
- a worker, identified by its pod-bound ServiceAccount token, for the run its pod belongs
  to (the pod's run label) and for claiming that run's steers (an input of the pod's session,
  Pending -> Consumed by that run), and nothing else;
- members of the break-glass group (documented; empty disables it), with a warning: a
  cluster admin must say so explicitly (``kubectl --as-group``). ``system:masters`` alone
  is not enough, and the CRDs' transition rules still hold for everyone;

and refuses everyone else, naming the status fields they tried to change.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from sessionops.admission.errors import FORBIDDEN, Rejection
from sessionops.api.input import InputPhase
from sessionops.views import InputView

POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
SA_PREFIX = "system:serviceaccount:"
DEFAULT_BREAK_GLASS_GROUP = "sessionops.dev:status-break-glass"

KINDS = {"agentsessions": "session", "agentinputs": "input", "agentruns": "run"}


@dataclasses.dataclass(frozen=True)
class Pod:
    """What the webhook needs to know of a worker pod (read once per pod uid, then cached)."""

    namespace: str
    name: str
    uid: str
    run: str | None
    session: str | None


@dataclasses.dataclass(frozen=True)
class Policy:
    operator: str
    """The operator's username, ``system:serviceaccount:<namespace>:<name>``."""
    break_glass_group: str = DEFAULT_BREAK_GLASS_GROUP


def operator_username(namespace: str, service_account: str) -> str:
    return f"{SA_PREFIX}{namespace}:{service_account}"


def _first(userinfo: dict[str, Any], key: str) -> str | None:
    values = (userinfo.get("extra") or {}).get(key) or []
    return values[0] if values else None


def bound_pod(userinfo: dict[str, Any]) -> tuple[str, str, str] | None:
    """(namespace, pod name, pod uid) of a pod-bound ServiceAccount token; None otherwise.
    The API server sets these extras itself; a client can only claim them by impersonation,
    which needs ``impersonate`` on ``userextras`` (an administrator's right)."""
    username = userinfo.get("username") or ""
    name, uid = _first(userinfo, POD_NAME_EXTRA), _first(userinfo, POD_UID_EXTRA)
    if not username.startswith(SA_PREFIX) or not name or not uid:
        return None
    namespace = username[len(SA_PREFIX):].split(":", 1)[0]
    return namespace, name, uid


def changed_fields(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    """``status.<key>`` for every top-level status key whose value differs, sorted."""
    before, after = (old or {}).get("status") or {}, (new or {}).get("status") or {}
    keys = sorted(set(before) | set(after))
    return [f"status.{k}" for k in keys
            if json.dumps(before.get(k), sort_keys=True) != json.dumps(after.get(k), sort_keys=True)]


def _refuse(fields: list[str], who: str, why: str) -> Rejection:
    return Rejection(", ".join(fields), f"{who} may not change {'it' if len(fields) == 1 else 'them'}: {why}",
                     FORBIDDEN)


OWNERS = "status is written only by the sessionops operator and, for its own run, that run's worker"


def _worker_check(plural: str, obj: dict[str, Any], old: dict[str, Any], pod: Pod, fields: list[str]) -> str | None:
    """None when the worker of ``pod`` may make this change; else why not."""
    if not pod.run:
        return f'pod "{pod.name}" is not a worker of any run'
    if obj.get("metadata", {}).get("namespace") != pod.namespace:
        return f'pod "{pod.name}" works in namespace "{pod.namespace}"'
    name = obj.get("metadata", {}).get("name")
    if plural == "agentruns":
        if name != pod.run:
            return f'pod "{pod.name}" is the worker of agentrun "{pod.run}", not of "{name}"'
        return None
    if plural == "agentinputs":
        # A worker claims steers delivered into its turn: Pending -> Consumed by its own run.
        after, before = InputView(obj), InputView(old)
        session = after.session_name or None
        if session != pod.session:
            return f'pod "{pod.name}" works for session "{pod.session}", not "{session}"'
        if set(fields) - {"status.phase", "status.run"}:
            return "a worker only marks an input Consumed by its run"
        if after.stored_phase != InputPhase.CONSUMED.value or after.consumed_by != pod.run:
            return f'a worker only marks an input Consumed by its own run "{pod.run}"'
        if before.phase != InputPhase.PENDING.value:
            return "only a Pending input can be claimed"
        return None
    return "a worker never writes session status"


def check(plural: str, userinfo: dict[str, Any], obj: dict[str, Any], old: dict[str, Any], policy: Policy,
          pod: Pod | None) -> str | None:
    """Allow (returning None, or a warning for a break-glass write) or raise a Rejection naming
    the fields. ``pod``: the requester's bound pod (None when the token is not pod-bound or the
    pod is gone)."""
    username = userinfo.get("username") or "?"
    if username == policy.operator:
        return None
    fields = changed_fields(old, obj)
    if not fields:
        return None  # a no-op write changes nothing
    if policy.break_glass_group and policy.break_glass_group in (userinfo.get("groups") or []):
        return (f"break-glass status write by {username} (group {policy.break_glass_group}): "
                f"{', '.join(fields)} changed; the operator may overwrite it")
    if pod is not None:
        why = _worker_check(plural, obj, old, pod, fields)
        if why is None:
            return None
        raise _refuse(fields, username, why)
    if bound_pod(userinfo) is not None:
        raise _refuse(fields, username, "the pod of this token no longer exists")
    raise _refuse(fields, username, OWNERS)

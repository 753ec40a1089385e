"""Pure builders of AgentInput manifests, and the checks the plugin makes before sending.

Nothing here talks to the cluster: the commands read objects, call these functions and
send what they return. The API types (``sessionops.api``) validate every manifest, so a
message that is too long is refused here with the same limits the CRD enforces. The
server stays the authority: client-side checks only give a nicer message first.

Names: an AgentInput's ``metadata.name`` is its idempotency key (re-creating it returns
AlreadyExists). The plugin derives it from a key:

- ``send``: ``<session>-<key>`` (``--key``, default a random 8-hex key that is printed);
- ``continue``: ``<session>-continue-<key>``;
- ``approve`` / ``reject`` / ``answer``: ``<run>-<key>``, the key defaulting to the waitpoint id,
  so deciding the same waitpoint twice is recognized as the same intent.

A key that is not already a valid lowercase DNS label gets a hash suffix, so distinct keys
never share a name.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from sessionops import API_VERSION
from sessionops.api.input import AgentInputSpec
from sessionops.cli.errors import EXIT_USER, CliError
from sessionops.views import RunView

NAME_MAX = 253
APPROVE, REJECT = "Approve", "Reject"
STEER, FOLLOW_UP = "Steer", "FollowUp"
# The fields a client writes; the rest of spec (sequence, contextSnapshot, submittedBy) is server-owned.
CLIENT_FIELDS = ("sessionRef", "kind", "delivery", "messages", "overrides", "run", "waitpointId", "answers",
                 "decisions")
_NOT_SLUG = re.compile(r"[^a-z0-9-]+")


# ---------------------------------------------------------------------------------------------------------------
# Names and manifests.

def new_key() -> str:
    return secrets.token_hex(4)


def input_name(prefix: str, key: str) -> str:
    """``<prefix>-<key>``; keys that are not lowercase DNS labels get a hash suffix."""
    key = key.strip()
    if not key:
        raise CliError("--key must not be empty")
    slug = _NOT_SLUG.sub("-", key.lower()).strip("-")
    if slug == key and len(prefix) + 1 + len(key) <= NAME_MAX:
        return f"{prefix}-{key}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    room = max(NAME_MAX - len(prefix) - len(digest) - 2, 0)
    return "-".join(p for p in (prefix, slug[:room].strip("-"), digest) if p)


def _field_path(loc: Sequence[Any]) -> str:
    path = "spec"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def manifest(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """An AgentInput with this spec, validated by the API types (the CRD's own limits)."""
    try:
        wire = AgentInputSpec.model_validate(spec).dump()
    except ValidationError as e:
        problems = [f"{_field_path(err['loc'])}: {err['msg']}" for err in e.errors()]
        raise CliError(problems[0], EXIT_USER, problems[1:]) from None
    return {"apiVersion": API_VERSION, "kind": "AgentInput", "metadata": {"name": name}, "spec": wire}


def message_input(session: str, messages: Sequence[str], *, key: str, delivery: str | None = None,
                  model: str | None = None, approval: str | None = None) -> dict[str, Any]:
    """A Message input. Overrides are one-shot and need FollowUp delivery: they imply it."""
    if not messages:
        raise CliError("give at least one message")
    overrides = {k: v for k, v in (("model", model), ("approvalMode", approval)) if v is not None}
    if overrides and delivery == STEER:
        raise CliError("--model and --approval apply to follow-ups only: a steer runs with the active "
                       "turn's configuration")
    if overrides and delivery is None:
        delivery = FOLLOW_UP
    spec: dict[str, Any] = {"sessionRef": {"name": session}, "kind": "Message",
                            "messages": [{"content": m} for m in messages]}
    if delivery:
        spec["delivery"] = delivery
    if overrides:
        spec["overrides"] = overrides
    return manifest(input_name(session, key), spec)


def continue_input(session: str, *, key: str) -> dict[str, Any]:
    return manifest(input_name(f"{session}-continue", key), {"sessionRef": {"name": session}, "kind": "Continue"})


def waitpoint_of(run: dict[str, Any]) -> dict[str, Any] | None:
    view = RunView(run)
    return dict(view.waitpoint) or None if view.stored_phase == "Waiting" else None


def resume_input(run: dict[str, Any], *, key: str | None = None, decisions: list[dict[str, Any]] | None = None,
                 answers: list[Any] | None = None) -> dict[str, Any]:
    """A Resume input for the run's current waitpoint (named ``<run>-<waitpoint id>`` by default)."""
    waitpoint = waitpoint_of(run)
    if waitpoint is None:
        raise CliError(f"run {run['metadata']['name']} is not waiting")
    name = run["metadata"]["name"]
    spec: dict[str, Any] = {"sessionRef": {"name": RunView(run).session_name}, "kind": "Resume",
                            "run": name, "waitpointId": waitpoint["id"]}
    if decisions is not None:
        spec["decisions"] = decisions
    if answers is not None:
        spec["answers"] = answers
    return manifest(input_name(name, key or waitpoint["id"]), spec)


# ---------------------------------------------------------------------------------------------------------------
# Approval decisions: one resume decides every pending call.

def describe_call(index: int, call: dict[str, Any]) -> str:
    return f"{index} {call.get('tool')} ({call.get('callId')})"


def pending_calls_line(waitpoint: dict[str, Any]) -> str:
    calls = waitpoint.get("calls") or []
    return "pending calls: " + ", ".join(describe_call(i, c) for i, c in enumerate(calls, 1))


def find_call(waitpoint: dict[str, Any], ref: str) -> dict[str, Any]:
    """A pending call by callId, toolCallId, number (1-based, as listed) or unique tool name."""
    calls = list(waitpoint.get("calls") or [])
    for key in ("callId", "toolCallId"):
        for call in calls:
            if call.get(key) == ref:
                return call
    if ref.isdigit() and 1 <= int(ref) <= len(calls):
        return calls[int(ref) - 1]
    by_tool = [c for c in calls if c.get("tool") == ref]
    if len(by_tool) == 1:
        return by_tool[0]
    if by_tool:
        raise CliError(f"{ref!r} matches {len(by_tool)} pending calls: name one by number or call id",
                       details=[pending_calls_line(waitpoint)])
    raise CliError(f"{ref!r} is not a pending call of this waitpoint", details=[pending_calls_line(waitpoint)])


def plan_decisions(waitpoint: dict[str, Any], decision: str, refs: Sequence[str], *,
                   others: Sequence[str] = (), all_calls: bool = False, message: str | None = None,
                   client_checks: bool = True) -> list[dict[str, Any]]:
    """The complete decision list of an ``approve`` / ``reject`` command.

    ``refs`` get ``decision``; ``others`` (``--reject`` on approve, ``--approve`` on reject)
    get the opposite; ``all_calls`` gives ``decision`` to every call not in ``others``. With
    no refs, no ``--all`` and one pending call, that call is meant. Every pending call must
    end up decided: one resume completes the waitpoint. ``message`` goes with every decision.
    Without client checks, unknown refs are sent verbatim and undecided calls are left out
    (admission then says what is wrong).
    """
    if waitpoint.get("kind") != "Approval":
        raise CliError(f"the run waits at a {waitpoint.get('kind')} waitpoint, not for approvals"
                       + (": use `answer`" if waitpoint.get("kind") == "Question" else ""))
    opposite = REJECT if decision == APPROVE else APPROVE
    calls = list(waitpoint.get("calls") or [])
    if all_calls and refs:
        raise CliError("name the calls or use --all, not both")

    def resolve(ref: str) -> str:
        try:
            return find_call(waitpoint, ref)["callId"]
        except CliError:
            if client_checks:
                raise
            return ref

    chosen = {resolve(r): decision for r in refs}
    for ref in others:
        call_id = resolve(ref)
        if chosen.get(call_id) == decision:
            raise CliError(f"call {call_id} is given both {decision} and {opposite}")
        chosen[call_id] = opposite
    if all_calls:
        for call in calls:
            chosen.setdefault(call["callId"], decision)
    elif not refs and not others:
        if len(calls) == 1:
            chosen[calls[0]["callId"]] = decision
        elif client_checks:
            flag = "--reject" if decision == APPROVE else "--approve"
            raise CliError(f"the run waits on {len(calls)} calls and one resume decides them all: name the calls "
                           f"(number, call id or tool), decide the others with {flag}, or use --all",
                           details=[pending_calls_line(waitpoint)])
    undecided = [(i, c) for i, c in enumerate(calls, 1) if c["callId"] not in chosen]
    if undecided and client_checks:
        flag = "--reject" if decision == APPROVE else "--approve"
        raise CliError("one resume decides every pending call; undecided: "
                       + ", ".join(describe_call(i, c) for i, c in undecided)
                       + f" (name them, use {flag} for them, or --all)")
    order = {c["callId"]: i for i, c in enumerate(calls)}
    decisions = []
    for call_id in sorted(chosen, key=lambda c: order.get(c, len(order))):
        item = {"callId": call_id, "decision": chosen[call_id]}
        if message:
            item["message"] = message
        decisions.append(item)
    return decisions


# ---------------------------------------------------------------------------------------------------------------
# Answers: one per question, in order; multi-select answers are comma-separated.

def split_multi(text: str) -> list[str]:
    r"""``"lint, unit tests"`` -> ``["lint", "unit tests"]``; ``\,`` is a literal comma."""
    parts, current, escaped = [], "", False
    for ch in text:
        if escaped:
            current += ch if ch == "," else "\\" + ch
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if escaped:
        current += "\\"
    parts.append(current.strip())
    return parts


def parse_answers(waitpoint: dict[str, Any], raw: Sequence[str]) -> list[Any]:
    """Command-line answers as ``spec.answers``: a list of strings for multi-select questions."""
    questions = list(waitpoint.get("questions") or [])
    return [split_multi(text) if i < len(questions) and questions[i].get("multiSelect") else text
            for i, text in enumerate(raw)]


def _question_label(i: int, question: dict[str, Any]) -> str:
    text = str(question.get("question") or "")
    return f"answer {i + 1} ({text[:60] + '...' if len(text) > 60 else text})"


def answer_problems(waitpoint: dict[str, Any], answers: Sequence[Any]) -> list[str]:
    """Why these answers would be refused (the webhook's rules, worded for the command line)."""
    if waitpoint.get("kind") != "Question":
        return [f"the run waits at a {waitpoint.get('kind')} waitpoint, not for answers"
                + (": use `approve` or `reject`" if waitpoint.get("kind") == "Approval" else "")]
    questions = list(waitpoint.get("questions") or [])
    if len(answers) != len(questions):
        return [f"expected {len(questions)} answers (one per question, in order), got {len(answers)}"]
    problems = []
    for i, (question, answer) in enumerate(zip(questions, answers, strict=True)):
        label = _question_label(i, question)
        values = answer if isinstance(answer, list) else [answer]
        if question.get("multiSelect") and not [v for v in values if v]:
            problems.append(f"{label}: give at least one choice (comma-separated)")
            continue
        seen: set[str] = set()
        options = list(question.get("options") or [])
        for value in values:
            if not value.strip():
                problems.append(f"{label}: an empty choice")
            elif value in seen:
                problems.append(f"{label}: {value!r} is given twice")
            elif options and not question.get("allowOther") and value not in options:
                problems.append(f"{label}: {value!r} is not one of the options: {', '.join(options)}")
            seen.add(value)
    return problems


# ---------------------------------------------------------------------------------------------------------------
# Idempotency: a re-sent key must carry the same intent.

@dataclass(frozen=True)
class Mismatch:
    """One field where a re-sent input differs from the original with the same name."""

    field: str
    sent: Any
    original: Any

    def __str__(self) -> str:
        return f"{self.field}: this request {_show(self.sent)}, original {_show(self.original)}"


def _show(value: Any) -> str:
    if value is None:
        return "(not set)"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


def _normalized(field: str, value: Any) -> Any:
    if field == "kind":
        return value or "Message"

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if x is not None} or None
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    return strip(value)


def _diff(path: str, sent: Any, original: Any) -> list[Mismatch]:
    if sent == original:
        return []
    if isinstance(sent, dict) and isinstance(original, dict):
        return [m for k in sorted(set(sent) | set(original))
                for m in _diff(f"{path}.{k}", sent.get(k), original.get(k))]
    if isinstance(sent, list) and isinstance(original, list) and len(sent) == len(original):
        return [m for i, (a, b) in enumerate(zip(sent, original, strict=True)) for m in _diff(f"{path}[{i}]", a, b)]
    return [Mismatch(path, sent, original)]


def intent_mismatches(sent: dict[str, Any], original: dict[str, Any]) -> list[Mismatch]:
    """Field-by-field differences of the client-written spec. Delivery counts only when this
    request sets it (admission fills it in when the original left it out)."""
    mismatches = []
    for field in CLIENT_FIELDS:
        mine, theirs = _normalized(field, sent.get(field)), _normalized(field, original.get(field))
        if field == "delivery" and mine is None:
            continue
        mismatches += _diff(f"spec.{field}", mine, theirs)
    return mismatches

"""Labels of a delegation tree and deterministic child names."""

from __future__ import annotations

import hashlib
import re

TREE_LABEL = "sessionops.dev/tree"
"""The root session of a delegation tree, on every session below it and on every run."""
PARENT_RUN_LABEL = "sessionops.dev/parent-run"
"""On a child session, its delegated input and its runs: the run that delegated."""
PARENT_SESSION_LABEL = "sessionops.dev/parent-session"
DEPTH_LABEL = "sessionops.dev/depth"
"""Levels below the root (a direct child is 1): bounds runaway recursive delegation."""
DELEGATE_VERB = "delegate"
"""The verb on ``agentruns`` that lets an identity create children on behalf of a run's submitter."""

CHILD_SLUG_MAX = 24
"""Readable prefix of a child session name; with the hash it stays within SESSION_NAME_MAX."""


def child_session_name(parent_run: str, tool_call_id: str, name: str) -> str:
    """The child session of one delegate call: the same parent run and tool call id always
    give the same name, so a resumed or retried parent finds its child instead of making
    another. ``name`` (the model's; may hold ``_`` and capitals) only makes it readable."""
    digest = hashlib.sha256(f"{parent_run}\x00{tool_call_id}".encode()).hexdigest()[:10]
    slug = re.sub(r"[^a-z0-9-]+", "-", name.lower())[:CHILD_SLUG_MAX].strip("-") or "child"
    return f"{slug}-{digest}"


def child_input_name(child_session: str) -> str:
    """The delegated input's name is its idempotency key: a repeated create is AlreadyExists."""
    return f"{child_session}-delegated"


def depth(session: dict) -> int:
    """How far below its tree's root a session is (0 for a root)."""
    value = (session.get("metadata", {}).get("labels") or {}).get(DEPTH_LABEL) or "0"
    return int(value) if value.isdigit() else 0


def tree_root(session: dict) -> str:
    """The root session of the tree ``session`` belongs to (itself when it is a root)."""
    labels = session.get("metadata", {}).get("labels") or {}
    return labels.get(TREE_LABEL) or session["metadata"]["name"]

"""What the API server's answers mean, for both Kubernetes adapters and their callers.

Callers outside the platform catch these instead of importing the ``kubernetes`` client:
``ApiException`` is the client's error (``.status`` is the HTTP code, ``.body`` the Status).
"""

from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException

__all__ = ["ApiException", "Conflict", "Invalid", "status_message"]


class Conflict(Exception):
    """409 from the API server: a stale resourceVersion (the object changed since it was read)
    or an existing name."""


class Invalid(Exception):
    """422 from the API server: the object is invalid (the message names the fields)."""


def status_message(body: str | bytes | None) -> str:
    """The ``message`` of a Status response body (what admission said), or "" when there is none."""
    try:
        return str((json.loads(body or "") or {}).get("message") or "")
    except (ValueError, AttributeError):  # not a JSON Status: the caller falls back to the reason
        return ""

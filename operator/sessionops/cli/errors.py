"""API errors and admission rejections as one clear line, with the plugin's exit codes.

The API server answers a refused request with a ``kind: Status`` body. Three shapes matter:

- an admission webhook denial: ``admission webhook "mutate.sessionops.dev" denied the request:
  spec.decisions[1].callId: 'x' is not a pending call of this waitpoint`` (sessionops writes
  ``<field>: <reason>`` after the prefix);
- a schema or CEL rejection: ``AgentInput.sessionops.dev "x" is invalid: spec.messages: Required
  value: ...`` with ``details.causes[{field, reason, message}]``;
- plain API errors: ``agentruns.sessionops.dev "x" not found``, ``... is forbidden: ...``.

``describe`` turns any of them into ``<field>: <reason>`` text; ``api_error`` adds the
class of failure and the exit code.
"""

from __future__ import annotations

import json
import re
from typing import Any

EXIT_OK = 0
EXIT_USER = 1  # invalid request, usage error, forbidden, unreachable cluster
EXIT_CONFLICT = 2  # 409: the state does not allow it now, or an idempotency key reused for another intent
EXIT_NOT_FOUND = 3  # 404
EXIT_RUN_FAILED = 4  # watch: the run failed or was cancelled
EXIT_TIMEOUT = 5  # watch / cancel --wait: --timeout elapsed
EXIT_INTERRUPTED = 130  # Ctrl-C

KINDS = {"agents": "Agent", "agentsessions": "AgentSession", "agentinputs": "AgentInput", "agentruns": "AgentRun"}

_WEBHOOK = re.compile(r'^admission webhook "[^"]*" denied the request:\s*')
_INVALID = re.compile(r'^[\w.]+ "[^"]*" is invalid:\s*')
_NOT_FOUND = re.compile(r'^(?P<plural>[a-z0-9]+)(?:\.[\w.]+)? "(?P<name>[^"]*)" not found$')
# A CEL or schema "Invalid value: <value>: <reason>"; CEL reports the value as its type name.
_VALUE = re.compile(r'^(?P<value>null|true|false|-?\d[\d.]*|"(?:[^"\\]|\\.)*"|\{.*?\}|\[.*?\]): (?P<rest>.+)$')
_TYPE_NAMES = {'"object"', '"string"', '"integer"', '"number"', '"boolean"', '"array"', "null"}
_UNCHECKED = "some validation rules were not checked"


class CliError(Exception):
    """A failure the plugin reports as one line on stderr, exiting with ``code``."""

    def __init__(self, message: str, code: int = EXIT_USER, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.details = list(details or [])


def exit_code(status: int | None) -> int:
    if status == 409:
        return EXIT_CONFLICT
    if status == 404:
        return EXIT_NOT_FOUND
    return EXIT_USER


def _clean_cause(message: str) -> str:
    """``Required value: x`` -> ``x``; ``Invalid value: "object": x`` -> ``x``; keeps real values."""
    message = message.strip()
    for prefix, alone in (("Required value", "required"), ("Forbidden", "forbidden")):
        if message.startswith(prefix + ": "):
            return message[len(prefix) + 2:]
        if message == prefix:
            return alone
    if message.startswith("Invalid value: "):
        rest = message[len("Invalid value: "):]
        if m := _VALUE.match(rest):
            if m["value"] in _TYPE_NAMES:
                return m["rest"]
            return f"invalid value {m['value']}: {m['rest']}"
        return rest
    return message


def _from_causes(causes: list[dict[str, Any]]) -> str | None:
    parts = []
    for cause in causes:
        text = str(cause.get("message") or cause.get("reason") or "")
        if _UNCHECKED in text:
            continue  # noise that follows the real errors
        field = cause.get("field")
        cleaned = _clean_cause(text)
        parts.append(f"{field}: {cleaned}" if field and field != "<nil>" else cleaned)
    return "; ".join(parts) if parts else None


def _split_list(text: str) -> list[str]:
    """``[a: x, b: y]`` as the API server joins several errors (only when no causes came)."""
    if text.startswith("[") and text.endswith("]"):
        return [p for p in re.split(r", (?=[\w.\[\]<>]+: )", text[1:-1]) if _UNCHECKED not in p]
    return [text]


def describe(status: int | None, body: Any, namespace: str | None = None) -> str:
    """The reason of a refused request as ``<field>: <reason>`` where a field is known. Pure."""
    if isinstance(body, (str, bytes)):
        try:
            body = json.loads(body)
        except ValueError:
            text = body.decode(errors="replace") if isinstance(body, bytes) else body
            return text.strip() or f"HTTP {status}"
    if not isinstance(body, dict):
        return f"HTTP {status}"
    message = str(body.get("message") or "").strip()
    if m := _WEBHOOK.match(message):
        return message[m.end():]  # sessionops writes "<field>: <reason>"
    if m := _NOT_FOUND.match(message):
        kind = KINDS.get(m["plural"], m["plural"])
        where = f" in namespace {namespace}" if namespace else ""
        return f'{kind} "{m["name"]}" not found{where}'
    causes = list((body.get("details") or {}).get("causes") or [])
    if causes and (text := _from_causes(causes)):
        return text
    if m := _INVALID.match(message):
        parts = []
        for part in _split_list(message[m.end():]):
            field, sep, reason = part.partition(": ")
            parts.append(f"{field}: {_clean_cause(reason)}" if sep else part)
        return "; ".join(parts)
    return message or str(body.get("reason") or f"HTTP {status}")


_LABELS = {400: "rejected", 401: "unauthorized", 403: "forbidden", 404: "not found", 409: "conflict",
           422: "rejected", 429: "throttled"}


def api_error(status: int | None, body: Any, namespace: str | None = None) -> CliError:
    """One line for the user (``<class>: <field>: <reason>``) and the exit code."""
    text = describe(status, body, namespace)
    label = _LABELS.get(status or 0, "server error" if (status or 0) >= 500 else f"HTTP {status}")
    if label == "not found" and "not found" in text:
        return CliError(text, exit_code(status))
    return CliError(f"{label}: {text}", exit_code(status))


def from_exception(exc: BaseException, namespace: str | None = None) -> CliError | None:
    """Errors of the kubernetes client (and of the network below it) as a CliError; None for others."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException

    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, ApiException):
        return api_error(exc.status, exc.body, namespace)
    if isinstance(exc, ConfigException):
        return CliError(f"kubeconfig: {exc}")
    import urllib3.exceptions

    if isinstance(exc, (urllib3.exceptions.HTTPError, OSError)):
        reason = getattr(exc, "reason", None) or exc
        return CliError(f"cannot reach the Kubernetes API server: {reason}")
    return None

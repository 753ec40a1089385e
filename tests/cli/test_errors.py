"""API error bodies (as the test cluster and a real API server send them) -> one line + exit code."""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from sessionops.cli.errors import (
    EXIT_CONFLICT,
    EXIT_NOT_FOUND,
    EXIT_USER,
    CliError,
    api_error,
    describe,
    from_exception,
)


def status(code: int, message: str, reason: str = "Forbidden", causes: list[dict] | None = None) -> dict:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code, "details": {}}
    if causes is not None:
        body["details"] = {"name": "x", "group": "sessionops.dev", "kind": "AgentInput", "causes": causes}
    return body


WEBHOOK = 'admission webhook "mutate.sessionops.dev" denied the request: '
UNCHECKED = {"reason": "FieldValueInvalid", "field": "<nil>",
             "message": "Invalid value: null: some validation rules were not checked because the object was "
                        "invalid; correct the existing errors to complete validation"}

CASES = [
    # (status body, expected one line, exit code) -- bodies captured from the local stack
    (status(422, WEBHOOK + "spec.decisions[1].callId: 'x' is not a pending call of this waitpoint"),
     "rejected: spec.decisions[1].callId: 'x' is not a pending call of this waitpoint", EXIT_USER),
    (status(422, 'admission webhook "validate.sessionops.dev" denied the request: spec.answers: expected 2 '
                 "answers (one per question, in order), got 1"),
     "rejected: spec.answers: expected 2 answers (one per question, in order), got 1", EXIT_USER),
    (status(409, WEBHOOK + 'spec.kind: messages are refused while turn "demo-t1" waits for a Resume input'),
     'conflict: spec.kind: messages are refused while turn "demo-t1" waits for a Resume input', EXIT_CONFLICT),
    (status(409, WEBHOOK + 'spec.waitpointId: stale waitpoint "wp-000": the run now waits at "wp-1"'),
     'conflict: spec.waitpointId: stale waitpoint "wp-000": the run now waits at "wp-1"', EXIT_CONFLICT),
    (status(404, WEBHOOK + 'spec.sessionRef.name: agentsession "nosuch" not found in this namespace'),
     'spec.sessionRef.name: agentsession "nosuch" not found in this namespace', EXIT_NOT_FOUND),
    (status(422, 'AgentInput.sessionops.dev "x1" is invalid: spec.messages: Required value: a Message input '
                 "needs at least one message", "Invalid",
            [{"reason": "FieldValueRequired", "field": "spec.messages",
              "message": "Required value: a Message input needs at least one message"}]),
     "rejected: spec.messages: a Message input needs at least one message", EXIT_USER),
    (status(422, "AgentInput.sessionops.dev \"x3\" is invalid: [...]", "Invalid",
            [{"reason": "FieldValueTooLong", "message": "Too long: may not be more than 32768 bytes",
              "field": "spec.messages[0].content"}, UNCHECKED]),
     "rejected: spec.messages[0].content: Too long: may not be more than 32768 bytes", EXIT_USER),
    (status(422, "...", "Invalid",
            [{"reason": "FieldValueNotSupported", "field": "spec.delivery",
              "message": 'Unsupported value: "Later": supported values: "Steer", "FollowUp"'},
             {"reason": "FieldValueNotSupported", "field": "spec.kind",
              "message": 'Unsupported value: "Bogus": supported values: "Message", "Resume", "Continue"'},
             UNCHECKED]),
     'rejected: spec.delivery: Unsupported value: "Later": supported values: "Steer", "FollowUp"; '
     'spec.kind: Unsupported value: "Bogus": supported values: "Message", "Resume", "Continue"', EXIT_USER),
    # A real API server names the CEL value by its type: dropped.
    (status(422, 'AgentRun.sessionops.dev "r" is invalid: spec.cancel: Invalid value: "boolean": cancel can only '
                 "change from false to true", "Invalid",
            [{"reason": "FieldValueInvalid", "field": "spec.cancel",
              "message": 'Invalid value: "boolean": cancel can only change from false to true'}]),
     "rejected: spec.cancel: cancel can only change from false to true", EXIT_USER),
    (status(422, "...", "Invalid", [{"reason": "FieldValueInvalid", "field": "metadata.name",
                                     "message": 'Invalid value: "X_8": a lowercase RFC 1123 subdomain must ...'}]),
     'rejected: metadata.name: invalid value "X_8": a lowercase RFC 1123 subdomain must ...', EXIT_USER),
    # Without causes, the message itself is parsed.
    (status(422, 'AgentInput.sessionops.dev "x" is invalid: spec: Invalid value: "object": overrides apply to '
                 "FollowUp delivery only", "Invalid"),
     "rejected: spec: overrides apply to FollowUp delivery only", EXIT_USER),
    (status(422, 'AgentInput.sessionops.dev "x" is invalid: [spec.kind: Unsupported value: "B", spec.run: '
                 "Required value, <nil>: Invalid value: null: some validation rules were not checked because "
                 "the object was invalid]", "Invalid"),
     'rejected: spec.kind: Unsupported value: "B"; spec.run: required', EXIT_USER),
    (status(404, 'agentruns.sessionops.dev "nosuch" not found', "NotFound"),
     'AgentRun "nosuch" not found in namespace team-a', EXIT_NOT_FOUND),
    (status(403, 'agentinputs.sessionops.dev is forbidden: User "bob" cannot create resource "agentinputs"'),
     'forbidden: agentinputs.sessionops.dev is forbidden: User "bob" cannot create resource "agentinputs"',
     EXIT_USER),
    (status(500, 'Internal error occurred: failed calling webhook "mutate.sessionops.dev": connection refused',
            "InternalError"),
     'server error: Internal error occurred: failed calling webhook "mutate.sessionops.dev": connection refused',
     EXIT_USER),
]


@pytest.mark.parametrize(("body", "line", "code"), CASES, ids=[c[1][:40] for c in CASES])
def test_status_bodies_become_one_line_with_the_field(body: dict, line: str, code: int) -> None:
    error = api_error(body["code"], json.dumps(body), namespace="team-a")
    assert error.message == line
    assert "\n" not in error.message
    assert error.code == code


def test_describe_tolerates_non_json_bodies() -> None:
    assert describe(502, "Bad Gateway") == "Bad Gateway"
    assert describe(503, b"") == "HTTP 503"
    assert describe(500, None) == "HTTP 500"


def test_kubernetes_client_exceptions_are_mapped() -> None:
    exc = ApiException(status=409, reason="Conflict")
    exc.body = json.dumps(status(409, WEBHOOK + "spec.kind: Continue is accepted only while the session's "
                                                "queue is paused"))
    error = from_exception(exc)
    assert error is not None and error.code == EXIT_CONFLICT
    assert error.message == "conflict: spec.kind: Continue is accepted only while the session's queue is paused"
    config_error = from_exception(ConfigException("Invalid kube-config file. No configuration found."))
    assert config_error is not None and config_error.message.startswith("kubeconfig: ")
    network = from_exception(urllib3.exceptions.MaxRetryError(None, "/api", reason="Connection refused"))
    assert network is not None and network.message == "cannot reach the Kubernetes API server: Connection refused"
    own = CliError("x", 3)
    assert from_exception(own) is own
    assert from_exception(ValueError("bug")) is None

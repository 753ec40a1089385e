"""An in-memory stand-in for ``sessionops.cli.client.Kube`` (no cluster, no network).

Objects are stored per (plural, name). A *script* makes successive GETs of one object
return successive states (the last one sticks), which is how watch tests play a run's life.
``admit`` can refuse creations with a ``kind: Status`` body, as the API server does.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException

from sessionops.api.names import SESSION_LABEL


def api_exception(code: int, message: str, reason: str = "Forbidden", **details: Any) -> ApiException:
    exc = ApiException(status=code, reason=reason)
    exc.body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": message, "reason": reason, "code": code, "details": details})
    return exc


def denied(code: int, message: str) -> ApiException:
    return api_exception(code, f'admission webhook "mutate.sessionops.dev" denied the request: {message}')


class FakeKube:
    def __init__(self, namespace: str = "team-a", namespace_explicit: bool = True) -> None:
        self.namespace = namespace
        self.namespace_explicit = namespace_explicit
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.scripts: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.created: list[dict[str, Any]] = []
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.admit: Callable[[dict[str, Any]], None] | None = None
        self.race: set[str] = set()  # names that "appear" between find() and create()
        self.gets = 0

    # -- set-up --------------------------------------------------------------------------------------------------

    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.objects[(plural, obj["metadata"]["name"])] = obj
        return obj

    def script(self, plural: str, name: str, states: list[dict[str, Any]]) -> None:
        self.scripts[(plural, name)] = list(states)
        self.objects[(plural, name)] = states[0]

    # -- the Kube interface --------------------------------------------------------------------------------------

    def get(self, plural: str, name: str) -> dict[str, Any]:
        self.gets += 1
        key = (plural, name)
        if key in self.scripts:
            states = self.scripts[key]
            self.objects[key] = states.pop(0) if len(states) > 1 else states[0]
        if key not in self.objects:
            raise api_exception(404, f'{plural}.sessionops.dev "{name}" not found', "NotFound")
        return copy.deepcopy(self.objects[key])

    def find(self, plural: str, name: str) -> dict[str, Any] | None:
        if (plural, name) in self.race:
            return None
        try:
            return self.get(plural, name)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def list(self, plural: str, session: str | None = None) -> list[dict[str, Any]]:
        items = []
        for (p, _), obj in self.objects.items():
            labels = (obj.get("metadata") or {}).get("labels") or {}
            ref = ((obj.get("spec") or {}).get("sessionRef") or {}).get("name")
            if p == plural and (session is None or labels.get(SESSION_LABEL) == session or ref == session):
                items.append(copy.deepcopy(obj))
        return items

    def create(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        if (plural, name) in self.objects:
            raise api_exception(409, f'{plural}.sessionops.dev "{name}" already exists', "AlreadyExists")
        if self.admit is not None:
            self.admit(body)
        obj = copy.deepcopy(body)
        obj["spec"]["sequence"] = 1 + sum(1 for (p, _) in self.objects if p == plural)
        if obj["spec"].get("kind") == "Message":
            obj["spec"].setdefault("delivery", "FollowUp")
        self.created.append(obj)
        self.objects[(plural, name)] = obj
        return copy.deepcopy(obj)

    def merge_patch(self, plural: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append((plural, name, patch))
        obj = self.objects[(plural, name)]
        for section, values in patch.items():
            obj.setdefault(section, {}).update(values)
        return copy.deepcopy(obj)


def session(name: str = "demo", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team-a"},
            "spec": {"agentRef": {"name": "helper"}, "model": "replay/parallel-approval"},
            "status": {"phase": "Idle", "model": "replay/parallel-approval", "approvalMode": "Default",
                       "queue": {"pending": 0, "paused": False}, **status}}


def run(name: str = "demo-t1", phase: str | None = "Running", session_name: str = "demo", seq: int = 1,
        cancel: bool = False, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {SESSION_LABEL: session_name, "sessionops.dev/sequence": str(seq)}},
            "spec": {"sessionRef": {"name": session_name}, "inputs": [f"{session_name}-in{seq}"], "cancel": cancel},
            "status": {"phase": phase, **status} if phase else {}}


def an_input(name: str, session_name: str = "demo", phase: str | None = None, run_name: str | None = None,
             **spec: Any) -> dict[str, Any]:
    status = {k: v for k, v in (("phase", phase), ("run", run_name)) if v}
    return {"metadata": {"name": name, "labels": {SESSION_LABEL: session_name}},
            "spec": {"sessionRef": {"name": session_name}, "kind": "Message", **spec}, "status": status}

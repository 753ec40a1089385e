"""Generate the CRDs in ``crds/`` from the pydantic models: ``python -m sessionops.api.crds``.

The models are the single source of truth; a test fails when ``crds/`` drifts.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml

from sessionops import GROUP, VERSION
from sessionops.api.agent import Agent
from sessionops.api.common import ApiModel
from sessionops.api.input import AgentInput
from sessionops.api.run import AgentRun
from sessionops.api.session import AgentSession
from sessionops.api.transcript import AgentTranscript

# Keywords that are not part of a structural OpenAPI v3 schema (or mean nothing there).
_DROPPED = {"title", "$defs", "additionalProperties", "discriminator", "examples"}
_PRESERVE = "x-kubernetes-preserve-unknown-fields"


def _column(name: str, path: str, type_: str = "string", priority: int = 0, description: str = "") -> dict:
    col = {"name": name, "type": type_, "jsonPath": path}
    if priority:
        col["priority"] = priority
    if description:
        col["description"] = description
    return col


AGE = _column("Age", ".metadata.creationTimestamp", "date")

KINDS: list[dict[str, Any]] = [
    {"model": Agent, "plural": "agents", "singular": "agent", "short": ["agt"], "columns": [
        _column("Model", ".status.model"), _column("Approval", ".status.approvalMode"),
        _column("Ready", ".status.conditions[?(@.type==\"Ready\")].status"),
        _column("Reason", ".status.conditions[?(@.type==\"Ready\")].reason", priority=1),
        _column("Tools", ".spec.tools", priority=1), AGE]},
    {"model": AgentSession, "plural": "agentsessions", "singular": "agentsession", "short": ["asess"], "columns": [
        _column("Agent", ".spec.agentRef.name"), _column("Phase", ".status.phase"),
        _column("Model", ".status.model"), _column("Approval", ".status.approvalMode"),
        _column("Active", ".status.activeRun"), _column("Pending", ".status.queue.pending", "integer"),
        _column("Paused", ".status.queue.paused", "boolean", priority=1), AGE]},
    {"model": AgentInput, "plural": "agentinputs", "singular": "agentinput", "short": ["ainput"], "columns": [
        _column("Session", ".spec.sessionRef.name"), _column("Kind", ".spec.kind"),
        _column("Delivery", ".spec.delivery"), _column("Seq", ".spec.sequence", "integer"),
        _column("Phase", ".status.phase"), _column("Run", ".status.run"),
        _column("Model", ".spec.contextSnapshot.model", priority=1), AGE]},
    {"model": AgentRun, "plural": "agentruns", "singular": "agentrun", "short": ["arun"], "columns": [
        _column("Session", ".spec.sessionRef.name"), _column("Phase", ".status.phase"),
        _column("Waitpoint", ".status.waitpoint.kind"), _column("Model", ".spec.contextSnapshot.model"),
        _column("Cancel", ".spec.cancel", "boolean", priority=1),
        _column("Result", ".status.result.text", priority=1), AGE]},
    # Written whole by the worker (no status: nothing observes a chunk).
    {"model": AgentTranscript, "plural": "agenttranscripts", "singular": "agenttranscript", "short": ["atr"],
     "status": False, "columns": [_column("Run", ".spec.run"), _column("Session", ".spec.session"),
                 _column("Index", ".spec.index", "integer"), AGE]},
]


def _structural(node: Any, defs: dict[str, Any]) -> Any:
    """Turn a pydantic JSON schema node into a structural OpenAPI v3 schema node."""
    if not isinstance(node, dict):
        return node
    node = dict(node)
    if "$ref" in node:
        target = copy.deepcopy(defs[node.pop("$ref").split("/")[-1]])
        target.update({k: v for k, v in node.items() if k in ("description", "default")})
        node = target
    if "anyOf" in node:
        options = [o for o in node.pop("anyOf") if o.get("type") != "null"]
        if len(options) == 1:
            # Keywords beside anyOf (description, default, json_schema_extra) refine the option.
            node = {**_structural(options[0], defs), **node}
        else:
            # A union of types is not structural: keep it open and validate it with CEL.
            node = {k: v for k, v in node.items() if k in ("description", "default")}
            node[_PRESERVE] = True
    if "const" in node:
        node["enum"] = [node.pop("const")]
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED or (key == "default" and value is None):
            continue
        if key == "properties":
            out[key] = {name: _structural(v, defs) for name, v in value.items()}
        elif key == "items":
            out[key] = _structural(value, defs)
        else:
            out[key] = value
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and extra and not out.get(_PRESERVE):
        out["additionalProperties"] = _structural(extra, defs)
    if out.get(_PRESERVE) and out.get("type") == "object" and not out.get("properties"):
        out.pop("additionalProperties", None)
    if out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
        out[_PRESERVE] = True
    return out


def _without_item_defaults(node: Any, in_list: bool = False) -> Any:
    """Drop ``default`` inside list items: a merge patch (``kubectl apply``, Argo CD) replaces a
    list whole, so a value the server fills into an item shows as a change on every re-apply.
    The models' defaults still apply where the code parses the object."""
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _without_item_defaults(v, in_list) for name, v in value.items()}
        elif not (in_list and key == "default"):
            out[key] = _without_item_defaults(value, in_list or key == "items")
    return out


def openapi_schema(model: type[ApiModel]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.get("$defs", {})
    schema = _structural(raw, defs)
    props = schema["properties"]
    # Clients own spec (status lists are written by the operator, which sends every field).
    props["spec"] = _without_item_defaults(props["spec"])
    props["apiVersion"] = {"type": "string", "description": "APIVersion of this object."}
    props["kind"] = {"type": "string", "description": "Kind of this object."}
    props["metadata"] = {"type": "object"}
    schema.pop("required", None)
    schema["required"] = ["spec"]
    schema["description"] = (model.__doc__ or "").strip().splitlines()[0]
    return schema


def crd(kind: dict[str, Any]) -> dict[str, Any]:
    model = kind["model"]
    name = model.model_fields["kind"].default
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind['plural']}.{GROUP}", "labels": {"app.kubernetes.io/part-of": "sessionops"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": name, "listKind": f"{name}List", "plural": kind["plural"],
                      "singular": kind["singular"], "shortNames": kind["short"], "categories": ["sessionops"]},
            "versions": [{
                "name": VERSION, "served": True, "storage": True,
                "subresources": {"status": {}} if kind.get("status", True) else {},
                "additionalPrinterColumns": kind["columns"],
                "schema": {"openAPIV3Schema": openapi_schema(model)},
            }],
        },
    }


def render_all() -> dict[str, str]:
    """File name -> YAML text, for every CRD."""
    header = "# Generated by `python -m sessionops.api.crds` from sessionops.api. Do not edit.\n"
    return {f"{GROUP}_{k['plural']}.yaml": header + yaml.safe_dump(crd(k), sort_keys=False, width=120)
            for k in KINDS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", action="append",
                        help="directory to write (default: crds and charts/sessionops/crds)")
    parser.add_argument("--check", action="store_true", help="exit 1 when files differ instead of writing")
    args = parser.parse_args(argv)
    stale = []
    for out in map(Path, args.out or ["crds", "charts/sessionops/crds"]):
        out.mkdir(parents=True, exist_ok=True)
        for fname, text in render_all().items():
            path = out / fname
            if args.check:
                if not path.exists() or path.read_text() != text:
                    stale.append(str(path))
            else:
                path.write_text(text)
    if stale:
        print("stale CRDs (run `make crds`): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The CRDs are generated from the pydantic models and are structural and self-describing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sessionops.api import crds

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_crds_match_the_generator() -> None:
    for directory in (ROOT / "crds", ROOT / "charts" / "sessionops" / "crds"):
        for fname, text in crds.render_all().items():
            path = directory / fname
            assert path.exists(), f"{path} missing: run `make crds`"
            assert path.read_text() == text, f"{path} drifted from sessionops.api: run `make crds`"


def test_generator_check_mode_reports_drift(tmp_path: Path) -> None:
    out = tmp_path / "crds"
    assert crds.main(["--out", str(out)]) == 0
    assert crds.main(["--out", str(out), "--check"]) == 0
    next(out.iterdir()).write_text("tampered")
    assert crds.main(["--out", str(out), "--check"]) == 1


def _walk(node: dict, path: str):
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from _walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}{{}}")


ALL = [yaml.safe_load(text) for text in crds.render_all().values()]


@pytest.mark.parametrize("crd", ALL, ids=lambda c: c["metadata"]["name"])
def test_schema_is_structural(crd: dict) -> None:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _walk(schema, ""):
        open_ = node.get("x-kubernetes-preserve-unknown-fields") or node.get("x-kubernetes-int-or-string")
        assert "type" in node or open_, f"{path}: no type"
        assert not ({"anyOf", "oneOf", "allOf", "$ref", "title"} & set(node)), f"{path}: not structural"
        assert not ("properties" in node and "additionalProperties" in node), f"{path}: both properties kinds"


@pytest.mark.parametrize("crd", ALL, ids=lambda c: c["metadata"]["name"])
def test_every_user_facing_field_is_described(crd: dict) -> None:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for section in ("spec", "status"):
        if section not in schema["properties"]:
            continue
        for path, node in _walk(schema["properties"][section], section):
            if path.endswith("[]") or path.endswith("{}"):
                continue
            assert node.get("description"), f"{crd['spec']['names']['kind']}.{path} has no description"


@pytest.mark.parametrize("crd", ALL, ids=lambda c: c["metadata"]["name"])
def test_no_server_default_inside_a_list_a_client_owns(crd: dict) -> None:
    """kubectl apply sends a changed list whole: a default the server adds to an item would make
    every re-apply of the same manifest a change (issue 14: ``required: false`` in contextSchema)."""
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for path, node in _walk(spec, "spec"):
        if "[]" in path:
            assert "default" not in node, f"{crd['spec']['names']['kind']}.{path} has a server default"


def test_context_field_defaults_apply_where_the_agent_is_parsed() -> None:
    from sessionops.api.agent import AgentSpec

    parsed = AgentSpec.model_validate({"systemPrompt": "x", "contextSchema": [{"name": "team", "type": "string"}]})
    assert (parsed.context_schema[0].required, parsed.context_schema[0].description) == (False, "")


def test_names_columns_and_subresources() -> None:
    by_kind = {c["spec"]["names"]["kind"]: c for c in ALL}
    assert set(by_kind) == {"Agent", "AgentSession", "AgentInput", "AgentRun", "AgentTranscript"}
    short = {k: c["spec"]["names"]["shortNames"] for k, c in by_kind.items()}
    assert short == {"Agent": ["agt"], "AgentSession": ["asess"], "AgentInput": ["ainput"], "AgentRun": ["arun"],
                     "AgentTranscript": ["atr"]}
    # A transcript chunk is written whole by the worker: no status, nothing for kopf.
    assert by_kind["AgentTranscript"]["spec"]["versions"][0]["subresources"] == {}
    for c in [c for k, c in by_kind.items() if k != "AgentTranscript"]:
        version = c["spec"]["versions"][0]
        assert version["subresources"] == {"status": {}}
        assert c["spec"]["names"]["categories"] == ["sessionops"]
        names = [col["name"] for col in version["additionalPrinterColumns"]]
        assert names[-1] == "Age"
        # kopf keeps its bookkeeping in status.kopf: it must survive pruning.
        status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
        assert status["properties"]["kopf"]["x-kubernetes-preserve-unknown-fields"] is True

"""The chart lints and renders with Helm 3 and Helm 4, and every manifest is valid."""

from __future__ import annotations

import copy
import functools
import re
import tarfile
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils
import pytest
import referencing

from tests.chart.helm import (
    CHART,
    DEFAULT_WORKER_NAMESPACES,
    EXPECTED_MAJOR,
    NAMESPACE,
    RELEASE,
    ROOT,
    VALUE_SETS,
    Rendered,
    Renderer,
    helm_version,
    parse_docs,
    run_helm,
)

# The chart's kubeVersion floor and the newest release this environment's kubectl speaks.
KUBE_VERSIONS = ("1.30", "1.35")


def test_binaries_are_helm_3_and_4(helm: str) -> None:
    assert helm_version(helm).startswith(EXPECTED_MAJOR[helm]), helm_version(helm)


def test_lint_strict(helm: str, values_name: str, renderer: Renderer) -> None:
    out = run_helm(helm, "lint", "--strict", str(CHART), "--namespace", NAMESPACE,
                   values=VALUE_SETS[values_name], tmp_dir=renderer.tmp_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 chart(s) failed" in out.stdout
    assert "[WARNING]" not in out.stdout and "[ERROR]" not in out.stdout, out.stdout


def _masked(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Without what is random on each render (generated certificates and passwords)."""
    out = []
    for doc in copy.deepcopy(docs):
        if doc["kind"] == "Secret":
            doc["data"] = sorted(doc.get("data", {}))
        for hook in doc.get("webhooks", []):
            hook["clientConfig"].pop("caBundle", None)
        out.append(doc)
    return sorted(out, key=lambda d: (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]))


def test_helm3_and_helm4_render_the_same(values_name: str, renderer: Renderer) -> None:
    four = renderer.template("helm4", values_name)
    three = renderer.template("helm3", values_name)
    assert _masked(three.docs) == _masked(four.docs)


def test_renders_for_the_oldest_supported_kubernetes(helm: str, renderer: Renderer) -> None:
    rendered = renderer.template(helm, "default", "--kube-version", "1.30.0")
    assert rendered.one("Deployment", f"{RELEASE}-operator")
    out = renderer.template_values(helm, {}, "--kube-version", "1.29.0")
    assert out.returncode != 0 and "kubeVersion" in out.stderr, out.stderr


# --- offline schema validation -------------------------------------------------------

@functools.cache
def _kubernetes_validator(version: str, api_version: str, kind: str) -> jsonschema.protocols.Validator:
    """kubernetes-validate's strict schema for one kind, built once.

    ``kubernetes_validate.validate`` re-reads its 1.5 MB definitions and rebuilds the
    validator for every object; this is the same check with the same schema files.
    """
    resolved = [v for v in kubernetes_validate.utils.all_versions()
                if kubernetes_validate.utils.major_minor(v) <= version][-1]
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema_dir = f"kubernetes-json-schema/v{resolved}-local-strict"
    schema = kubernetes_validate.utils.schema_contents(
        f"{schema_dir}/{kind.lower()}-{group_version}.json", version)
    definitions = kubernetes_validate.utils.schema_contents(f"{schema_dir}/_definitions.json", version)
    registry = referencing.Resource.from_contents(definitions) @ (
        referencing.Resource.from_contents(schema) @ referencing.Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


# Kinds of CRDs the chart may create objects of, checked against the fields we use.
_STR = {"type": "string"}
_LABELS = {"type": "object", "additionalProperties": _STR}
_META = {"type": "object", "required": ["name"], "properties": {
    "name": _STR, "namespace": _STR, "labels": _LABELS, "annotations": _LABELS}, "additionalProperties": False}
CUSTOM_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): {
        "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "properties": {
            "apiVersion": _STR, "kind": _STR, "metadata": _META,
            "spec": {"type": "object", "required": ["selector", "endpoints"], "additionalProperties": False,
                     "properties": {
                         "namespaceSelector": {"type": "object", "additionalProperties": False, "properties": {
                             "any": {"type": "boolean"}, "matchNames": {"type": "array", "items": _STR}}},
                         "selector": {"type": "object", "additionalProperties": False, "properties": {
                             "matchLabels": _LABELS, "matchExpressions": {"type": "array"}}},
                         "endpoints": {"type": "array", "minItems": 1, "items": {
                             "type": "object", "additionalProperties": False, "properties": {
                                 "port": _STR, "path": _STR, "interval": _STR, "scrapeTimeout": _STR,
                                 "scheme": _STR}}}}}},
        "additionalProperties": False},
    ("cert-manager.io/v1", "Issuer"): {
        "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "properties": {
            "apiVersion": _STR, "kind": _STR, "metadata": _META,
            "spec": {"type": "object", "minProperties": 1, "maxProperties": 1, "properties": {
                "selfSigned": {"type": "object"}, "ca": {"type": "object"}}, "additionalProperties": False}},
        "additionalProperties": False},
    ("cert-manager.io/v1", "Certificate"): {
        "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "properties": {
            "apiVersion": _STR, "kind": _STR, "metadata": _META,
            "spec": {"type": "object", "required": ["secretName", "issuerRef"], "additionalProperties": False,
                     "properties": {
                         "secretName": _STR, "commonName": _STR,
                         "dnsNames": {"type": "array", "minItems": 1, "items": _STR},
                         "duration": _STR, "renewBefore": _STR,
                         "privateKey": {"type": "object", "additionalProperties": False, "properties": {
                             "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]}, "size": {"type": "integer"},
                             "rotationPolicy": {"enum": ["Never", "Always"]}}},
                         "usages": {"type": "array", "items": {"enum": [
                             "server auth", "client auth", "digital signature", "key encipherment"]}},
                         "issuerRef": {"type": "object", "required": ["name"], "additionalProperties": False,
                                       "properties": {"name": _STR, "kind": {"enum": ["Issuer", "ClusterIssuer"]},
                                                      "group": _STR}}}}},
        "additionalProperties": False},
}


def _validate(doc: dict[str, Any], version: str) -> None:
    custom = CUSTOM_SCHEMAS.get((doc["apiVersion"], doc["kind"]))
    if custom is not None:
        jsonschema.Draft202012Validator(custom).validate(doc)
        return
    # Built-in kinds and CustomResourceDefinitions: the Kubernetes OpenAPI, strict.
    _kubernetes_validator(version, doc["apiVersion"], doc["kind"]).validate(doc)


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_manifests_are_valid_kubernetes(values_name: str, version: str, renderer: Renderer) -> None:
    rendered = renderer.template("helm4", values_name, "--include-crds")
    problems = []
    for doc in rendered.docs:
        try:
            _validate(doc, version)
        except jsonschema.ValidationError as e:
            path = "/".join(str(p) for p in e.absolute_path)
            problems.append(f"{doc['kind']}/{doc['metadata']['name']} at /{path}: {e.message}")
    assert not problems, "\n".join(problems)


def test_every_kind_is_known(renderer: Renderer) -> None:
    """No manifest escapes validation: each kind is built in, a CRD, or in CUSTOM_SCHEMAS."""
    for name in VALUE_SETS:
        for doc in renderer.template("helm4", name, "--include-crds").docs:
            if (doc["apiVersion"], doc["kind"]) in CUSTOM_SCHEMAS:
                continue
            for version in KUBE_VERSIONS:
                try:
                    _kubernetes_validator(version, doc["apiVersion"], doc["kind"])
                except FileNotFoundError:
                    pytest.fail(f"{doc['apiVersion']} {doc['kind']} has no Kubernetes {version} schema")


def test_the_validation_catches_mistakes(default: Rendered) -> None:
    """The strict schemas reject an unknown field and a wrong type (the check is real)."""
    deployment = copy.deepcopy(default.find("Deployment", "-operator"))
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContxt"] = {}
    with pytest.raises(jsonschema.ValidationError):
        _validate(deployment, KUBE_VERSIONS[-1])
    deployment = copy.deepcopy(default.find("Deployment", "-operator"))
    deployment["spec"]["replicas"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        _validate(deployment, KUBE_VERSIONS[-1])
    # ... and it agrees with kubernetes-validate's own entry point.
    assert kubernetes_validate.validate(default.find("Deployment", "-operator"), KUBE_VERSIONS[-1], strict=True)


def test_every_object_is_namespaced_in_the_release_or_cluster_scoped(rendered: Any) -> None:
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                      "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
    worker_namespaces = set(rendered.values.get("workerNamespaces") or DEFAULT_WORKER_NAMESPACES)
    for doc in rendered.docs:
        ns = doc["metadata"].get("namespace")
        where = f"{doc['kind']}/{doc['metadata']['name']}"
        if doc["kind"] in cluster_scoped:
            assert ns is None, where
        elif ns != NAMESPACE:
            # Only the worker's account, its RBAC and its egress policy live in the worker namespaces
            # (the database credential there is the operator's to write at run time, never a copy of
            # the admin DSN).
            assert doc["kind"] in {"ServiceAccount", "Role", "RoleBinding", "NetworkPolicy"}, where
            assert ns in worker_namespaces, where


def test_standard_labels(rendered: Any) -> None:
    for doc in rendered.docs:
        labels = doc["metadata"].get("labels", {})
        for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component",
                    "app.kubernetes.io/managed-by", "app.kubernetes.io/part-of", "helm.sh/chart"):
            assert key in labels, f"{doc['kind']}/{doc['metadata']['name']} lacks label {key}"


# --- CRDs ------------------------------------------------------------------------------

def test_chart_crds_are_the_generated_ones() -> None:
    generated = {p.name: p.read_text() for p in (ROOT / "crds").glob("*.yaml")}
    shipped = {p.name: p.read_text() for p in (CHART / "crds").glob("*.yaml")}
    assert generated, "crds/ is empty"
    assert shipped.keys() == generated.keys(), "run `make crds`"
    stale = [name for name in generated if shipped[name] != generated[name]]
    assert not stale, f"charts/sessionops/crds differs from crds/ for {stale}: run `make crds`"


def test_crds_are_rendered_only_with_include_crds(renderer: Renderer) -> None:
    plain = renderer.template("helm4", "default")
    with_crds = renderer.template("helm4", "default", "--include-crds")
    ours = {d["metadata"]["name"] for d in with_crds.of_kind("CustomResourceDefinition")}
    assert {"agents.sessionops.dev", "agentsessions.sessionops.dev", "agentinputs.sessionops.dev",
            "agentruns.sessionops.dev"} <= ours
    # The template CRD (kopf's peering) is always in the manifest; ours are in crds/.
    assert {d["metadata"]["name"] for d in plain.of_kind("CustomResourceDefinition")} == {
        "clusterkopfpeerings.kopf.dev"}


def test_peering_crd_is_optional(renderer: Renderer) -> None:
    assert not renderer.template("helm4", "minimal").of_kind("CustomResourceDefinition")
    crd = renderer.template("helm4", "default").one("CustomResourceDefinition")
    assert crd["spec"]["scope"] == "Cluster" and crd["spec"]["group"] == "kopf.dev"
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


# --- bad values fail clearly -----------------------------------------------------------

BAD_VALUES = [
    ({"bogus": 1}, "additional properties 'bogus' not allowed"),
    ({"operator": {"replicas": 0}}, "/operator/replicas"),
    ({"operator": {"replica": 2}}, "additional properties 'replica' not allowed"),
    ({"config": {"defaults": {"model": "gpt-4o-mini", "approvalMode": "Sometimes"}}},
     "/config/defaults/approvalMode"),
    ({"config": {"models": [{"name": "m", "provider": "anthropic", "model": "x"}]}}, "/config/models/0/provider"),
    ({"config": {"delegationTimeoutSeconds": 0}}, "/config/delegationTimeoutSeconds"),
    ({"config": {"delegationMaxDepth": 0}}, "/config/delegationMaxDepth"),
    ({"webhook": {"timeoutSeconds": 31}}, "/webhook/timeoutSeconds"),
    ({"webhook": {"certManager": {"enabled": True, "issuerRef": {"name": "x", "kind": "Vault"}}}},
     "/webhook/certManager/issuerRef/kind"),
    ({"worker": {"rbac": {"extraRules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]}}},
     "/worker/rbac/extraRules/0/verbs/0"),
    ({"image": {"digest": "latest"}}, "/image/digest"),
    ({"workerNamespaces": ["Not_A_Namespace"]}, "/workerNamespaces/0"),
    ({"replay": {"scenarios": {"x": {"responses": []}}}}, "/replay/scenarios/x/responses"),
    ({"replay": {"scenarios": {"x": {"turns": [{"cue": "a"}]}}}}, "/replay/scenarios/x/turns/0"),
]


@pytest.mark.parametrize(("values", "message"), BAD_VALUES, ids=[m for _, m in BAD_VALUES])
def test_schema_rejects_bad_values(helm: str, values: dict[str, Any], message: str, renderer: Renderer) -> None:
    out = renderer.template_values(helm, values)
    assert out.returncode != 0
    assert "values don't meet the specifications of the schema" in out.stderr, out.stderr
    assert message in out.stderr, out.stderr


TEMPLATE_FAILURES = [
    ({"config": {"defaults": {"model": "nope"}}}, 'config.defaults.model: "nope" is not in the model catalog'),
    ({"externalDatabase": {"existingSecret": "dsn"}}, "also set postgresql.enabled=false"),
    ({"postgresql": {"enabled": False}}, "no database"),
    ({"config": {"models": [{"name": "a", "provider": "openai", "model": "a"},
                            {"name": "a", "provider": "openai", "model": "b"}],
                 "defaults": {"model": "a"}}}, 'the catalog name "a" appears twice'),
    ({"replay": {"enabled": True, "scenarios": {"hello": {"responses": [{"content": "x"}]}}},
      "config": {"models": [{"name": "replay/hello", "provider": "replay", "model": "hello"}],
                 "defaults": {"model": "replay/hello"}}}, 'the catalog name "replay/hello" appears twice'),
    ({"operator": {"serviceAccount": {"create": False}}}, "operator.serviceAccount.name is required"),
]


@pytest.mark.parametrize(("values", "message"), TEMPLATE_FAILURES, ids=[m for _, m in TEMPLATE_FAILURES])
def test_inconsistent_values_fail_with_a_message(helm: str, values: dict[str, Any], message: str,
                                                 renderer: Renderer) -> None:
    out = renderer.template_values(helm, values)
    assert out.returncode != 0
    assert message in out.stderr, out.stderr


# --- NOTES.txt -------------------------------------------------------------------------

@pytest.mark.parametrize("values_set", ["default", "replay", "external-db"])
def test_notes(values_set: str, renderer: Renderer) -> None:
    # Helm 3's install --dry-run=client still asks a cluster for its version; Helm 4's does not.
    out = run_helm("helm4", "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client",
                   values=VALUE_SETS[values_set], tmp_dir=renderer.tmp_dir)
    assert out.returncode == 0, out.stderr
    notes = out.stdout.split("NOTES:", 1)[1]
    assert f"deployment/{RELEASE}-operator" in notes
    if values_set == "replay":
        assert f"http://{RELEASE}-replay.{NAMESPACE}.svc:8089/v1" in notes
        assert "replay/hello" in notes
    if values_set == "external-db":
        assert "secret/sessionops-dsn" in notes
    # The manifest of a dry-run install is the same chart as `helm template`.
    manifest = out.stdout.split("MANIFEST:", 1)[1].split("NOTES:", 1)[0]
    kinds = {d["kind"] for d in parse_docs(manifest)}
    assert {"Deployment", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} <= kinds


def test_package(helm: str, renderer: Renderer, tmp_path: Path) -> None:
    """The packaged chart carries the CRDs, the scenarios and the schema, and renders the same."""
    out = run_helm(helm, "package", str(CHART), "--destination", str(tmp_path), tmp_dir=renderer.tmp_dir)
    assert out.returncode == 0, out.stderr
    (archive,) = tmp_path.glob("sessionops-*.tgz")
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    for name in ("Chart.yaml", "values.yaml", "values.schema.json", "templates/NOTES.txt",
                 "crds/sessionops.dev_agents.yaml", "files/replay/hello.yaml"):
        assert f"sessionops/{name}" in names, name
    out = run_helm(helm, "template", RELEASE, str(archive), "--namespace", NAMESPACE, tmp_dir=renderer.tmp_dir)
    assert out.returncode == 0, out.stderr
    assert _masked(parse_docs(out.stdout)) == _masked(renderer.template(helm, "default").docs)

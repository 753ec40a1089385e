"""The admission webhooks: service references with a CA bundle, kopf's paths, our kinds only."""

from __future__ import annotations

import base64
import ssl
import urllib.parse
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from tests.chart.helm import NAMESPACE, RELEASE, ROOT, Rendered

MUTATE_PATH = "/sessionops-mutate"
VALIDATE_PATH = "/sessionops-validate"
STATUS_PATH = "/sessionops-status"
STATUS_RESOURCES = {"agentsessions/status", "agentinputs/status", "agentruns/status"}
OPERATOR = f"system:serviceaccount:{NAMESPACE}:{RELEASE}"
SERVICE = f"{RELEASE}-webhook"

# The contract (ARCHITECTURE section 2 and the chart brief).
EXPECTED_RULES = {
    "MutatingWebhookConfiguration": {
        ("agentsessions", ("CREATE", "UPDATE")),
        ("agentinputs", ("CREATE", "UPDATE")),
        ("agents", ("CREATE", "UPDATE")),
    },
    "ValidatingWebhookConfiguration": {
        ("agentsessions", ("CREATE", "UPDATE")),
        ("agentinputs", ("CREATE", "UPDATE")),
        ("agentruns", ("UPDATE",)),
        ("agents", ("CREATE", "UPDATE")),
    },
}
PATHS = {"MutatingWebhookConfiguration": MUTATE_PATH, "ValidatingWebhookConfiguration": VALIDATE_PATH}


def _webhooks(rendered: Rendered) -> dict[str, dict[str, Any]]:
    """The main webhook of each configuration (the validating one also has the status webhook)."""
    out = {}
    for kind in PATHS:
        config = rendered.one(kind)
        names = [h["name"] for h in config["webhooks"]]
        assert names == (["mutate.sessionops.dev"] if kind.startswith("Mutating")
                         else ["validate.sessionops.dev", "status.sessionops.dev"]), names
        out[kind] = {"config": config, "hook": config["webhooks"][0]}
    return out


def _status_hook(rendered: Rendered) -> dict[str, Any]:
    return rendered.one("ValidatingWebhookConfiguration")["webhooks"][1]


def test_status_writes_go_to_the_status_webhook_except_the_operators(rendered: Rendered) -> None:
    """Status is the operator's and its workers' record (issue 12): every status subresource write is
    validated, failing closed; the operator's own writes skip the call (issue 17)."""
    from testcluster import cel

    hook = _status_hook(rendered)
    client = hook["clientConfig"]
    assert client["service"] == {"name": SERVICE, "namespace": NAMESPACE, "path": STATUS_PATH, "port": 443}
    assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
    assert hook["admissionReviewVersions"] == ["v1"] and 1 <= hook["timeoutSeconds"] <= 30
    (rule,) = hook["rules"]
    assert set(rule["resources"]) == STATUS_RESOURCES and rule["operations"] == ["UPDATE"]
    assert rule["apiGroups"] == ["sessionops.dev"] and rule["scope"] == "Namespaced"

    def called(username: str) -> bool:
        variables = {"object": {}, "oldObject": {}, "request": {"operation": "UPDATE", "subResource": "status",
                                                                 "userInfo": {"username": username}}}
        return all(cel.evaluate_expression(c["expression"], variables) for c in hook["matchConditions"])

    deployment = rendered.find("Deployment", "-operator")
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SESSIONOPS_SERVICE_ACCOUNT"] == account
    assert not called(f"system:serviceaccount:{NAMESPACE}:{account}")
    for other in ("alice", "kubernetes-admin", f"system:serviceaccount:{NAMESPACE}:sessionops-worker",
                  f"system:serviceaccount:other:{account}"):
        assert called(other), other


def test_service_references_and_contract(rendered: Rendered) -> None:
    for kind, found in _webhooks(rendered).items():
        hook = found["hook"]
        client = hook["clientConfig"]
        assert "url" not in client, "an API server cannot generally resolve Service DNS names in a url"
        assert client["service"] == {"name": SERVICE, "namespace": NAMESPACE, "path": PATHS[kind], "port": 443}
        assert hook["failurePolicy"] == "Fail"
        assert hook["sideEffects"] == "NoneOnDryRun"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["matchPolicy"] == "Equivalent"
        assert 1 <= hook["timeoutSeconds"] <= 30
        assert "namespaceSelector" not in hook and "objectSelector" not in hook
        rules = set()
        for rule in hook["rules"]:
            assert rule["apiGroups"] == ["sessionops.dev"]
            assert rule["apiVersions"] == ["v1alpha1"]
            assert rule["scope"] == "Namespaced"
            (resource,) = rule["resources"]
            assert "/" not in resource, "status writes go to the status webhook, not the main one"
            rules.add((resource, tuple(rule["operations"])))
        assert rules == EXPECTED_RULES[kind]


def test_the_service_reaches_every_operator_replica(rendered: Rendered) -> None:
    service = rendered.one("Service", SERVICE)
    deployment = rendered.find("Deployment", "-operator")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    (port,) = service["spec"]["ports"]
    assert port["port"] == 443 and port["targetPort"] == "webhook"
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert "webhook" in {p["name"] for p in container["ports"]}


def _load_cert(b64: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(b64))


def test_self_signed_certificate(default: Rendered) -> None:
    """The caBundle is the CA of the served certificate, which names the Service."""
    secret = default.one("Secret", f"{RELEASE}-webhook-tls")
    assert secret["type"] == "kubernetes.io/tls"
    ca = _load_cert(secret["data"]["ca.crt"])
    cert = _load_cert(secret["data"]["tls.crt"])
    key = serialization.load_pem_private_key(base64.b64decode(secret["data"]["tls.key"]), password=None)
    for found in _webhooks(default).values():
        assert found["hook"]["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
        assert "cert-manager.io/inject-ca-from" not in found["config"]["metadata"].get("annotations", {})
    # Signed by the CA.
    assert cert.issuer == ca.subject
    ca_key = ca.public_key()
    if isinstance(ca_key, rsa.RSAPublicKey):
        ca_key.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm)
    else:
        assert isinstance(ca_key, ec.EllipticCurvePublicKey)
        ca_key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    # The key is the certificate's; the names are the Service's (the API server checks SANs).
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()
    sans = set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName))
    assert f"{SERVICE}.{NAMESPACE}.svc" in sans
    assert f"{SERVICE}.{NAMESPACE}.svc.cluster.local" in sans
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.SERVER_AUTH in usages
    days = (cert.not_valid_after_utc - cert.not_valid_before_utc).days
    assert days >= 3649


def test_tls_handshake_as_the_api_server_does(default: Rendered, tmp_path: Path) -> None:
    """A client trusting only the caBundle completes a TLS handshake with the served
    certificate for the Service's DNS name, the way the API server calls the webhook."""
    secret = default.one("Secret", f"{RELEASE}-webhook-tls")
    for key in ("tls.crt", "tls.key"):
        (tmp_path / key).write_bytes(base64.b64decode(secret["data"][key]))
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")  # as kopf's WebhookServer does
    ca_bundle = _webhooks(default)["ValidatingWebhookConfiguration"]["hook"]["clientConfig"]["caBundle"]
    client_context = ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())

    def handshake(hostname: str) -> None:
        c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
        client = client_context.wrap_bio(c_in, c_out, server_hostname=hostname)
        server = server_context.wrap_bio(s_in, s_out, server_side=True)
        done = {"client": False, "server": False}
        for _ in range(10):
            for name, end, out, peer_in in (("client", client, c_out, s_in), ("server", server, s_out, c_in)):
                if not done[name]:
                    try:
                        end.do_handshake()
                        done[name] = True
                    except ssl.SSLWantReadError:
                        pass
                peer_in.write(out.read())
            if all(done.values()):
                return
        raise AssertionError("handshake did not complete")

    handshake(f"{SERVICE}.{NAMESPACE}.svc")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(f"other.{NAMESPACE}.svc")


@pytest.mark.parametrize("values_set", ["cert-manager", "cert-manager-issuer"])
def test_cert_manager(renderer: Any, values_set: str) -> None:
    rendered = renderer.template("helm4", values_set)
    assert not [s for s in rendered.of_kind("Secret") if s["metadata"]["name"] == f"{RELEASE}-webhook-tls"]
    certificate = rendered.one("Certificate")
    spec = certificate["spec"]
    assert spec["secretName"] == f"{RELEASE}-webhook-tls"
    assert f"{SERVICE}.{NAMESPACE}.svc" in spec["dnsNames"]
    for found in _webhooks(rendered).values():
        assert "caBundle" not in found["hook"]["clientConfig"]
        annotations = found["config"]["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{certificate['metadata']['name']}"
    issuers = rendered.of_kind("Issuer")
    if values_set == "cert-manager":
        (issuer,) = issuers
        assert issuer["spec"] == {"selfSigned": {}}
        assert spec["issuerRef"] == {"name": issuer["metadata"]["name"], "kind": "Issuer",
                                     "group": "cert-manager.io"}
    else:
        assert not issuers
        assert spec["issuerRef"] == {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    # The operator mounts the Secret cert-manager writes.
    volumes = rendered.find("Deployment", "-operator")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "certs", "secretName": f"{RELEASE}-webhook-tls"}.items() <= {
        "name": volumes[0]["name"], "secretName": volumes[0]["secret"]["secretName"]}.items()


# --- the contract with kopf ------------------------------------------------------------

def _crd_resources() -> list[kopf.Resource]:
    resources = []
    for path in sorted((ROOT / "crds").glob("sessionops.dev_*.yaml")):
        crd = yaml.safe_load(Path(path).read_text())
        names = crd["spec"]["names"]
        (version,) = [v["name"] for v in crd["spec"]["versions"] if v.get("storage")]
        resources.append(kopf.Resource(
            group=crd["spec"]["group"], version=version, plural=names["plural"], kind=names["kind"],
            singular=names.get("singular"), shortcuts=frozenset(names.get("shortNames", [])),
            namespaced=crd["spec"]["scope"] == "Namespaced"))
    return resources


def test_paths_are_where_kopf_serves_the_handlers(default: Rendered) -> None:
    """kopf's WebhookServer routes POST /{id} and hints the handler id from the path.

    Every (resource, operation) the chart sends to a path needs a kopf handler with that
    id and kind (else kopf answers 404, which failurePolicy Fail turns into a rejection),
    and every registered handler must receive its requests.
    """
    import sessionops.manager.handlers.admission  # noqa: F401  (registers the handlers)

    registry = kopf.get_default_registry()
    handlers = registry._webhooks.get_all_handlers()
    assert handlers, "no admission handlers registered"
    resources = _crd_resources()
    reasons = {"MutatingWebhookConfiguration": "mutating", "ValidatingWebhookConfiguration": "validating"}
    served: set[tuple[str, str, str]] = set()  # (path, plural, operation)
    for handler in handlers:
        path = "/" + urllib.parse.quote(handler.id)
        matched = [r for r in resources if handler.selector is not None and handler.selector.check(r)]
        assert matched, f"handler {handler.id} matches none of our kinds"
        sub = f"/{handler.subresource}" if handler.subresource else ""
        for resource in matched:
            for operation in handler.operations or ["CREATE", "UPDATE", "DELETE", "CONNECT"]:
                served.add((path, resource.plural + sub, operation))
        reason = getattr(handler.reason, "value", handler.reason)
        expected_path = MUTATE_PATH if reason == "mutating" else STATUS_PATH if sub else VALIDATE_PATH
        assert path == expected_path, f"{handler.reason} handler {handler.id!r} is served at {path}"
    routed: set[tuple[str, str, str]] = set()
    for kind, found in _webhooks(default).items():
        path = found["hook"]["clientConfig"]["service"]["path"]
        assert path == PATHS[kind], reasons[kind]
        for rule in found["hook"]["rules"]:
            for operation in rule["operations"]:
                routed.add((path, rule["resources"][0], operation))
    for rule in _status_hook(default)["rules"]:
        for resource in rule["resources"]:
            for operation in rule["operations"]:
                routed.add((STATUS_PATH, resource, operation))
    missing = sorted(routed - served)
    unrouted = sorted(served - routed)
    assert not missing, f"the chart routes these (path, resource, operation) to kopf, which has no handler: {missing}"
    assert not unrouted, f"kopf handlers the webhook configurations never call: {unrouted}"


def _calls(hook: dict[str, Any], operation: str, plural: str, old: dict | None, new: dict) -> bool:
    """Whether the API server would call ``hook`` (its matchConditions, evaluated with CEL)."""
    from testcluster import cel

    request = {"operation": operation, "resource": {"group": "sessionops.dev", "version": "v1alpha1",
                                                    "resource": plural}}
    variables = {"object": new, "oldObject": old, "request": request}
    return all(cel.evaluate_expression(c["expression"], variables) for c in hook.get("matchConditions") or [])


def test_metadata_only_updates_skip_the_webhooks_unless_a_session_label_changes(default: Rendered) -> None:
    """A finalizer removal must not depend on the webhook (nor carry a large object to it twice)."""
    hooks = {kind: found["hook"] for kind, found in _webhooks(default).items()}
    stored = {"metadata": {"name": "x", "finalizers": ["sessionops.dev/input"]}, "spec": {"a": {"b": [1]}}}
    released = {**stored, "metadata": {"name": "x", "annotations": {"note": "y"}}}
    edited = {**stored, "spec": {"a": {"b": [2]}}}
    relabelled = {**stored, "metadata": {"name": "x", "labels": {"sessionops.dev/tree": "other"}}}
    for kind, hook in hooks.items():
        for plural in ("agentsessions", "agentinputs"):
            assert _calls(hook, "CREATE", plural, None, stored), kind
            assert _calls(hook, "UPDATE", plural, stored, edited), kind
            assert not _calls(hook, "UPDATE", plural, stored, released), kind
    validating = hooks["ValidatingWebhookConfiguration"]
    assert _calls(validating, "UPDATE", "agentsessions", stored, relabelled)
    assert not _calls(validating, "UPDATE", "agentinputs", stored, relabelled)
    assert not _calls(hooks["MutatingWebhookConfiguration"], "UPDATE", "agentsessions", stored, relabelled)


def test_an_agent_author_annotation_edit_reaches_both_webhooks(default: Rendered) -> None:
    """The recorded author of an Agent's worker settings is whose permissions are re-checked before
    each Job: a metadata-only update that changes it must not skip admission."""
    author = "sessionops.dev/worker-settings-author"
    stored = {"metadata": {"name": "a", "annotations": {author: '{"username":"alice"}'}}, "spec": {"x": 1}}
    forged = {**stored, "metadata": {"name": "a", "annotations": {author: '{"username":"admin"}'}}}
    dropped = {**stored, "metadata": {"name": "a"}}
    noted = {**stored, "metadata": {"name": "a", "annotations": {author: '{"username":"alice"}', "n": "y"}}}
    for kind, found in _webhooks(default).items():
        hook = found["hook"]
        assert _calls(hook, "UPDATE", "agents", stored, forged), kind
        assert _calls(hook, "UPDATE", "agents", stored, dropped), kind
        assert _calls(hook, "UPDATE", "agents", dropped, stored), kind
        assert not _calls(hook, "UPDATE", "agents", stored, noted), kind
        assert not _calls(hook, "UPDATE", "agentinputs", stored, forged), kind

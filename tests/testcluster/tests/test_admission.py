"""Admission webhooks called over real HTTPS, with real certificates and real AdmissionReviews."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import time
from typing import Any

import pytest
from aiohttp import web

from testcluster.admission import (
    AdmissionDenied,
    JSONPatchError,
    apply_json_patch,
    label_selector_matches,
    rule_matches,
    run_admission,
)
from testcluster.certs import make_ca_and_server_cert

NAMESPACE = "team-a"
SERVICE = ("webhooks", "sessionops-webhook")  # namespace, name
SERVICE_DNS = "sessionops-webhook.webhooks.svc"


class FakeCluster:
    """The duck-typed cluster run_admission needs: a dict-backed object store plus a service map."""

    def __init__(self) -> None:
        self.objects: dict[tuple, dict] = {}
        self.services: dict[tuple[str, str], tuple[str, int]] = {}

    def put(self, group: str, version: str, plural: str, obj: dict) -> None:
        meta = obj["metadata"]
        self.objects[(group, version, plural, meta.get("namespace"), meta["name"])] = copy.deepcopy(obj)

    def list_objects(self, group, version, plural, namespace=None):
        return [
            copy.deepcopy(o)
            for (g, v, p, ns, _), o in self.objects.items()
            if (g, v, p) == (group, version, plural) and (namespace is None or ns == namespace)
        ]

    def get_object(self, group, version, plural, namespace, name):
        obj = self.objects.get((group, version, plural, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def service_resolver(self, namespace, name, port):
        try:
            return self.services[(namespace, name)]
        except KeyError:
            raise LookupError("no such host") from None


class WebhookServer:
    """An aiohttp HTTPS server answering AdmissionReviews; every path is one behaviour."""

    def __init__(self, bundle) -> None:
        self.bundle = bundle
        self.reviews: list[dict] = []
        self.requests: list[dict] = []
        self.sni: list[str | None] = []
        self.port = 0
        self.runner: web.AppRunner | None = None

    def _reply(self, review: dict, **response: Any) -> web.Response:
        body = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], **response},
        }
        return web.json_response(body)

    async def handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        self.requests.append(
            {"path": request.path, "query": dict(request.query), "host": request.headers.get("Host")}
        )
        name = request.match_info["name"]
        if name == "allow":
            return self._reply(review, allowed=True, warnings=["allowed with a warning"])
        if name.startswith("mutate-"):
            label = name[len("mutate-") :]
            patch = [{"op": "add", "path": f"/metadata/labels/{label}", "value": "yes"}]
            if not (review["request"]["object"]["metadata"].get("labels")):
                patch.insert(0, {"op": "add", "path": "/metadata/labels", "value": {}})
            return self._reply(
                review,
                allowed=True,
                patchType="JSONPatch",
                patch=base64.b64encode(json.dumps(patch).encode()).decode(),
                warnings=[f"mutated by {label}"],
            )
        if name == "deny-409":
            return self._reply(
                review,
                allowed=False,
                status={"code": 409, "message": "the turn is waiting", "reason": "Conflict"},
            )
        if name == "deny-422":
            return self._reply(
                review,
                allowed=False,
                status={
                    "code": 422,
                    "message": 'spec.model: Invalid value: "": must not be blank',
                    "reason": "Invalid",
                    "details": {
                        "causes": [
                            {
                                "field": "spec.model",
                                "message": "must not be blank",
                                "reason": "FieldValueInvalid",
                            }
                        ]
                    },
                },
            )
        if name == "deny-nocode":
            return self._reply(review, allowed=False, status={"message": "no"})
        if name == "slow":
            await asyncio.sleep(3)
            return self._reply(review, allowed=True)
        if name == "wrong-uid":
            return web.json_response(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {"uid": "nope", "allowed": True},
                }
            )
        if name == "patch-from-validating":
            return self._reply(
                review, allowed=True, patchType="JSONPatch", patch=base64.b64encode(b"[]").decode()
            )
        if name == "boom":
            return web.Response(status=500, text="boom")
        raise web.HTTPNotFound()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{name}", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        context = self.bundle.server_ssl_context()
        context.sni_callback = lambda sslobj, name, ctx: self.sni.append(name)
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("webhook-certs"))
    return make_ca_and_server_cert([SERVICE_DNS, "localhost"], ["127.0.0.1"], directory=directory)


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory):
    return make_ca_and_server_cert(
        ["elsewhere.example"], [], directory=str(tmp_path_factory.mktemp("other-ca"))
    )


@pytest.fixture
async def server(bundle):
    srv = WebhookServer(bundle)
    await srv.start()
    yield srv
    await srv.stop()


@pytest.fixture
def cluster(server):
    c = FakeCluster()
    c.services[SERVICE] = ("127.0.0.1", server.port)
    c.put("", "v1", "namespaces", {"metadata": {"name": NAMESPACE, "labels": {"team": "a"}}})
    c.put("", "v1", "namespaces", {"metadata": {"name": "team-b", "labels": {"team": "b"}}})
    return c


def webhook(name: str, path: str, bundle, **overrides: Any) -> dict:
    hook = {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "clientConfig": {
            "service": {"namespace": SERVICE[0], "name": SERVICE[1], "path": path},
            "caBundle": bundle.ca_bundle_b64,
        },
        "rules": [
            {
                "apiGroups": ["sessionops.dev"],
                "apiVersions": ["v1alpha1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["agentsessions"],
                "scope": "Namespaced",
            }
        ],
    }
    hook.update(overrides)
    return hook


def configure(cluster: FakeCluster, kind: str, config_name: str, *hooks: dict) -> None:
    plural = "mutatingwebhookconfigurations" if kind == "mutating" else "validatingwebhookconfigurations"
    obj_kind = "MutatingWebhookConfiguration" if kind == "mutating" else "ValidatingWebhookConfiguration"
    cluster.put(
        "admissionregistration.k8s.io",
        "v1",
        plural,
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": obj_kind,
            "metadata": {"name": config_name},
            "webhooks": list(hooks),
        },
    )


SESSION = {
    "apiVersion": "sessionops.dev/v1alpha1",
    "kind": "AgentSession",
    "metadata": {"name": "s1", "namespace": NAMESPACE, "labels": {"app": "demo"}},
    "spec": {"agentRef": {"name": "a"}},
}
USER = {"username": "alice", "uid": "u-1", "groups": ["devs", "system:authenticated"]}


async def admit(
    cluster,
    phase: str,
    *,
    operation: str = "CREATE",
    obj: dict | None = None,
    old: dict | None = None,
    dry_run: bool = False,
    namespace: str = NAMESPACE,
    resource: str = "agentsessions",
    subresource: str | None = None,
    warnings: list | None = None,
):
    target = copy.deepcopy(SESSION if obj is None and operation != "DELETE" else obj)
    return await run_admission(
        cluster=cluster,
        operation=operation,
        group="sessionops.dev",
        version="v1alpha1",
        resource=resource,
        subresource=subresource,
        kind="AgentSession",
        namespace=namespace,
        name="s1",
        obj=target,
        old_obj=old,
        user_info=USER,
        dry_run=dry_run,
        phase=phase,
        warnings=warnings,
    )


# ------------------------------------------------------------------------------- calling webhooks


async def test_a_mutating_webhook_patch_is_applied_and_its_warnings_collected(cluster, server, bundle):
    configure(cluster, "mutating", "sessionops", webhook("mutate.sessionops.dev", "/mutate-checked", bundle))
    warnings: list[str] = []
    result = await admit(cluster, "mutating", warnings=warnings)
    assert result["metadata"]["labels"] == {"app": "demo", "checked": "yes"}
    assert warnings == ["mutated by checked"]
    # the API server's side of the exchange, as the webhook saw it
    (review,) = server.reviews
    request = review["request"]
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    assert request["kind"] == {"group": "sessionops.dev", "version": "v1alpha1", "kind": "AgentSession"}
    assert request["resource"] == {
        "group": "sessionops.dev",
        "version": "v1alpha1",
        "resource": "agentsessions",
    }
    assert request["requestKind"] == request["kind"] and request["requestResource"] == request["resource"]
    assert request["operation"] == "CREATE" and request["name"] == "s1" and request["namespace"] == NAMESPACE
    assert request["userInfo"] == USER
    assert request["object"] == SESSION and request["oldObject"] is None
    assert request["dryRun"] is False
    assert request["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    assert "subResource" not in request and request["uid"]
    # the Service reference was mapped to the local server, verified as <name>.<namespace>.svc
    assert server.sni == [SERVICE_DNS]
    assert server.requests == [
        {"path": "/mutate-checked", "query": {"timeout": "10s"}, "host": f"{SERVICE_DNS}:443"}
    ]


async def test_mutating_webhooks_run_in_configuration_name_order_each_seeing_the_previous_patch(
    cluster, server, bundle
):
    configure(cluster, "mutating", "b-second", webhook("second.example", "/mutate-second", bundle))
    configure(cluster, "mutating", "a-first", webhook("first.example", "/mutate-first", bundle))
    result = await admit(cluster, "mutating")
    assert result["metadata"]["labels"] == {"app": "demo", "first": "yes", "second": "yes"}
    assert [r["request"]["object"]["metadata"]["labels"] for r in server.reviews] == [
        {"app": "demo"},
        {"app": "demo", "first": "yes"},
    ]


@pytest.mark.parametrize(
    ("path", "code", "message", "reason"),
    [
        (
            "/deny-409",
            409,
            'admission webhook "validate.sessionops.dev" denied the request: the turn is waiting',
            "Conflict",
        ),
        (
            "/deny-422",
            422,
            'admission webhook "validate.sessionops.dev" denied the request: spec.model: Invalid value: "": must not be blank',
            "Invalid",
        ),
        ("/deny-nocode", 400, 'admission webhook "validate.sessionops.dev" denied the request: no', ""),
    ],
    ids=[
        "a 409 denial keeps its code",
        "a 422 denial keeps its code and causes",
        "a denial without a code becomes 400 as upstream",
    ],
)
async def test_a_validating_denial_carries_the_webhook_code_and_message(
    cluster, server, bundle, path, code, message, reason
):
    configure(cluster, "validating", "sessionops", webhook("validate.sessionops.dev", path, bundle))
    with pytest.raises(AdmissionDenied) as info:
        await admit(cluster, "validating")
    assert (info.value.status, info.value.message, info.value.reason) == (code, message, reason)
    assert info.value.to_status()["code"] == code
    if code == 422:
        assert info.value.causes == [
            {"field": "spec.model", "message": "must not be blank", "reason": "FieldValueInvalid"}
        ]


async def test_validating_webhooks_leave_the_object_alone_and_collect_warnings(cluster, server, bundle):
    configure(cluster, "validating", "sessionops", webhook("validate.sessionops.dev", "/allow", bundle))
    warnings: list[str] = []
    result = await admit(cluster, "validating", warnings=warnings)
    assert result == SESSION
    assert warnings == ["allowed with a warning"]


async def test_the_first_rejection_in_order_wins_among_concurrent_validating_webhooks(
    cluster, server, bundle
):
    configure(
        cluster,
        "validating",
        "sessionops",
        webhook("a.allow", "/allow", bundle),
        webhook("b.deny", "/deny-409", bundle),
        webhook("c.deny", "/deny-422", bundle),
    )
    with pytest.raises(AdmissionDenied) as info:
        await admit(cluster, "validating")
    assert info.value.webhook == "b.deny"
    assert len(server.reviews) == 3


async def test_a_url_client_config_is_called_as_is(cluster, server, bundle):
    hook = webhook("url.example", "/", bundle)
    hook["clientConfig"] = {
        "url": f"https://127.0.0.1:{server.port}/deny-409",
        "caBundle": bundle.ca_bundle_b64,
    }
    configure(cluster, "validating", "by-url", hook)
    with pytest.raises(AdmissionDenied) as info:
        await admit(cluster, "validating")
    assert info.value.status == 409
    assert server.requests[0]["query"] == {"timeout": "10s"}


# ------------------------------------------------------------------------------- failures


async def test_a_wrong_ca_bundle_fails_closed_with_500(cluster, server, bundle, other_ca):
    hook = webhook("validate.sessionops.dev", "/allow", bundle)
    hook["clientConfig"]["caBundle"] = other_ca.ca_bundle_b64
    configure(cluster, "validating", "sessionops", hook)
    with pytest.raises(AdmissionDenied) as info:
        await admit(cluster, "validating")
    assert info.value.status == 500 and info.value.reason == "InternalError"
    assert info.value.message == (
        'Internal error occurred: failed calling webhook "validate.sessionops.dev": failed to call webhook: '
        f'Post "https://{SERVICE_DNS}:443/allow?timeout=10s": tls: failed to verify certificate: '
        "x509: certificate signed by unknown authority"
    )
    assert server.reviews == []


async def test_a_wrong_ca_bundle_is_skipped_with_failure_policy_ignore(cluster, server, bundle, other_ca):
    hook = webhook("mutate.sessionops.dev", "/mutate-x", bundle, failurePolicy="Ignore")
    hook["clientConfig"]["caBundle"] = other_ca.ca_bundle_b64
    configure(cluster, "mutating", "sessionops", hook)
    assert await admit(cluster, "mutating") == SESSION


async def test_the_certificate_must_name_the_service(cluster, server, bundle):
    hook = webhook("validate.sessionops.dev", "/allow", bundle)
    hook["clientConfig"]["service"]["name"] = "impostor"
    cluster.services[("webhooks", "impostor")] = ("127.0.0.1", server.port)
    configure(cluster, "validating", "sessionops", hook)
    with pytest.raises(AdmissionDenied) as info:
        await admit(cluster, "validating")
    assert info.value.status == 500
    assert "certificate is not valid for impostor.webhooks.svc" in info.value.message
    assert server.sni == ["impostor.webhooks.svc"]


async def test_a_slow_webhook_times_out_after_timeout_seconds(cluster, server, bundle):
    configure(cluster, "validating", "sessionops", webhook("slow.example", "/slow", bundle, timeoutSeconds=1))
    started = time.monotonic()
    with pytest.raises(AdmissionDenied) as info:
        await admit(cluster, "validating")
    assert time.monotonic() - started < 2.5
    assert info.value.status == 500
    assert info.value.message.endswith(
        f'Post "https://{SERVICE_DNS}:443/slow?timeout=1s": context deadline exceeded'
    )


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("/wrong-uid", 'received invalid webhook response: expected response.uid="'),
        (
            "/patch-from-validating",
            "received invalid webhook response: validating webhook may not return response.patch",
        ),
        (
            "/boom",
            'failed to call webhook: an error on the server ("boom") has prevented the request from succeeding',
        ),
    ],
    ids=["a response for another request", "a patch from a validating webhook", "an HTTP 500"],
)
async def test_malformed_responses_fail_per_failure_policy(cluster, server, bundle, path, text):
    configure(cluster, "validating", "sessionops", webhook("v.example", path, bundle))
    with pytest.raises(AdmissionDenied) as info:
        await admit(cluster, "validating")
    assert info.value.status == 500 and text in info.value.message
    configure(cluster, "validating", "sessionops", webhook("v.example", path, bundle, failurePolicy="Ignore"))
    assert await admit(cluster, "validating") == SESSION


async def test_an_unresolvable_or_closed_service_fails_closed(cluster, server, bundle):
    hook = webhook("v.example", "/allow", bundle)
    hook["clientConfig"]["service"]["name"] = "missing"
    configure(cluster, "validating", "sessionops", hook)
    with pytest.raises(AdmissionDenied) as info:
        await admit(cluster, "validating")
    assert info.value.status == 500 and "dial tcp: lookup missing.webhooks.svc" in info.value.message
    cluster.services[("webhooks", "missing")] = ("127.0.0.1", 1)
    with pytest.raises(AdmissionDenied) as info:
        await admit(cluster, "validating")
    assert "connection refused" in info.value.message


async def test_dry_run_is_refused_by_webhooks_with_side_effects(cluster, server, bundle):
    configure(
        cluster,
        "validating",
        "sessionops",
        webhook("effects.example", "/allow", bundle, sideEffects="Some", failurePolicy="Ignore"),
    )
    with pytest.raises(AdmissionDenied) as info:
        await admit(cluster, "validating", dry_run=True)
    assert (info.value.status, info.value.reason) == (400, "BadRequest")
    assert info.value.message == 'admission webhook "effects.example" does not support dry run'
    assert server.reviews == []
    await admit(cluster, "validating", dry_run=False)  # without dryRun the webhook is called
    assert len(server.reviews) == 1


async def test_dry_run_reaches_none_on_dry_run_webhooks_flagged(cluster, server, bundle):
    configure(
        cluster,
        "validating",
        "sessionops",
        webhook("v.example", "/allow", bundle, sideEffects="NoneOnDryRun"),
    )
    await admit(cluster, "validating", dry_run=True)
    request = server.reviews[0]["request"]
    assert request["dryRun"] is True
    assert request["options"]["dryRun"] == ["All"]


# ------------------------------------------------------------------------------- selection


async def test_namespace_selector_uses_the_namespace_labels(cluster, server, bundle):
    selector = {"matchLabels": {"team": "a"}}
    configure(
        cluster,
        "validating",
        "sessionops",
        webhook("v.example", "/deny-409", bundle, namespaceSelector=selector),
    )
    with pytest.raises(AdmissionDenied):
        await admit(cluster, "validating", namespace=NAMESPACE)
    other = copy.deepcopy(SESSION)
    other["metadata"]["namespace"] = "team-b"
    assert await admit(cluster, "validating", namespace="team-b", obj=other) == other
    assert len(server.reviews) == 1


async def test_object_selector_matches_the_new_or_the_old_object(cluster, server, bundle):
    selector = {"matchExpressions": [{"key": "sessionops.dev/managed", "operator": "Exists"}]}
    configure(
        cluster,
        "validating",
        "sessionops",
        webhook("v.example", "/deny-409", bundle, objectSelector=selector),
    )
    assert await admit(cluster, "validating") == SESSION  # not labelled: skipped
    old = copy.deepcopy(SESSION)
    old["metadata"]["labels"]["sessionops.dev/managed"] = "true"
    with pytest.raises(AdmissionDenied):
        await admit(cluster, "validating", operation="UPDATE", old=old)  # the old object matches


async def test_match_conditions_skip_call_or_fail(cluster, server, bundle):
    only_alice = [{"name": "alice", "expression": "request.userInfo.username == 'alice'"}]
    only_bob = [{"name": "bob", "expression": "request.userInfo.username == 'bob'"}]
    broken = [{"name": "broken", "expression": "object.spec.missing == 1"}]
    configure(
        cluster,
        "validating",
        "sessionops",
        webhook("v.example", "/deny-409", bundle, matchConditions=only_bob),
    )
    assert await admit(cluster, "validating") == SESSION
    configure(
        cluster,
        "validating",
        "sessionops",
        webhook("v.example", "/deny-409", bundle, matchConditions=only_alice),
    )
    with pytest.raises(AdmissionDenied) as info:
        await admit(cluster, "validating")
    assert info.value.status == 409
    configure(
        cluster, "validating", "sessionops", webhook("v.example", "/deny-409", bundle, matchConditions=broken)
    )
    with pytest.raises(AdmissionDenied) as info:
        await admit(cluster, "validating")
    assert info.value.status == 403 and info.value.reason == "Forbidden"
    assert info.value.message.startswith(
        'agentsessions.sessionops.dev "s1" is forbidden: failed to evaluate match conditions'
    )
    configure(
        cluster,
        "validating",
        "sessionops",
        webhook("v.example", "/deny-409", bundle, matchConditions=broken, failurePolicy="Ignore"),
    )
    assert await admit(cluster, "validating") == SESSION


async def test_rules_pick_operations_and_subresources(cluster, server, bundle):
    hook = webhook("v.example", "/deny-409", bundle)
    hook["rules"][0]["operations"] = ["UPDATE"]
    hook["rules"][0]["resources"] = ["agentsessions/status"]
    configure(cluster, "validating", "sessionops", hook)
    assert await admit(cluster, "validating") == SESSION
    assert await admit(cluster, "validating", operation="UPDATE", old=SESSION) == SESSION
    with pytest.raises(AdmissionDenied):
        await admit(cluster, "validating", operation="UPDATE", old=SESSION, subresource="status")
    assert server.reviews[0]["request"]["subResource"] == "status"


async def test_admission_configuration_objects_are_exempt(cluster, server, bundle):
    hook = webhook("v.example", "/deny-409", bundle)
    hook["rules"] = [
        {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"], "scope": "*"}
    ]
    configure(cluster, "validating", "everything", hook)
    result = await run_admission(
        cluster=cluster, operation="CREATE", group="admissionregistration.k8s.io", version="v1",
        resource="validatingwebhookconfigurations", subresource=None, kind="ValidatingWebhookConfiguration",
        namespace=None, name="x", obj={"metadata": {"name": "x"}}, old_obj=None, user_info=USER,
        dry_run=False, phase="validating",
    )  # fmt: skip
    assert result == {"metadata": {"name": "x"}}
    assert server.reviews == []


async def test_without_a_phase_mutating_then_validating_webhooks_run(cluster, server, bundle):
    configure(cluster, "mutating", "m", webhook("m.example", "/mutate-m", bundle))
    configure(cluster, "validating", "v", webhook("v.example", "/allow", bundle))
    result = await admit(cluster, None)  # type: ignore[arg-type]
    assert result["metadata"]["labels"]["m"] == "yes"
    assert server.reviews[1]["request"]["object"]["metadata"]["labels"]["m"] == "yes"


async def test_a_delete_sends_the_old_object_and_delete_options(cluster, server, bundle):
    hook = webhook("v.example", "/allow", bundle)
    hook["rules"][0]["operations"] = ["DELETE"]
    configure(cluster, "validating", "sessionops", hook)
    assert await admit(cluster, "validating", operation="DELETE", obj=None, old=SESSION) is None
    request = server.reviews[0]["request"]
    assert request["object"] is None and request["oldObject"] == SESSION
    assert request["options"] == {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}


# ------------------------------------------------------------------------------- pure helpers

RULE = {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}


@pytest.mark.parametrize(
    ("rule", "request_", "expected"),
    [
        (RULE, {}, True),
        (RULE, {"operation": "UPDATE"}, False),
        ({**RULE, "operations": ["*"]}, {"operation": "DELETE"}, True),
        (RULE, {"group": "batch"}, False),
        ({**RULE, "apiGroups": ["*"]}, {"group": "batch"}, True),
        (RULE, {"version": "v2"}, False),
        (RULE, {"subresource": "status"}, False),
        ({**RULE, "resources": ["deployments/status"]}, {"subresource": "status"}, True),
        ({**RULE, "resources": ["deployments/*"]}, {"subresource": "scale"}, True),
        ({**RULE, "resources": ["deployments/*"]}, {}, True),
        ({**RULE, "resources": ["*"]}, {"resource": "pods"}, True),
        ({**RULE, "resources": ["*"]}, {"subresource": "status"}, False),
        ({**RULE, "resources": ["*/*"]}, {"subresource": "status"}, True),
        ({**RULE, "resources": ["*/status"]}, {"resource": "pods", "subresource": "status"}, True),
        ({**RULE, "scope": "Namespaced"}, {}, True),
        ({**RULE, "scope": "Namespaced"}, {"namespace": None}, False),
        ({**RULE, "scope": "Cluster"}, {"namespace": None}, True),
        ({**RULE, "scope": "Cluster"}, {}, False),
        (
            {**RULE, "apiGroups": [""], "resources": ["namespaces"], "scope": "Cluster"},
            {"group": "", "resource": "namespaces", "namespace": "x"},
            True,
        ),
    ],
    ids=[
        "an exact rule matches",
        "another operation does not match",
        "operation * matches all",
        "another group does not match",
        "apiGroups * matches all",
        "another version does not match",
        "a plain resource does not match its subresources",
        "resource/status matches the status subresource",
        "resource/* matches any subresource",
        "resource/* also matches the resource itself, as upstream's matcher does",
        "* matches every resource",
        "* does not match subresources",
        "*/* matches resources and subresources",
        "*/status matches every status subresource",
        "Namespaced scope matches namespaced objects",
        "Namespaced scope does not match cluster-scoped objects",
        "Cluster scope matches cluster-scoped objects",
        "Cluster scope does not match namespaced objects",
        "Namespace objects are cluster-scoped",
    ],
)
def test_rule_matching(rule, request_, expected):
    attrs = {
        "operation": "CREATE",
        "group": "apps",
        "version": "v1",
        "resource": "deployments",
        "subresource": None,
        "namespace": "ns",
    }
    attrs.update(request_)
    assert rule_matches(rule, **attrs) is expected


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (None, {}, True),
        ({}, {"a": "b"}, True),
        ({"matchLabels": {"a": "b"}}, {"a": "b", "c": "d"}, True),
        ({"matchLabels": {"a": "b"}}, {"a": "x"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
    ],
)
def test_label_selectors(selector, labels, expected):
    assert label_selector_matches(selector, labels) is expected


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        ([{"op": "add", "path": "/b", "value": 2}], {"a": [1, 2], "b": 2}),
        ([{"op": "add", "path": "/a/-", "value": 3}], {"a": [1, 2, 3]}),
        ([{"op": "add", "path": "/a/0", "value": 0}], {"a": [0, 1, 2]}),
        ([{"op": "remove", "path": "/a/0"}], {"a": [2]}),
        ([{"op": "replace", "path": "/a", "value": "x"}], {"a": "x"}),
        ([{"op": "move", "from": "/a", "path": "/b"}], {"b": [1, 2]}),
        ([{"op": "copy", "from": "/a/1", "path": "/c"}], {"a": [1, 2], "c": 2}),
        (
            [{"op": "test", "path": "/a/1", "value": 2}, {"op": "add", "path": "/ok", "value": True}],
            {"a": [1, 2], "ok": True},
        ),
        ([{"op": "add", "path": "/x~1y", "value": 1}], {"a": [1, 2], "x/y": 1}),
        ([{"op": "replace", "path": "/missing", "value": 1}], JSONPatchError),
        ([{"op": "remove", "path": "/a/5"}], JSONPatchError),
        ([{"op": "test", "path": "/a/0", "value": 9}], JSONPatchError),
        ([{"op": "add", "path": "/no/such/parent", "value": 1}], JSONPatchError),
    ],
)
def test_json_patch(ops, expected):
    document = {"a": [1, 2]}
    if expected is JSONPatchError:
        with pytest.raises(JSONPatchError):
            apply_json_patch(document, ops)
    else:
        assert apply_json_patch(document, ops) == expected
    assert document == {"a": [1, 2]}

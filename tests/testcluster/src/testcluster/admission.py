"""Dynamic admission (webhook) for the test API server, as kube-apiserver does it.

`run_admission` reads the cluster's ``MutatingWebhookConfiguration`` /
``ValidatingWebhookConfiguration`` objects and, for every webhook that applies to the request,
POSTs an ``admission.k8s.io/v1`` ``AdmissionReview`` over real HTTPS:

- matching: ``rules`` (apiGroups, apiVersions, operations, resources with ``*``, ``*/*``,
  ``x/status``, ``*/status``; ``scope``), ``namespaceSelector`` (labels of the request's
  Namespace; for Namespace objects their own labels; cluster-scoped objects always match),
  ``objectSelector`` (labels of the object or of the old object) and ``matchConditions`` (CEL
  over ``object``, ``oldObject``, ``request``; a false condition skips the webhook, an error
  fails per ``failurePolicy``: Fail -> 403 Forbidden, Ignore -> skip);
- configurations are processed in name order, webhooks in their listed order; mutating
  webhooks are called one after the other, each seeing the previous one's patches;
  validating webhooks are called concurrently and the first rejection (in order) is returned;
- transport: ``clientConfig.url`` as is, or ``clientConfig.service`` (``path``, ``port``
  default 443) mapped to a local address by ``cluster.service_resolver(namespace, name,
  port)``; TLS is verified against ``caBundle`` (system roots when absent) with the server name
  ``<name>.<namespace>.svc`` (SNI and certificate check) while connecting to the mapped
  address; ``?timeout=<n>s`` is appended as the real API server does; ``timeoutSeconds``
  (default 10) bounds the call;
- failures (unreachable, TLS, timeout, non-200, malformed or inconsistent response) follow
  ``failurePolicy``: Fail (default) -> ``500 InternalError``, ``Internal error occurred:
  failed calling webhook "<name>": failed to call webhook: Post "<url>": <reason>``; Ignore ->
  the webhook is skipped;
- ``dryRun`` requests: a matching webhook whose ``sideEffects`` is not None/NoneOnDryRun
  rejects the request (``400``, ``admission webhook "<name>" does not support dry run``);
- responses: ``allowed: false`` -> `AdmissionDenied` with ``response.status.code`` (raised to
  400 when absent or below 400, as ``webhookerrors.ToStatusErr`` does) and the message
  ``admission webhook "<name>" denied the request: <message>``; ``patchType: JSONPatch``
  patches are applied in order (RFC 6902); ``warnings`` are appended to ``warnings``.

Requests for the admission configuration resources themselves are exempt (as upstream).
Not modelled: ``matchPolicy: Equivalent`` conversions between versions,
``reinvocationPolicy``, audit annotations, client authentication to webhooks.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import functools
import inspect
import json
import ssl
import urllib.parse
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from . import cel

__all__ = [
    "AdmissionDenied",
    "apply_json_patch",
    "label_selector_matches",
    "rule_matches",
    "run_admission",
]

_EXEMPT = {
    "mutatingwebhookconfigurations",
    "validatingwebhookconfigurations",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
}


class AdmissionDenied(Exception):
    """The request is rejected by admission: a ``metav1.Status``-like error.

    ``status`` (HTTP code, also ``code``), ``reason`` (``Forbidden``, ``InternalError``,
    ``BadRequest``, or what the webhook said), ``message``, ``causes`` and `to_status`.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 403,
        reason: str = "",
        causes: list[dict] | None = None,
        details: dict | None = None,
        webhook: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = status
        self.reason = reason
        self.causes = list(causes or [])
        self.details = details
        self.webhook = webhook

    def to_status(self) -> dict:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.status,
        }
        if self.reason:
            status["reason"] = self.reason
        if self.details is not None:
            status["details"] = copy.deepcopy(self.details)
        return status

    def __repr__(self) -> str:
        return f"AdmissionDenied({self.status}, {self.reason!r}, {self.message!r})"


def _internal_error(text: str, webhook: str | None = None) -> AdmissionDenied:
    return AdmissionDenied(
        f"Internal error occurred: {text}",
        status=500,
        reason="InternalError",
        causes=[{"message": text}],
        details={"causes": [{"message": text}]},
        webhook=webhook,
    )


class _CallError(Exception):
    """webhookutil.ErrCallingWebhook: subject to failurePolicy."""

    def __init__(self, webhook: str, reason: str) -> None:
        super().__init__(f'failed calling webhook "{webhook}": {reason}')
        self.webhook = webhook


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


# --------------------------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------------------------


def label_selector_matches(selector: dict | None, labels: dict | None) -> bool:
    """metav1.LabelSelector semantics; a missing or empty selector matches everything."""
    if not selector:
        return True
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In":
            if key not in labels or labels[key] not in values:
                return False
        elif op == "NotIn":
            if key in labels and labels[key] in values:
                return False
        elif op == "Exists":
            if key not in labels:
                return False
        elif op == "DoesNotExist":
            if key in labels:
                return False
        else:
            return False
    return True


def rule_matches(
    rule: dict,
    *,
    operation: str,
    group: str,
    version: str,
    resource: str,
    subresource: str | None,
    namespace: str | None,
) -> bool:
    """admission/plugin/webhook/predicates/rules.Matcher."""
    scope = rule.get("scope") or "*"
    is_namespace = group == "" and resource == "namespaces"
    if scope == "Namespaced" and (is_namespace or not namespace):
        return False
    if scope == "Cluster" and not (is_namespace or not namespace):
        return False
    operations = rule.get("operations") or []
    if "*" not in operations and operation not in operations:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and group not in groups:
        return False
    versions = rule.get("apiVersions") or []
    if "*" not in versions and version not in versions:
        return False
    sub = subresource or ""
    for entry in rule.get("resources") or []:
        res, _, rule_sub = entry.partition("/")
        if (res == "*" or res == resource) and (rule_sub == "*" or rule_sub == sub):
            return True
    return False


def _labels(obj: dict | None) -> dict:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


async def _namespace_matches(
    hook: dict, cluster: Any, *, group: str, resource: str, namespace: str | None, obj, old_obj
) -> bool:
    selector = hook.get("namespaceSelector")
    if not selector:
        return True
    if group == "" and resource == "namespaces":
        return label_selector_matches(selector, _labels(obj if obj is not None else old_obj))
    if not namespace:
        return True  # cluster-scoped resources are never skipped by a namespaceSelector
    ns = await _maybe_await(cluster.get_object("", "v1", "namespaces", None, namespace))
    return label_selector_matches(selector, _labels(ns))


def _object_matches(hook: dict, obj: dict | None, old_obj: dict | None) -> bool:
    selector = hook.get("objectSelector")
    if not selector:
        return True
    candidates = [o for o in (obj, old_obj) if o is not None]
    if not candidates:
        return label_selector_matches(selector, {})
    return any(label_selector_matches(selector, _labels(o)) for o in candidates)


def _match_conditions(hook: dict, request: dict) -> tuple[bool, str | None]:
    """(matches, error): any false -> no match; otherwise any error -> error."""
    errors: list[str] = []
    variables = {
        "object": request.get("object"),
        "oldObject": request.get("oldObject"),
        "request": request,
    }
    for condition in hook.get("matchConditions") or []:
        name, expression = condition.get("name", ""), condition.get("expression", "")
        try:
            result = cel.evaluate_expression(expression, variables)
        except cel.CELError as exc:
            errors.append(f'matchCondition "{name}": {exc.message}')
            continue
        if not isinstance(result, bool):
            errors.append(f'matchCondition "{name}": expression must evaluate to a bool')
            continue
        if not result:
            return False, None
    if errors:
        return True, "failed to evaluate match conditions: " + "; ".join(errors)
    return True, None


# --------------------------------------------------------------------------------------------
# JSON patch (RFC 6902)
# --------------------------------------------------------------------------------------------


class JSONPatchError(Exception):
    pass


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise JSONPatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list, token: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (token != "0" and token.startswith("0")):
        raise JSONPatchError(f"invalid array index {token!r}")
    idx = int(token)
    if idx > len(container) or (idx == len(container) and not allow_end):
        raise JSONPatchError(f"array index {idx} out of bounds")
    return idx


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise JSONPatchError(f"doc is missing path: {path}")
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, allow_end=False)]
        else:
            raise JSONPatchError(f"doc is missing path: {path}")
    return node


def _get(doc: Any, path: str) -> Any:
    node = doc
    for token in _pointer(path):
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, allow_end=False)]
        else:
            raise JSONPatchError(f"doc is missing path: {path}")
    return node


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, allow_end=True), value)
    else:
        raise JSONPatchError(f"add operation does not apply: doc is missing path: {path}")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    tokens = _pointer(path)
    if not tokens:
        raise JSONPatchError("remove operation does not apply: cannot remove the root")
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise JSONPatchError(f"remove operation does not apply: doc is missing key: {path}")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, allow_end=False))
    raise JSONPatchError(f"remove operation does not apply: doc is missing path: {path}")


def apply_json_patch(document: Any, operations: list) -> Any:
    """Apply an RFC 6902 JSON patch to a copy of ``document``; raises JSONPatchError."""
    doc = copy.deepcopy(document)
    if not isinstance(operations, list):
        raise JSONPatchError("a JSON patch must be a list of operations")
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise JSONPatchError(f"invalid operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            tokens = _pointer(path)
            if not tokens:
                doc = copy.deepcopy(op.get("value"))
                continue
            parent = _parent(doc, tokens, path)
            last = tokens[-1]
            if isinstance(parent, dict):
                if last not in parent:
                    raise JSONPatchError(
                        f"replace operation does not apply: doc is missing key: {path}: missing value"
                    )
                parent[last] = copy.deepcopy(op.get("value"))
            elif isinstance(parent, list):
                parent[_index(parent, last, allow_end=False)] = copy.deepcopy(op.get("value"))
            else:
                raise JSONPatchError(f"replace operation does not apply: doc is missing path: {path}")
        elif kind == "move":
            doc, value = _remove(doc, op.get("from", ""))
            doc = _add(doc, path, value)
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op.get("from", ""))))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise JSONPatchError(f"testing value {path} failed: test failed")
        else:
            raise JSONPatchError(f"Unexpected kind: {kind}")
    return doc


# --------------------------------------------------------------------------------------------
# Calling a webhook
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _ssl_context(ca_bundle: str | None) -> ssl.SSLContext:
    # Cached: building a context per call (and a TLS handshake per call, see _session) was a
    # large share of every admitted request.
    if ca_bundle:
        try:
            pem = base64.b64decode(ca_bundle).decode("ascii")
            return ssl.create_default_context(cadata=pem)
        except (ValueError, ssl.SSLError, UnicodeDecodeError) as exc:
            raise ValueError(f"invalid caBundle: {exc}") from exc
    return ssl.create_default_context()


def _tls_reason(exc: BaseException, server_name: str) -> str:
    verify = getattr(exc, "verify_code", None)
    text = str(exc)
    if verify == 62 or "Hostname mismatch" in text or "IP address mismatch" in text:
        return f"tls: failed to verify certificate: x509: certificate is not valid for {server_name}"
    if verify in (10,) or "expired" in text:
        return "tls: failed to verify certificate: x509: certificate has expired or is not yet valid"
    if isinstance(exc, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in text:
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    return f"remote error: tls: {text}"


async def _call_webhook(
    hook: dict,
    review: dict,
    *,
    cluster: Any,
    session: aiohttp.ClientSession,
) -> dict:
    """POST the review; return the parsed response body. Raises _CallError."""
    name = hook.get("name", "")
    config = hook.get("clientConfig") or {}
    timeout = hook.get("timeoutSeconds")
    timeout = 10 if timeout is None else int(timeout)
    query = f"timeout={timeout}s"
    try:
        ssl_context = _ssl_context(config.get("caBundle"))
    except ValueError as exc:
        raise _CallError(name, f"could not get REST client: {exc}") from exc

    if config.get("url"):
        display = config["url"]
        parts = urllib.parse.urlsplit(display)
        if parts.scheme != "https":
            raise _CallError(
                name, f'could not get REST client: webhook URL scheme must be https: "{display}"'
            )
        display_url = urllib.parse.urlunsplit(
            parts._replace(query=(parts.query + "&" if parts.query else "") + query)
        )
        connect_url = display_url
        server_name = parts.hostname or ""
        headers = {}
    elif config.get("service"):
        service = config["service"]
        namespace, svc_name = service.get("namespace", ""), service.get("name", "")
        port = int(service.get("port") or 443)
        path = service.get("path") or "/"
        server_name = f"{svc_name}.{namespace}.svc"
        display_url = f"https://{server_name}:{port}{path}?{query}"
        try:
            host, mapped_port = await _maybe_await(cluster.service_resolver(namespace, svc_name, port))
        except Exception as exc:  # noqa: BLE001 - the resolver's failure is the call's failure
            raise _CallError(
                name, f'failed to call webhook: Post "{display_url}": dial tcp: lookup {server_name}: {exc}'
            ) from exc
        bracketed = f"[{host}]" if ":" in str(host) else str(host)
        connect_url = f"https://{bracketed}:{mapped_port}{path}?{query}"
        headers = {"Host": f"{server_name}:{port}"}
    else:
        raise _CallError(name, "could not get REST client: clientConfig has neither url nor service")

    headers.update(
        {
            "Content-Type": "application/json",
            "Accept": "application/json, */*",
            "User-Agent": "kube-apiserver-admission",
        }
    )
    post = f'Post "{display_url}"'
    try:
        async with session.post(
            connect_url,
            data=json.dumps(review),
            headers=headers,
            ssl=ssl_context,
            server_hostname=server_name if config.get("service") else None,
            timeout=aiohttp.ClientTimeout(total=timeout),
            allow_redirects=False,
        ) as response:
            body = await response.read()
            status = response.status
    except TimeoutError as exc:
        raise _CallError(name, f"failed to call webhook: {post}: context deadline exceeded") from exc
    except aiohttp.ClientConnectorCertificateError as exc:
        raise _CallError(
            name, f"failed to call webhook: {post}: {_tls_reason(exc.certificate_error, server_name)}"
        ) from exc
    except aiohttp.ClientSSLError as exc:
        raise _CallError(name, f"failed to call webhook: {post}: {_tls_reason(exc, server_name)}") from exc
    except ssl.SSLError as exc:
        raise _CallError(name, f"failed to call webhook: {post}: {_tls_reason(exc, server_name)}") from exc
    except aiohttp.ClientConnectorError as exc:
        raise _CallError(
            name,
            f"failed to call webhook: {post}: dial tcp {exc.host}:{exc.port}: connect: connection refused",
        ) from exc
    except aiohttp.ClientError as exc:
        raise _CallError(name, f"failed to call webhook: {post}: {type(exc).__name__}: {exc}") from exc
    except OSError as exc:
        raise _CallError(name, f"failed to call webhook: {post}: {exc}") from exc

    if status < 200 or status > 299:
        text = body[:1024].decode("utf-8", "replace")
        raise _CallError(
            name,
            f"failed to call webhook: an error on the server ({json.dumps(text)}) has prevented the request from succeeding"
            if text
            else f"failed to call webhook: the server responded with the status code {status} but did not return more information",
        )
    try:
        return json.loads(body)
    except ValueError as exc:
        raise _CallError(name, f"failed to call webhook: {exc}") from exc


def _verify_response(hook_name: str, uid: str, body: Any, *, mutating: bool) -> dict:
    """webhookrequest.VerifyAdmissionResponse for v1 reviews."""

    def invalid(text: str) -> _CallError:
        return _CallError(hook_name, f"received invalid webhook response: {text}")

    if not isinstance(body, dict):
        raise invalid("expected an AdmissionReview object")
    response = body.get("response")
    if not isinstance(response, dict):
        raise invalid("webhook response was absent")
    if response.get("uid") != uid:
        raise invalid(f'expected response.uid="{uid}", got "{response.get("uid", "")}"')
    if body.get("apiVersion") != "admission.k8s.io/v1" or body.get("kind") != "AdmissionReview":
        got = f"{body.get('apiVersion', '')}, Kind={body.get('kind', '')}"
        raise invalid(f"expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {got}")
    patch, patch_type = response.get("patch"), response.get("patchType")
    if mutating:
        if patch and patch_type is None:
            raise invalid("webhook returned response.patch but not response.patchType")
        if not patch and patch_type is not None:
            raise invalid("webhook returned response.patchType but not response.patch")
        if patch and patch_type != "JSONPatch":
            raise invalid(f'webhook returned invalid response.patchType of "{patch_type}"')
    else:
        if patch:
            raise invalid("validating webhook may not return response.patch")
        if patch_type is not None:
            raise invalid("validating webhook may not return response.patchType")
    return response


def _denied(hook_name: str, response: dict) -> AdmissionDenied:
    """webhookerrors.ToStatusErr."""
    result = dict(response.get("status") or {})
    code = int(result.get("code") or 0)
    if code < 400:
        code = 400
    denied_by = f'admission webhook "{hook_name}" denied the request'
    if result.get("message"):
        message = f"{denied_by}: {result['message']}"
    elif result.get("reason"):
        message = f"{denied_by}: {result['reason']}"
    else:
        message = f"{denied_by} without explanation"
    details = result.get("details")
    causes = list((details or {}).get("causes") or [])
    return AdmissionDenied(
        message,
        status=code,
        reason=result.get("reason") or "",
        causes=causes,
        details=details,
        webhook=hook_name,
    )


def _default_options(operation: str, dry_run: bool) -> dict | None:
    kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}.get(operation)
    if kind is None:
        return None
    options: dict[str, Any] = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
    if dry_run:
        options["dryRun"] = ["All"]
    return options


def _request(
    *,
    operation: str,
    group: str,
    version: str,
    resource: str,
    subresource: str | None,
    kind: str,
    namespace: str | None,
    name: str | None,
    obj: dict | None,
    old_obj: dict | None,
    user_info: dict,
    dry_run: bool,
    options: dict | None,
) -> dict:
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": resource}
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": gvk,
        "resource": gvr,
        "requestKind": dict(gvk),
        "requestResource": dict(gvr),
        "operation": operation,
        "userInfo": {k: v for k, v in (user_info or {}).items() if v not in (None, "", [], {})},
        "object": obj,
        "oldObject": old_obj,
        "dryRun": bool(dry_run),
        "options": options,
    }
    if subresource:
        request["subResource"] = subresource
        request["requestSubResource"] = subresource
    if name:
        request["name"] = name
    if namespace:
        request["namespace"] = namespace
    return request


async def _hooks(cluster: Any, plural: str) -> list[dict]:
    configs = await _maybe_await(cluster.list_objects("admissionregistration.k8s.io", "v1", plural))
    configs = sorted(configs or [], key=lambda c: (c.get("metadata") or {}).get("name", ""))
    return [hook for config in configs for hook in (config.get("webhooks") or [])]


async def _select(hooks: list[dict], request: dict, *, cluster: Any, ctx: dict) -> list[dict]:
    """Webhooks to call (ShouldCallHook); raises AdmissionDenied for failing matchConditions."""
    selected = []
    for hook in hooks:
        if not await _namespace_matches(
            hook,
            cluster,
            group=ctx["group"],
            resource=ctx["resource"],
            namespace=ctx["namespace"],
            obj=ctx["obj"],
            old_obj=ctx["old_obj"],
        ):
            continue
        if not _object_matches(hook, ctx["obj"], ctx["old_obj"]):
            continue
        if not any(
            rule_matches(
                rule,
                operation=ctx["operation"],
                group=ctx["group"],
                version=ctx["version"],
                resource=ctx["resource"],
                subresource=ctx["subresource"],
                namespace=ctx["namespace"],
            )
            for rule in hook.get("rules") or []
        ):
            continue
        if hook.get("matchConditions"):
            matches, error = _match_conditions(hook, request)
            if not matches:
                continue
            if error is not None:
                if (hook.get("failurePolicy") or "Fail") == "Ignore":
                    continue
                resource = ctx["resource"] + (f".{ctx['group']}" if ctx["group"] else "")
                who = f'{resource} "{ctx["name"]}"' if ctx["name"] else resource
                raise AdmissionDenied(
                    f"{who} is forbidden: {error}", status=403, reason="Forbidden", webhook=hook.get("name")
                )
        selected.append(hook)
    return selected


def _check_dry_run(hook: dict, dry_run: bool) -> None:
    if not dry_run:
        return
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        raise _CallError(hook.get("name", ""), "Webhook SideEffects is nil")
    if side_effects not in ("None", "NoneOnDryRun"):
        raise AdmissionDenied(
            f'admission webhook "{hook.get("name", "")}" does not support dry run',
            status=400,
            reason="BadRequest",
            webhook=hook.get("name"),
        )


async def _invoke(
    hook: dict, request: dict, *, cluster: Any, session: aiohttp.ClientSession, mutating: bool
) -> dict:
    """Call one webhook; return its verified ``response``. Raises _CallError / AdmissionDenied."""
    name = hook.get("name", "")
    versions = hook.get("admissionReviewVersions") or []
    if "v1" not in versions:
        raise _CallError(
            name,
            "could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)",
        )
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    body = await _call_webhook(hook, review, cluster=cluster, session=session)
    return _verify_response(name, request["uid"], body, mutating=mutating)


@contextlib.asynccontextmanager
async def _session(cluster: Any) -> AsyncIterator[aiohttp.ClientSession]:
    """The cluster's long-lived client (keep-alive, as the API server reuses connections);
    a throwaway one for duck-typed test clusters that cannot hold it."""
    session = getattr(cluster, "webhook_http", None)
    if isinstance(session, aiohttp.ClientSession) and not session.closed:
        yield session
        return
    session = aiohttp.ClientSession()
    try:
        cluster.webhook_http = session
    except AttributeError:
        async with session:
            yield session
        return
    yield session


async def run_admission(
    *,
    cluster: Any,
    operation: str,
    group: str,
    version: str,
    resource: str,
    subresource: str | None,
    kind: str,
    namespace: str | None,
    name: str | None,
    obj: dict | None,
    old_obj: dict | None,
    user_info: dict,
    dry_run: bool,
    phase: str | None = None,
    warnings: list | None = None,
    options: dict | None = None,
) -> dict | None:
    """Run the mutating (``phase="mutating"``) or validating (``phase="validating"``) webhooks.

    Returns the object after mutation (mutating) or ``obj`` unchanged (validating). With
    ``phase=None`` both run in a row (mutating, then validating on the mutated object) - the
    real server validates the schema in between, so prefer two calls. Webhook warnings are
    appended to ``warnings``. ``options`` is the request's Create/Update/DeleteOptions (a
    minimal one is built when absent). Raises `AdmissionDenied`. Inputs are not mutated.
    """
    if phase is None:
        mutated = await run_admission(
            cluster=cluster, operation=operation, group=group, version=version, resource=resource,
            subresource=subresource, kind=kind, namespace=namespace, name=name, obj=obj, old_obj=old_obj,
            user_info=user_info, dry_run=dry_run, phase="mutating", warnings=warnings, options=options,
        )  # fmt: skip
        await run_admission(
            cluster=cluster, operation=operation, group=group, version=version, resource=resource,
            subresource=subresource, kind=kind, namespace=namespace, name=name, obj=mutated, old_obj=old_obj,
            user_info=user_info, dry_run=dry_run, phase="validating", warnings=warnings, options=options,
        )  # fmt: skip
        return mutated
    if phase not in ("mutating", "validating"):
        raise ValueError(f"phase must be 'mutating' or 'validating', not {phase!r}")
    if group == "admissionregistration.k8s.io" and resource in _EXEMPT:
        return obj
    mutating = phase == "mutating"
    hooks = await _hooks(
        cluster, "mutatingwebhookconfigurations" if mutating else "validatingwebhookconfigurations"
    )
    if not hooks:
        return obj
    current = copy.deepcopy(obj)
    opts = copy.deepcopy(options) if options is not None else _default_options(operation, dry_run)
    ctx = {
        "operation": operation,
        "group": group,
        "version": version,
        "resource": resource,
        "subresource": subresource,
        "namespace": namespace,
        "name": name,
        "obj": current,
        "old_obj": old_obj,
    }

    def make_request(target: dict | None) -> dict:
        return _request(
            operation=operation, group=group, version=version, resource=resource, subresource=subresource,
            kind=kind, namespace=namespace, name=name, obj=copy.deepcopy(target), old_obj=copy.deepcopy(old_obj),
            user_info=copy.deepcopy(user_info), dry_run=dry_run, options=copy.deepcopy(opts),
        )  # fmt: skip

    async with _session(cluster) as session:
        if mutating:
            for hook in hooks:
                request = make_request(current)
                ctx["obj"] = current
                if not await _select([hook], request, cluster=cluster, ctx=ctx):
                    continue
                try:
                    _check_dry_run(hook, dry_run)
                    response = await _invoke(hook, request, cluster=cluster, session=session, mutating=True)
                except _CallError as exc:
                    if (hook.get("failurePolicy") or "Fail") == "Ignore":
                        continue
                    raise _internal_error(str(exc), hook.get("name")) from None
                if warnings is not None:
                    warnings.extend(response.get("warnings") or [])
                if not response.get("allowed"):
                    raise _denied(hook.get("name", ""), response)
                if response.get("patch"):
                    try:
                        operations = json.loads(base64.b64decode(response["patch"]))
                    except ValueError as exc:
                        raise _internal_error(str(exc), hook.get("name")) from None
                    if not operations:
                        continue
                    if current is None:
                        raise _internal_error(
                            f'admission webhook "{hook.get("name", "")}" attempted to modify the object, '
                            "which is not supported for this operation",
                            hook.get("name"),
                        )
                    try:
                        current = apply_json_patch(current, operations)
                    except JSONPatchError as exc:
                        raise _internal_error(str(exc), hook.get("name")) from None
            return current

        request = make_request(current)
        selected = await _select(hooks, request, cluster=cluster, ctx=ctx)

        async def one(hook: dict) -> tuple[dict | None, BaseException | None]:
            try:
                _check_dry_run(hook, dry_run)
                return await _invoke(hook, request, cluster=cluster, session=session, mutating=False), None
            except (_CallError, AdmissionDenied) as exc:
                return None, exc

        results = await asyncio.gather(*(one(hook) for hook in selected))
        first: AdmissionDenied | None = None
        for hook, (response, error) in zip(selected, results, strict=True):
            if isinstance(error, _CallError):
                if (hook.get("failurePolicy") or "Fail") == "Ignore":
                    continue
                error = _internal_error(str(error), hook.get("name"))
            if error is None and response is not None:
                if warnings is not None:
                    warnings.extend(response.get("warnings") or [])
                if not response.get("allowed"):
                    error = _denied(hook.get("name", ""), response)
            if error is not None and first is None:
                first = error  # type: ignore[assignment]
        if first is not None:
            raise first
        return obj

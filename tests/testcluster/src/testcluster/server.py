"""FaithfulCluster: a kmock ``KubernetesEmulator`` with real API-server semantics, and helpers to run it.

Requests first go through kmock's DSL reactions (so ``cluster['patch', kmock.resource('batch', 'v1', 'jobs')] << 500``
injects a fault and takes precedence); unmatched requests are served by this module's API server emulation.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import dataclasses
import datetime
import json
import random
import ssl
import struct
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp.test_utils
import aiohttp.web
import attrs
import kmock
import yaml
from kmock._internal import apps, enums, rendering

from . import (
    applying,
    authn,
    builtin,
    certs,
    discovery,
    errors,
    hooks,
    openapi,
    patching,
    podlogs,
    protobuf,
    rbac,
    selectors,
    tables,
    watching,
)
from .builtin import ResourceDef
from .errors import ApiError
from .store import Store

RBAC_KINDS = {(rbac.RBAC_GROUP, p) for p in ('roles', 'rolebindings', 'clusterroles', 'clusterrolebindings')}
CLUSTER_ROLES_GP = (rbac.RBAC_GROUP, 'clusterroles')
DISCOVERY_PREFIXES = ('/api', '/apis', '/openapi')
CRD_GP = ('apiextensions.k8s.io', 'customresourcedefinitions')
NS_GP = ('', 'namespaces')
CRD_CLEANUP = 'customresourcecleanup.apiextensions.k8s.io'
ROOT_CA = ('-----BEGIN CERTIFICATE-----\nMIIBfake0test0cluster0has0no0TLS0this0is0a0placeholder\n'
           '-----END CERTIFICATE-----\n')
_SUFFIX_CHARS = 'bcdfghjklmnpqrstvwxz2456789'


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')


@dataclasses.dataclass(frozen=True)
class ApiPath:
    group: str
    version: str
    namespace: str | None = None
    plural: str | None = None
    name: str | None = None
    sub: str | None = None
    watch_prefix: bool = False


def parse_api_path(path: str) -> ApiPath | None:
    """``/api/v1/namespaces/ns/pods/x/status`` -> ApiPath; None for non-resource paths (/version, /openapi...)."""
    parts = [p for p in path.strip('/').split('/') if p]
    if len(parts) >= 2 and parts[0] == 'api':
        group, version, rest = '', parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == 'apis':
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    watch_prefix = False
    if rest and rest[0] == 'watch':
        watch_prefix, rest = True, rest[1:]
    namespace: str | None = None
    if rest and rest[0] == 'namespaces' and len(rest) >= 3 and not (
            len(rest) == 3 and group == '' and rest[2] in ('status', 'finalize')):
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return ApiPath(group, version, namespace, watch_prefix=watch_prefix)
    return ApiPath(group, version, namespace, rest[0], rest[1] if len(rest) > 1 else None,
                   '/'.join(rest[2:]) or None, watch_prefix)


REQUEST_MAX = 3 * 1024 * 1024
"""kube-apiserver's ``MaxRequestBodyBytes``: twice etcd's limit, for JSON bodies of objects it stores smaller."""


async def _parse_request(raw: aiohttp.web.BaseRequest, *, id: int) -> rendering.Request:
    """Like ``kmock.Request._parse``, but with a path parser that understands all API paths."""
    # aiohttp's own default (1 MiB) is stricter than the API server; its check raises at REQUEST_MAX + 1.
    try:
        body = await raw.clone(client_max_size=REQUEST_MAX).read()
    except aiohttp.web.HTTPRequestEntityTooLarge:
        raise errors.request_too_large(REQUEST_MAX) from None
    text = body.decode('utf-8', errors='replace')
    try:
        data = json.loads(body) if body else None
    except ValueError:
        data = None
    api = parse_api_path(raw.path)
    method = raw.method.upper()
    action: enums.action | None = None
    resource = None
    if api is not None:
        resource = kmock.resource(group=api.group, version=api.version, plural=api.plural)
        if method == 'GET' and (raw.query.get('watch') in ('true', '1') or api.watch_prefix):
            action = enums.action.WATCH
        elif api.name is None:
            action = {'GET': enums.action.LIST, 'POST': enums.action.CREATE}.get(method)
        else:
            action = {'GET': enums.action.FETCH, 'PATCH': enums.action.UPDATE, 'PUT': enums.action.UPDATE,
                      'DELETE': enums.action.DELETE}.get(method)
    return rendering.Request(
        id=id, raw_request=raw, url=raw.url, method=raw.method, params=dict(raw.query),
        headers=dict(raw.headers), cookies=dict(raw.cookies), data=data, body=body, text=text,
        action=action, resource=resource, namespace=api.namespace if api else None,
        name=api.name if api else None, subresource=api.sub if api else None)


_USER_KEY = aiohttp.web.RequestKey('faithful.user', str)


@dataclasses.dataclass(frozen=True)
class Served:
    """One answered API request (``FaithfulCluster.served``)."""
    user: str
    method: str
    path: str
    query: str
    status: int


@dataclasses.dataclass
class Ctx:
    """One API request, resolved."""
    rdef: ResourceDef
    namespace: str | None
    name: str | None
    sub: str | None
    params: dict[str, str]
    user: dict[str, Any]
    dry_run: bool = False
    manager: str = ''
    field_validation: str = 'Warn'
    warnings: list[str] = dataclasses.field(default_factory=list)
    internal: bool = False


@attrs.define(kw_only=True, slots=False)
class FaithfulCluster(kmock.KubernetesEmulator):
    """An in-memory Kubernetes API server for tests. Start it with :func:`running_cluster`."""

    bookmark_interval: float = 5.0
    history_size: int = 10_000

    def __attrs_post_init__(self) -> None:
        # Deliberately NOT calling the parents' hooks: they register kmock's naive fallback reactions.
        # Requests that no user reaction catches are served by ``_serve()`` (see ``_handle()``).
        self.store = Store(self.history_size)
        self.allocator = builtin.Allocator()
        self.closing = asyncio.Event()
        self.authn = authn.Tokens()
        self.access_reviews: list[dict[str, Any]] = []
        self.served: list[Served] = []
        """Every API request answered: who asked, what, and the status code (to count by identity)."""
        """Every SubjectAccessReview answered: the attributes asked and the decision (for assertions)."""
        self.webhook_http: Any = None  # the admission module's keep-alive client
        self.service_endpoints: dict[tuple[Any, ...], tuple[str, int]] = {}
        self.kubeconfig: Path | None = None
        # Serving certificate: clients send credentials only over TLS (kubectl and helm never over plain HTTP).
        self.tls = certs.make_ca_and_server_cert(['localhost'], ['127.0.0.1'], ca_name='faithful cluster CA',
                                                 valid_for=datetime.timedelta(days=30))
        self.pod_log_dir: Path | None = None  # where the pod runner writes container logs (pods/log)
        self._builtins = {(d.group, d.version, d.plural): d for d in builtin.BUILTINS}
        self._crd_defs: dict[tuple[str, str, str], ResourceDef] = {}
        self._bootstrap()

    # -----------------------------------------------------------------------------------------------------------
    # Public API for tests and for the schema/admission/authz modules.

    def resource_defs(self) -> list[ResourceDef]:
        return list(self._builtins.values()) + list(self._crd_defs.values())

    def resource_def(self, group: str, version: str, plural: str) -> ResourceDef | None:
        return self._builtins.get((group, version, plural)) or self._crd_defs.get((group, version, plural))

    def _any_def(self, group: str, plural: str) -> ResourceDef | None:
        for d in self.resource_defs():
            if d.group == group and d.plural == plural:
                return d
        return None

    def list_objects(self, group: str, version: str, plural: str, namespace: str | None = None
                     ) -> list[dict[str, Any]]:
        rdef = self.resource_def(group, version, plural)
        if rdef is None:
            return []
        return [copy.deepcopy(self._present(rdef, o)) for o in self.store.list(rdef.gp, namespace)]

    def get_object(self, group: str, version: str, plural: str, namespace: str | None, name: str
                   ) -> dict[str, Any] | None:
        rdef = self.resource_def(group, version, plural)
        obj = self.store.get((group, plural), namespace if rdef is None or rdef.namespaced else None, name)
        if obj is None or rdef is None:
            return None
        return copy.deepcopy(self._present(rdef, obj))

    def crd_for(self, group: str, plural: str) -> dict[str, Any] | None:
        """The stored CRD itself, read-only: copying a large schema on every request dominated
        the server's CPU (the schema and admission modules never mutate their inputs)."""
        return self.store.get(CRD_GP, None, f'{plural}.{group}')

    def service_resolver(self, namespace: str, name: str, port: int | None = None) -> tuple[str, int]:
        for key in ((namespace, name, port), (namespace, name)):
            if key in self.service_endpoints:
                return self.service_endpoints[key]
        raise LookupError(f'no local endpoint registered for service {namespace}/{name}:{port}')

    def compact(self) -> None:
        """Drop the watch-event history: watches resuming from older resourceVersions get 410 Gone."""
        self.store.compact()

    @property
    def api_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the (first) running server."""
        return str(self.servers[0].url).rstrip('/')

    def client_ssl(self) -> ssl.SSLContext:
        """An SSL context that trusts this server's CA (for HTTP clients that do not read a kubeconfig)."""
        return self.tls.client_ssl_context()

    @property
    def admin_headers(self) -> dict[str, str]:
        """The ``Authorization`` header of ``kubernetes-admin`` (``system:masters``), for set-up steps."""
        return {'Authorization': f'Bearer {self.authn.admin_token}'}

    def add_user(self, username: str, groups: list[str] | tuple[str, ...] = ()) -> str:
        """A bearer token that authenticates a person (as a static token file would)."""
        return self.authn.add_user(username, groups)

    def authorize(self, attrs: rbac.Attributes) -> rbac.Decision:
        """The server's authorizer chain: ``system:masters`` first (as kube-apiserver's privileged-group
        authorizer), then RBAC from the stored objects."""
        if rbac.MASTERS in attrs.user.groups:
            return rbac.Decision(True, '')
        return rbac.authorize(self._rbac_objects(), attrs)

    def write_kubeconfig(self, path: str | Path, *, token: str | None = None, namespace: str = 'default',
                         remember: bool = True) -> Path:
        """A kubeconfig for this server: the admin's unless ``token`` names another identity."""
        path = Path(path)
        user: dict[str, Any] = {'token': token or self.authn.admin_token}
        config = {
            'apiVersion': 'v1', 'kind': 'Config', 'preferences': {},
            'clusters': [{'name': 'faithful', 'cluster': {'server': self.api_url,
                                                          'certificate-authority-data': self.tls.ca_bundle_b64}}],
            'users': [{'name': 'faithful-user', 'user': user}],
            'contexts': [{'name': 'faithful', 'context': {'cluster': 'faithful', 'user': 'faithful-user',
                                                          'namespace': namespace}}],
            'current-context': 'faithful',
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        if remember:
            self.kubeconfig = path
        return path

    # -----------------------------------------------------------------------------------------------------------
    # Request entry point.

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        # As RawHandler.__call__, but kmock's own path parser fails on e.g. /api/v1/namespaces.
        raw_response: aiohttp.web.StreamResponse | None = None
        try:
            try:
                request = await _parse_request(raw_request, id=len(self._requests))
            except ApiError as e:
                return aiohttp.web.json_response(e.as_status(), status=e.code)
            self._requests.append(request)
            try:
                response = await self._handle(request)
                self._record(raw_request, response.status)
                return response
            except rendering.StreamingError as e:
                raw_response = e.args[0]
                raise e.__cause__ or e from None
        except Exception as e:
            self._record(raw_request, 500)
            if not self._errors:
                raise
            self._errors[-1].append(e)
            if raw_response is None or not raw_response.prepared:
                return await self._render_error(e)
            await self._stream_error(e, raw_response)
            await raw_response.write_eof()
            return raw_response

    def _record(self, raw: aiohttp.web.BaseRequest, status: int) -> None:
        self.served.append(Served(user=raw.get(_USER_KEY, ''), method=raw.method.upper(), path=raw.path,
                                  query=raw.query_string, status=status))

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        try:
            # The DSL reactions defined by tests (fault injection etc.) take precedence.
            return await apps.RawHandler._handle(self, request)
        except NotImplementedError:
            pass
        raw = request._raw_request
        assert raw is not None
        try:
            return await self._serve(raw, request.body)
        except ApiError as e:
            return _status_response(e.as_status(), e.code)

    async def _serve(self, raw: aiohttp.web.BaseRequest, body: bytes) -> aiohttp.web.StreamResponse:
        path = raw.path.rstrip('/') or '/'
        params = {k: v for k, v in raw.query.items()}
        method = raw.method.upper()
        for probe in ('/healthz', '/livez', '/readyz'):
            if path == probe or path.startswith(probe + '/'):
                return aiohttp.web.Response(text='ok', content_type='text/plain')
        if path == '/version':
            return aiohttp.web.json_response(discovery.VERSION_INFO)
        user = self._user(raw)
        raw[_USER_KEY] = user.username
        attrs = self._attributes(user, method, path, params)
        if not self.authorize(attrs).allowed:
            return _status_response(rbac.forbidden_status(attrs), 403)
        if path == '/':
            return aiohttp.web.json_response(discovery.root_paths(self.resource_defs()))
        if path.startswith('/openapi/'):
            return self._serve_openapi(path, raw)
        parts = path.strip('/').split('/')
        if parts[0] not in ('api', 'apis'):
            raise errors.resource_not_found()
        if path == '/api':
            host = raw.host or '127.0.0.1'
            return aiohttp.web.json_response(discovery.api_versions(host))
        if path == '/apis':
            return aiohttp.web.json_response(discovery.group_list(self.resource_defs()))
        if parts[0] == 'apis' and len(parts) == 2:
            doc = discovery.group(self.resource_defs(), parts[1])
            if doc is None:
                raise errors.resource_not_found()
            return aiohttp.web.json_response(doc)
        api = parse_api_path(path)
        if api is None:
            raise errors.resource_not_found()
        group, version, namespace, watch_prefix = api.group, api.version, api.namespace, api.watch_prefix
        if api.plural is None:
            if namespace is not None or not any(d.group == group and d.version == version
                                                for d in self.resource_defs()):
                raise errors.resource_not_found()
            return aiohttp.web.json_response(discovery.resource_list(group, version, self.resource_defs()))
        plural, name, sub = api.plural, api.name, api.sub
        rdef = self.resource_def(group, version, plural)
        if rdef is None:
            raise errors.resource_not_found()
        if (not rdef.namespaced and namespace is not None) or (rdef.namespaced and name and namespace is None):
            raise errors.resource_not_found()
        if sub is not None and sub not in rdef.subresources:
            raise errors.resource_not_found()

        ctx = Ctx(rdef=rdef, namespace=namespace, name=name, sub=sub, params=params, user=user.as_dict())
        ctx.dry_run = params.get('dryRun') == 'All'
        if 'dryRun' in params and params['dryRun'] not in ('All', ''):
            raise errors.invalid('', '', '', [errors.unsupported_value('dryRun', params['dryRun'], ['All'])])
        # The real server's default is Warn; kubectl asks for Strict explicitly.
        ctx.field_validation = params.get('fieldValidation') or 'Warn'
        if ctx.field_validation not in ('Strict', 'Warn', 'Ignore'):
            raise errors.bad_request(f'fieldValidation must be one of "Ignore", "Warn", or "Strict", '
                                     f'got {ctx.field_validation!r}')
        ctx.manager = params.get('fieldManager') or (raw.headers.get('User-Agent') or 'unknown').split('/')[0]
        content_type = raw.content_type or 'application/json'
        if 'protobuf' in content_type and body:
            expected = ('meta.k8s.io/v1', 'DeleteOptions') if method == 'DELETE' else (rdef.api_version, rdef.kind)
            if rdef.gp == ('', 'serviceaccounts') and sub == 'token':
                expected = ('authentication.k8s.io/v1', 'TokenRequest')
            try:
                body = json.dumps(protobuf.decode(body, expected)).encode()
            except protobuf.ProtobufUnsupported as e:
                raise ApiError(415, 'UnsupportedMediaType', 'the body of the request was in an unknown format - '
                                                            'accepted media types include: application/json, '
                                                            f'application/yaml ({e})', {}) from None
            except (ValueError, IndexError, KeyError, struct.error) as e:
                raise errors.bad_request(f'error decoding the protobuf body: {e}') from None
            content_type = 'application/json'
        is_watch = method == 'GET' and (watch_prefix or params.get('watch') in ('true', '1'))

        verb = {'GET': 'watch' if is_watch else ('list' if name is None else 'get'),
                'POST': 'create', 'PUT': 'update', 'PATCH': 'patch',
                'DELETE': 'deletecollection' if name is None else 'delete'}.get(method)
        if rdef.gp == ('', 'serviceaccounts') and sub == 'token' and method == 'POST' and name is not None:
            return self._json(ctx, self._token_request(ctx, patching.parse_body(body, content_type)), 201)
        if verb is None or verb not in rdef.verbs or (method == 'POST' and (name is not None or (
                rdef.namespaced and namespace is None))) or (method in ('PUT', 'PATCH') and name is None):
            raise errors.method_not_allowed()
        if sub == 'log' and method != 'GET':
            raise errors.method_not_allowed()

        as_table = tables.wants_table(raw.headers.get('Accept') or '') and sub is None
        if is_watch:
            return await self._watch(ctx, raw, as_table)
        if method == 'GET' and name is None:
            listed = self._list(ctx)
            if as_table:
                listed = self._table(ctx, listed['items'], listed['metadata'])
            return self._json(ctx, listed)
        if method == 'GET':
            obj = self._get_or_404(ctx)
            if sub == 'log':
                return aiohttp.web.Response(text=podlogs.pod_log(self.pod_log_dir, obj, ctx.params),
                                            content_type='text/plain')
            if as_table:
                return self._json(ctx, self._table(ctx, [self._present(rdef, obj)],
                                                   {'resourceVersion': obj['metadata']['resourceVersion']}))
            return self._json(ctx, self._present(rdef, obj))
        if method == 'POST':
            data = patching.parse_body(body, content_type)
            if not rdef.stored:
                return self._json(ctx, await self._review(ctx, data), 201)
            obj = await self._create(ctx, data)
            return self._json(ctx, obj, 201)
        if method == 'PUT':
            data = patching.parse_body(body, content_type)
            if not isinstance(data, dict):
                raise errors.bad_request('the body must be a JSON object')
            return self._json(ctx, await self._put(ctx, data))
        if method == 'PATCH':
            data = patching.parse_body(body, content_type)
            obj, created = await self._patch(ctx, content_type, data)
            return self._json(ctx, obj, 201 if created else 200)
        if method == 'DELETE':
            options = patching.parse_body(body, 'application/json') if body.strip() else {}
            if not isinstance(options, dict):
                raise errors.bad_request('DeleteOptions must be a JSON object')
            for key in ('propagationPolicy', 'gracePeriodSeconds', 'orphanDependents'):
                if key in params and key not in options:
                    options[key] = params[key]
            if name is None:
                return self._json(ctx, await self._delete_collection(ctx, options))
            return self._json(ctx, await self._delete(ctx, options))
        raise errors.method_not_allowed()

    def _json(self, ctx: Ctx, data: dict[str, Any], status: int = 200) -> aiohttp.web.Response:
        response = aiohttp.web.json_response(data, status=status)
        for warning in ctx.warnings:
            response.headers.add('Warning', f'299 - {json.dumps(warning)}')
        return response

    def _lookup(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.get(('', plural), namespace, name)

    def _user(self, raw: aiohttp.web.BaseRequest) -> rbac.UserInfo:
        """Authentication (bearer token, or anonymous), then impersonation."""
        user = self.authn.authenticate(raw.headers.get('Authorization') or '', self._lookup)
        return authn.impersonate(user, raw.headers, lambda key: raw.headers.getall(key, []), self.authorize)

    @staticmethod
    def _attributes(user: rbac.UserInfo, method: str, path: str, params: dict[str, str]) -> rbac.Attributes:
        """What the request asks, as the real server's RequestInfoFactory reads it from the URL."""
        api = parse_api_path(path)
        if api is None or api.plural is None:
            # Discovery documents and the OpenAPI are non-resource URLs (system:discovery grants them).
            return rbac.Attributes(user=user, verb=method.lower(), resource_request=False, path=path)
        watch = method == 'GET' and (api.watch_prefix or params.get('watch') in ('true', '1'))
        verb = {'GET': 'watch' if watch else ('list' if api.name is None else 'get'), 'POST': 'create',
                'PUT': 'update', 'PATCH': 'patch',
                'DELETE': 'deletecollection' if api.name is None else 'delete'}.get(method, method.lower())
        namespace = api.namespace or ''
        if (api.group, api.plural) == NS_GP and api.name:
            namespace = api.name  # a namespace's own requests are in that namespace (RoleBindings apply)
        if api.name is None and 'fieldSelector' in params and verb in ('list', 'watch'):
            # A list or watch of one name (kubectl get x/NAME -w) is authorized for that name.
            for term in params['fieldSelector'].split(','):
                key, _, value = term.partition('=')
                if key == 'metadata.name' and value and not value.startswith('='):
                    return rbac.Attributes(user=user, verb=verb, api_group=api.group, api_version=api.version,
                                           resource=api.plural, namespace=namespace, name=value)
        return rbac.Attributes(user=user, verb=verb, api_group=api.group, api_version=api.version,
                               resource=api.plural, subresource=api.sub or '', namespace=namespace,
                               name=api.name or '')

    def _rbac_objects(self) -> rbac.Objects:
        return rbac.Objects(roles=self.store.list((rbac.RBAC_GROUP, 'roles')),
                            cluster_roles=self.store.list(CLUSTER_ROLES_GP),
                            role_bindings=self.store.list((rbac.RBAC_GROUP, 'rolebindings')),
                            cluster_role_bindings=self.store.list((rbac.RBAC_GROUP, 'clusterrolebindings')))

    def _prevent_escalation(self, ctx: Ctx, obj: dict[str, Any]) -> None:
        """The RBAC storage's check: a Role's rules, or a binding's role, must already be held by the requester,
        unless it may ``escalate`` that role (``bind`` for a binding). ``system:masters`` holds everything."""
        user = rbac.UserInfo.of(ctx.user)
        if rbac.MASTERS in user.groups or not isinstance(obj, dict):
            return
        namespace = ctx.namespace or ''
        name = (obj.get('metadata') or {}).get('name') or ctx.name or ''
        if ctx.rdef.plural in ('roles', 'clusterroles'):
            may = rbac.Attributes(user=user, verb='escalate', api_group=rbac.RBAC_GROUP, resource=ctx.rdef.plural,
                                  namespace=namespace, name=name)
            rules = obj.get('rules') or []
        else:
            ref = obj.get('roleRef') or {}
            plural = 'clusterroles' if ref.get('kind') == 'ClusterRole' else 'roles'
            may = rbac.Attributes(user=user, verb='bind', api_group=rbac.RBAC_GROUP, resource=plural,
                                  namespace=namespace, name=ref.get('name') or '')
            role = self.store.get((rbac.RBAC_GROUP, plural), namespace if plural == 'roles' else None,
                                  ref.get('name') or '')
            rules = (role or {}).get('rules') or []
        if self.authorize(may).allowed:
            return
        missing = rbac.not_held(self._rbac_objects(), user, rules, namespace)
        if missing:
            raise ApiError(403, 'Forbidden', f'{ctx.rdef.plural}.{rbac.RBAC_GROUP} "{name}" is forbidden: '
                           f'{rbac.escalation_message(user, missing)}',
                           {'name': name, 'group': rbac.RBAC_GROUP, 'kind': ctx.rdef.plural})

    def _admit_service_account(self, ctx: Ctx, pod: dict[str, Any]) -> None:
        """The ServiceAccount admission plugin: a Pod runs as a ServiceAccount that exists."""
        account = (pod.get('spec') or {}).get('serviceAccountName') or 'default'
        if self.store.get(('', 'serviceaccounts'), ctx.namespace, account) is None:
            name = pod['metadata'].get('name') or pod['metadata'].get('generateName', '')
            raise ApiError(403, 'Forbidden', f'pods "{name}" is forbidden: error looking up service account '
                           f'{ctx.namespace}/{account}: serviceaccount "{account}" not found',
                           {'name': name, 'kind': 'pods'})

    def _token_request(self, ctx: Ctx, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise errors.bad_request('the body must be a JSON object')
        sa = self._get_or_404(ctx)
        return self.authn.request(sa, data, self._lookup)

    def _present(self, rdef: ResourceDef, obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get('apiVersion') == rdef.api_version:
            return obj
        return {**obj, 'apiVersion': rdef.api_version}

    def _get_or_404(self, ctx: Ctx) -> dict[str, Any]:
        assert ctx.name is not None
        obj = self.store.get(ctx.rdef.gp, ctx.namespace, ctx.name)
        if obj is None:
            raise errors.not_found(ctx.rdef.group, ctx.rdef.plural, ctx.name)
        return obj

    # -----------------------------------------------------------------------------------------------------------
    # OpenAPI.

    def _openapi_defs(self) -> list[tuple[ResourceDef, dict[str, Any] | None]]:
        result = []
        for rdef in self.resource_defs():
            schema = None
            if rdef.custom:
                crd = self.store.get(CRD_GP, None, f'{rdef.plural}.{rdef.group}')
                version = builtin.crd_version(crd or {}, rdef.version) or {}
                schema = (version.get('schema') or {}).get('openAPIV3Schema')
            result.append((rdef, schema))
        return result

    def _serve_openapi(self, path: str, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        defs = self._openapi_defs()
        if path == '/openapi/v2':
            accept = raw.headers.get('Accept', '')
            if accept and 'json' not in accept and '*/*' not in accept:
                raise ApiError(406, 'NotAcceptable', 'only application/json is served for /openapi/v2', {})
            return aiohttp.web.json_response(openapi.v2_document(defs))
        groups: dict[str, list[tuple[ResourceDef, dict[str, Any] | None]]] = {}
        for rdef, schema in defs:
            groups.setdefault(openapi.gv_key(rdef.group, rdef.version), []).append((rdef, schema))
        docs = {key: openapi.gv_document(items[0][0].group, items[0][0].version, items)
                for key, items in groups.items()}
        if path == '/openapi/v3':
            return aiohttp.web.json_response(openapi.v3_root(docs))
        key = path[len('/openapi/v3/'):]
        if key not in docs:
            raise errors.resource_not_found()
        return aiohttp.web.json_response(docs[key])

    # -----------------------------------------------------------------------------------------------------------
    # Reading: list & watch.

    def _matcher(self, ctx: Ctx) -> Callable[[dict[str, Any]], bool]:
        extra: set[str] = set()
        if ctx.rdef.custom:
            crd = self.crd_for(ctx.rdef.group, ctx.rdef.plural) or {}
            version = builtin.crd_version(crd, ctx.rdef.version) or {}
            extra = {f['jsonPath'].lstrip('.') for f in version.get('selectableFields') or [] if 'jsonPath' in f}
        field_selector = ctx.params.get('fieldSelector')
        if ctx.name is not None:
            field_selector = ','.join(s for s in (field_selector, f'metadata.name={ctx.name}') if s)
        gvr = f'{ctx.rdef.group}/{ctx.rdef.version}, Resource={ctx.rdef.plural}'
        return selectors.make_matcher(ctx.params.get('labelSelector'), field_selector, ctx.rdef.group,
                                      ctx.rdef.plural, extra, describe=gvr)

    def _list(self, ctx: Ctx) -> dict[str, Any]:
        matches = self._matcher(ctx)
        items = [o for o in self.store.list(ctx.rdef.gp, ctx.namespace) if matches(o)]
        list_rv = self.store.rv
        token = ctx.params.get('continue')
        if token:
            try:
                state = json.loads(base64.urlsafe_b64decode(token.encode()))
                start, list_rv = tuple(state['start']), int(state['rv'])
            except (ValueError, KeyError, TypeError):
                raise errors.bad_request('continue key is not valid: incorrect encoded start '
                                         'resourceVersion (version meta.k8s.io/v1)') from None
            items = [o for o in items if (o['metadata'].get('namespace') or '', o['metadata']['name']) > start]
        result: dict[str, Any] = {'kind': ctx.rdef.list_kind, 'apiVersion': ctx.rdef.api_version,
                                  'metadata': {'resourceVersion': str(list_rv)}}
        limit = ctx.params.get('limit')
        if limit:
            try:
                n = int(limit)
            except ValueError:
                raise errors.bad_request(f'invalid limit: {limit!r}') from None
            if 0 < n < len(items):
                last = items[n - 1]['metadata']
                state = {'rv': list_rv, 'start': [last.get('namespace') or '', last['name']]}
                result['metadata']['continue'] = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
                result['metadata']['remainingItemCount'] = len(items) - n
                items = items[:n]
        result['items'] = [self._present(ctx.rdef, o) for o in items]
        return result

    def _table(self, ctx: Ctx, items: list[dict[str, Any]], metadata: dict[str, Any]) -> dict[str, Any]:
        version = None
        if ctx.rdef.custom:
            version = builtin.crd_version(self.crd_for(ctx.rdef.group, ctx.rdef.plural) or {}, ctx.rdef.version)
        return tables.table(ctx.rdef, version, items, metadata, ctx.params.get('includeObject') or 'Metadata')

    async def _watch(self, ctx: Ctx, raw: aiohttp.web.BaseRequest, as_table: bool = False
                     ) -> aiohttp.web.StreamResponse:
        matches = self._matcher(ctx)

        def present(obj: dict[str, Any]) -> dict[str, Any]:
            obj = self._present(ctx.rdef, obj)
            if as_table:
                return self._table(ctx, [obj], {'resourceVersion': obj['metadata'].get('resourceVersion', '')})
            return obj

        return await watching.serve_watch(
            raw_request=raw, store=self.store, gp=ctx.rdef.gp, namespace=ctx.namespace, matches=matches,
            present=present,
            bookmark_kind={'kind': ctx.rdef.kind, 'apiVersion': ctx.rdef.api_version},
            params=ctx.params, bookmark_interval=self.bookmark_interval, closing=self.closing)

    # -----------------------------------------------------------------------------------------------------------
    # Admission chain: CR schema (prune/default/validate) -> webhooks -> schema again / built-in validation.

    def _lists(self, rdef: ResourceDef) -> patching.ListTypes:
        schema = None
        if rdef.custom:
            version = builtin.crd_version(self.crd_for(rdef.group, rdef.plural) or {}, rdef.version) or {}
            schema = (version.get('schema') or {}).get('openAPIV3Schema')
        return patching.ListTypes(rdef, schema)

    def _field_error(self, ctx: Ctx, name: str, e: Exception) -> ApiError:
        causes = list(getattr(e, 'causes', None) or [])
        message = getattr(e, 'message', None) or str(e)
        details: dict[str, Any] = {'name': name, 'group': ctx.rdef.group, 'kind': ctx.rdef.kind, 'causes': causes}
        return ApiError(int(getattr(e, 'status', 422)), getattr(e, 'reason', 'Invalid') or 'Invalid', message,
                        details)

    async def _admit(self, ctx: Ctx, operation: str, obj: dict[str, Any] | None,
                     old: dict[str, Any] | None) -> dict[str, Any] | None:
        rdef = ctx.rdef
        name = (obj or old or {}).get('metadata', {}).get('name', '')
        crd = self.crd_for(rdef.group, rdef.plural) if rdef.custom else None
        pre_error: Exception | None = None
        warnings: list[str] = []
        if crd is not None and obj is not None:
            try:
                obj, warnings = hooks.admit_custom_object(crd, rdef.version, obj, old,
                                                          field_validation=ctx.field_validation)
            except hooks.FieldError as e:
                pre_error = e
        hook_warnings: list[str] = []

        async def webhooks(phase: str, current: dict[str, Any] | None) -> dict[str, Any] | None:
            try:
                return await hooks.run_admission(
                    cluster=self, operation=operation, group=rdef.group, version=rdef.version,
                    resource=rdef.plural, subresource=ctx.sub if ctx.sub else None, kind=rdef.kind,
                    namespace=ctx.namespace, name=name or None,
                    obj=copy.deepcopy(current) if current is not None else None,
                    old_obj=copy.deepcopy(old) if old is not None else None,
                    user_info=copy.deepcopy(ctx.user), dry_run=ctx.dry_run, phase=phase, warnings=hook_warnings)
            except hooks.AdmissionDenied as e:
                details = e.to_status().get('details', {}) if hasattr(e, 'to_status') else {}
                raise ApiError(int(getattr(e, 'status', 403)), getattr(e, 'reason', 'Forbidden') or 'Forbidden',
                               getattr(e, 'message', None) or str(e), details) from None

        # The real API server's order: mutating admission, schema validation (with CEL),
        # built-in defaults and validation, then validating admission on the final object.
        if not ctx.internal:
            mutated = await webhooks('mutating', obj)
            if operation != 'DELETE' and mutated is not None:
                obj = mutated
        if obj is None:
            if not ctx.internal and operation == 'DELETE':
                await webhooks('validating', None)
            return None
        if crd is not None:
            try:
                obj, more = hooks.admit_custom_object(
                    crd, rdef.version, obj, old,
                    field_validation=ctx.field_validation if pre_error is not None else 'Ignore')
            except hooks.FieldError as e:
                raise self._field_error(ctx, name, e) from None
            if pre_error is not None:
                warnings = more
        causes = builtin.validate_metadata(obj)
        if not causes and not rdef.custom:
            builtin.apply_defaults(rdef, obj, old, self.allocator)
            causes = builtin.validate(rdef, obj, old)
        if causes:
            raise errors.invalid(rdef.kind, rdef.group, name, causes)
        if not ctx.internal:
            await webhooks('validating', obj)
        warnings = [*hook_warnings, *warnings]
        ctx.warnings.extend(w for w in warnings if w not in ctx.warnings)
        return obj

    # -----------------------------------------------------------------------------------------------------------
    # Writing: create.

    def _check_type(self, ctx: Ctx, data: dict[str, Any]) -> None:
        rdef = ctx.rdef
        api_version, kind = data.get('apiVersion'), data.get('kind')
        if api_version and api_version != rdef.api_version:
            raise errors.bad_request(f'the API version in the data ({api_version}) does not match the expected '
                                     f'API version ({rdef.api_version})')
        if kind and kind != rdef.kind:
            raise errors.bad_request(f'the kind in the data ({kind}) does not match the expected kind '
                                     f'({rdef.kind})')

    async def _create(self, ctx: Ctx, data: Any, *, managed: applying.Managed | None = None
                      ) -> dict[str, Any]:
        rdef = ctx.rdef
        if not isinstance(data, dict):
            raise errors.bad_request('the body of the request must be a JSON object')
        self._check_type(ctx, data)
        obj = copy.deepcopy(data)
        obj['apiVersion'] = rdef.api_version
        obj['kind'] = rdef.kind
        meta = obj.get('metadata')
        if meta is not None and not isinstance(meta, dict):
            raise errors.bad_request(f'{rdef.kind} in version "{rdef.version}" cannot be handled as a {rdef.kind}: '
                                     'metadata must be an object')
        if not isinstance(meta, dict):
            meta = obj['metadata'] = {}
        if rdef.namespaced:
            if meta.get('namespace') and meta['namespace'] != ctx.namespace:
                raise errors.bad_request('the namespace of the provided object does not match the namespace '
                                         'sent on the request')
            meta['namespace'] = ctx.namespace
        else:
            meta.pop('namespace', None)
        if not meta.get('name') and meta.get('generateName'):
            prefix = str(meta['generateName'])[:58]
            meta['name'] = prefix + ''.join(random.choice(_SUFFIX_CHARS) for _ in range(5))
        name = meta.get('name') or ''
        if ctx.name is not None and name != ctx.name:
            raise errors.bad_request(f'the name of the object ({name}) does not match the name on the URL '
                                     f'({ctx.name})')
        if not name:
            raise errors.invalid(rdef.kind, rdef.group, '',
                                 [errors.required('metadata.name', 'name or generateName is required')])
        causes = builtin.validate_name(rdef, name)
        if causes:
            raise errors.invalid(rdef.kind, rdef.group, name, causes)
        self._check_namespace(ctx, name)
        if rdef.custom:
            crd = self.store.get(CRD_GP, None, f'{rdef.plural}.{rdef.group}')
            if crd is not None and crd['metadata'].get('deletionTimestamp'):
                raise ApiError(405, 'MethodNotAllowed', 'create not allowed while custom resource definition '
                                                        'is terminating', {})
        for key in ('resourceVersion', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'managedFields',
                    'selfLink'):
            meta.pop(key, None)
        meta['uid'] = str(uuid.uuid4())
        meta['creationTimestamp'] = _now()
        meta['generation'] = 1
        if rdef.has_status:
            obj.pop('status', None)
        if rdef.gp == CRD_GP:
            finalizers = meta.setdefault('finalizers', [])
            if CRD_CLEANUP not in finalizers:
                finalizers.append(CRD_CLEANUP)
        if not rdef.custom:
            builtin.apply_defaults(rdef, obj, None, self.allocator)
        if rdef.gp == ('', 'pods'):
            self._admit_service_account(ctx, obj)
        if rdef.gp in RBAC_KINDS:
            self._prevent_escalation(ctx, obj)
        admitted = await self._admit(ctx, 'CREATE', obj, None)
        assert admitted is not None
        obj = self._enforce_identity(admitted, meta)
        if managed is None:
            managed = applying.Managed([])
            applying.track_update(managed, None, obj, ctx.manager, '', self._lists(rdef), rdef.has_status)
        obj['metadata']['managedFields'] = managed.serialize(rdef.api_version)
        if rdef.gp == CRD_GP:
            obj['status'] = builtin.crd_status(obj, _now())
        if rdef.custom:
            obj['apiVersion'] = f'{rdef.group}/{rdef.storage_version}'
        if ctx.dry_run:
            obj['metadata'].pop('resourceVersion', None)
            return self._present(rdef, obj)
        # Commit (synchronous from here on: atomic for the asyncio server).
        if self.store.get(rdef.gp, ctx.namespace, name) is not None:
            raise errors.already_exists(rdef.group, rdef.plural, name)
        self._check_namespace(ctx, name)
        stored = self.store.put(rdef.gp, obj, None)
        self._after_write(rdef, stored, None)
        return self._present(rdef, stored)

    def _check_namespace(self, ctx: Ctx, name: str) -> None:
        if not ctx.rdef.namespaced:
            return
        ns = self.store.get(NS_GP, None, ctx.namespace or '')
        if ns is None:
            raise errors.not_found('', 'namespaces', ctx.namespace or '')
        if ns['metadata'].get('deletionTimestamp'):
            raise errors.forbidden(f'{ctx.rdef.qualified} "{name}" is forbidden: unable to create new content in '
                                   f'namespace {ctx.namespace} because it is being terminated',
                                   ctx.rdef.group, ctx.rdef.plural, name)

    @staticmethod
    def _enforce_identity(obj: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
        """Webhooks may not change the server-managed identity of an object."""
        new_meta = obj.setdefault('metadata', {})
        for key in ('name', 'namespace', 'uid', 'creationTimestamp', 'generation', 'resourceVersion',
                    'deletionTimestamp', 'deletionGracePeriodSeconds'):
            if key in meta:
                new_meta[key] = meta[key]
            else:
                new_meta.pop(key, None)
        return obj

    # -----------------------------------------------------------------------------------------------------------
    # Writing: update (PUT, PATCH of all kinds).

    async def _put(self, ctx: Ctx, data: dict[str, Any]) -> dict[str, Any]:
        self._check_type(ctx, data)
        return await self._update(ctx, lambda old, managed: copy.deepcopy(data))

    async def _patch(self, ctx: Ctx, content_type: str, data: Any) -> tuple[dict[str, Any], bool]:
        rdef = ctx.rdef
        compute: Callable[[dict[str, Any], applying.Managed], dict[str, Any]]
        if content_type == 'application/json-patch+json':
            def compute(old: dict[str, Any], managed: applying.Managed) -> dict[str, Any]:
                return patching.json_patch(old, data)
        elif content_type == 'application/merge-patch+json':
            if not isinstance(data, dict):
                raise errors.bad_request('a merge patch must be a JSON object')

            def compute(old: dict[str, Any], managed: applying.Managed) -> dict[str, Any]:
                return patching.merge_patch(old, data)
        elif content_type == 'application/strategic-merge-patch+json':
            if rdef.custom:
                raise errors.unsupported_media_type(content_type)
            lists = self._lists(rdef)

            def compute(old: dict[str, Any], managed: applying.Managed) -> dict[str, Any]:
                return patching.strategic_merge_patch(old, data, lists.smp)
        elif content_type == 'application/apply-patch+yaml':
            return await self._apply(ctx, data)
        else:
            raise errors.unsupported_media_type(content_type)
        return await self._update(ctx, compute), False

    async def _apply(self, ctx: Ctx, data: Any) -> tuple[dict[str, Any], bool]:
        rdef = ctx.rdef
        if not isinstance(data, dict):
            raise errors.bad_request('the applied configuration must be an object')
        if 'fieldManager' not in ctx.params:
            raise errors.bad_request('PATCH, application/apply-patch+yaml requires fieldManager to be set')
        if not data.get('apiVersion') or not data.get('kind'):
            raise errors.bad_request('apiVersion and kind must be set in the applied configuration')
        self._check_type(ctx, data)
        force = ctx.params.get('force') in ('true', '1')
        lists = self._lists(rdef)
        statusful = rdef.has_status
        sub = ctx.sub or ''
        meta = data.get('metadata') if isinstance(data.get('metadata'), dict) else {}
        if meta.get('name') and meta['name'] != ctx.name:
            raise errors.bad_request(f'the name of the object ({meta["name"]}) does not match the name on the URL '
                                     f'({ctx.name})')

        def conflict(message: str) -> ApiError:
            return ApiError(409, 'Conflict', message, {'name': ctx.name, 'group': rdef.group, 'kind': rdef.plural})

        existing = self.store.get(rdef.gp, ctx.namespace, ctx.name or '')
        if existing is None:
            if ctx.sub:
                raise errors.not_found(rdef.group, rdef.plural, ctx.name or '')
            managed = applying.Managed([])
            base = applying.apply({}, data, managed, ctx.manager, force, lists, statusful=statusful,
                                  subresource='', conflict=conflict)
            base.setdefault('metadata', {})['name'] = ctx.name
            for key in ('generateName', 'uid', 'resourceVersion'):
                base['metadata'].pop(key, None)
            ctx_create = dataclasses.replace(ctx, name=None)
            try:
                return await self._create(ctx_create, base, managed=managed), True
            finally:
                ctx.warnings[:] = ctx_create.warnings

        def compute(old: dict[str, Any], managed: applying.Managed) -> dict[str, Any]:
            result = applying.apply(old, data, managed, ctx.manager, force, lists, statusful=statusful,
                                    subresource=sub, conflict=conflict)
            rv = meta.get('resourceVersion')
            result['metadata']['resourceVersion'] = rv if rv else old['metadata'].get('resourceVersion')
            return result

        return await self._update(ctx, compute, applied=True), False

    async def _update(self, ctx: Ctx, compute: Callable[[dict[str, Any], applying.Managed], dict[str, Any]],
                      *, applied: bool = False) -> dict[str, Any]:
        rdef = ctx.rdef
        for _attempt in range(16):
            old = self._get_or_404(ctx)
            managed = applying.Managed(old['metadata'].get('managedFields'))
            new = compute(old, managed)
            if not isinstance(new, dict):
                raise errors.bad_request('the resulting object must be a JSON object')
            new = self._prepare_update(ctx, old, new)
            admitted = await self._admit(ctx, 'UPDATE', new, old)
            assert admitted is not None
            new = self._prepare_update(ctx, old, admitted, after_admission=True)
            if not applied:
                applying.track_update(managed, old, new, ctx.manager, ctx.sub or '', self._lists(rdef),
                                      rdef.has_status)
            new['metadata']['managedFields'] = managed.serialize(rdef.api_version)
            current = self.store.get(rdef.gp, ctx.namespace, ctx.name or '')
            if current is None:
                raise errors.not_found(rdef.group, rdef.plural, ctx.name or '')
            if current['metadata']['resourceVersion'] != old['metadata']['resourceVersion']:
                continue   # changed while in admission: recompute on the fresh object (as GuaranteedUpdate)
            return self._commit_update(ctx, old, new)
        raise errors.conflict(rdef.group, rdef.plural, ctx.name or '')

    def _prepare_update(self, ctx: Ctx, old: dict[str, Any], new: dict[str, Any], *,
                        after_admission: bool = False) -> dict[str, Any]:
        rdef = ctx.rdef
        name = ctx.name or ''
        if not after_admission:
            self._check_type(ctx, new)
            if rdef.gp in RBAC_KINDS:
                self._prevent_escalation(ctx, new)
        new['apiVersion'] = old['apiVersion']   # the storage version
        new['kind'] = rdef.kind
        meta = new.get('metadata')
        if meta is not None and not isinstance(meta, dict):
            raise errors.bad_request(f'{rdef.kind} in version "{rdef.version}" cannot be handled as a {rdef.kind}: '
                                     'metadata must be an object')
        if not isinstance(meta, dict):
            meta = new['metadata'] = {}
        old_meta = old['metadata']
        if not after_admission:
            if meta.get('name') not in (None, '', name):
                raise errors.bad_request(f'the name of the object ({meta["name"]}) does not match the name on the '
                                         f'URL ({name})')
            if rdef.namespaced and meta.get('namespace') not in (None, '', ctx.namespace):
                raise errors.bad_request('the namespace of the provided object does not match the namespace '
                                         'sent on the request')
            rv = meta.get('resourceVersion')
            if rv not in (None, '') and str(rv) != old_meta.get('resourceVersion'):
                raise errors.conflict(rdef.group, rdef.plural, name)
            if meta.get('uid') not in (None, '') and meta['uid'] != old_meta.get('uid'):
                raise errors.conflict(rdef.group, rdef.plural, name,
                                      f'Precondition failed: UID in precondition: {meta["uid"]}, '
                                      f'UID in object meta: {old_meta.get("uid")}')
        meta['name'] = name
        if rdef.namespaced:
            meta['namespace'] = ctx.namespace
        else:
            meta.pop('namespace', None)
        for key in ('uid', 'creationTimestamp', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'generation',
                    'resourceVersion', 'managedFields'):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)

        if ctx.sub == 'status':
            result = copy.deepcopy(old)
            if 'status' in new:
                result['status'] = new['status']
            else:
                result.pop('status', None)
            new = result
        elif ctx.sub == 'finalize':
            result = copy.deepcopy(old)
            result.setdefault('spec', {})['finalizers'] = list((new.get('spec') or {}).get('finalizers') or [])
            new = result
        elif rdef.has_status:
            if 'status' in old:
                new['status'] = copy.deepcopy(old['status'])
            else:
                new.pop('status', None)
        if rdef.gp == NS_GP and ctx.sub != 'finalize':
            new.setdefault('spec', {})['finalizers'] = copy.deepcopy((old.get('spec') or {}).get('finalizers', []))
        if not rdef.custom and ctx.sub is None:
            builtin.apply_defaults(rdef, new, old, self.allocator)

        if old_meta.get('deletionTimestamp'):
            added = [f for f in new['metadata'].get('finalizers') or [] if f not in (old_meta.get('finalizers') or [])]
            if added:
                raise errors.invalid(rdef.kind, rdef.group, name, [errors.forbidden_field(
                    'metadata.finalizers', f'no new finalizers can be added if the object is being deleted, '
                                           f'found new finalizers []string{{{", ".join(json.dumps(f) for f in added)}}}')])
        return new

    def _commit_update(self, ctx: Ctx, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        rdef = ctx.rdef
        skip = {'metadata', 'status'} if rdef.has_status else {'metadata'}
        if rdef.gp == CRD_GP:
            new['status'] = builtin.crd_status(new, _now())
            old_conditions = (old.get('status') or {}).get('conditions') or []
            for cond, prev in zip(new['status']['conditions'], old_conditions, strict=False):
                cond['lastTransitionTime'] = prev.get('lastTransitionTime', cond['lastTransitionTime'])
        if {k: v for k, v in old.items() if k not in skip} != {k: v for k, v in new.items() if k not in skip}:
            new['metadata']['generation'] = int(old['metadata'].get('generation') or 1) + 1
        if new == old:
            return self._present(rdef, old)   # no-op: no new resourceVersion, no event
        if ctx.dry_run:
            return self._present(rdef, new)
        stored = self.store.put(rdef.gp, new, old)
        self._after_write(rdef, stored, old)
        final = self.store.get(rdef.gp, ctx.namespace, ctx.name or '')
        return self._present(rdef, final if final is not None else stored)

    # -----------------------------------------------------------------------------------------------------------
    # Writing: delete.

    async def _delete(self, ctx: Ctx, options: dict[str, Any]) -> dict[str, Any]:
        rdef = ctx.rdef
        obj = self._get_or_404(ctx)
        policy = self._policy(rdef, options, ctx)
        preconditions = options.get('preconditions') or {}
        meta = obj['metadata']
        if preconditions.get('uid') and preconditions['uid'] != meta.get('uid'):
            raise errors.conflict(rdef.group, rdef.plural, meta['name'],
                                  f'Precondition failed: UID in precondition: {preconditions["uid"]}, '
                                  f'UID in object meta: {meta.get("uid")}')
        if preconditions.get('resourceVersion') and preconditions['resourceVersion'] != meta.get('resourceVersion'):
            raise errors.conflict(rdef.group, rdef.plural, meta['name'],
                                  f'Precondition failed: ResourceVersion in precondition: '
                                  f'{preconditions["resourceVersion"]}, ResourceVersion in object meta: '
                                  f'{meta.get("resourceVersion")}')
        await self._admit(ctx, 'DELETE', None, obj)
        if ctx.dry_run:
            return self._present(rdef, obj)
        current = self.store.get(rdef.gp, ctx.namespace, ctx.name or '')
        if current is None:
            raise errors.not_found(rdef.group, rdef.plural, ctx.name or '')
        return self._present(rdef, self._delete_now(rdef.gp, current, policy))

    def _policy(self, rdef: ResourceDef, options: dict[str, Any], ctx: Ctx) -> str:
        policy = options.get('propagationPolicy')
        if policy is None and options.get('orphanDependents') is not None:
            policy = 'Orphan' if str(options['orphanDependents']).lower() == 'true' else 'Background'
        if policy is None:
            if rdef.gp == ('batch', 'jobs'):
                ctx.warnings.append('child pods are preserved by default when jobs are deleted; set '
                                    'propagationPolicy=Background to remove them or set propagationPolicy=Orphan '
                                    'to suppress this warning')
                policy = 'Orphan'
            else:
                policy = 'Background'
        if policy not in ('Orphan', 'Background', 'Foreground'):
            raise errors.invalid('DeleteOptions', '', '', [errors.unsupported_value(
                'propagationPolicy', policy, ['Foreground', 'Background', 'Orphan', 'nil'])])
        return str(policy)

    async def _delete_collection(self, ctx: Ctx, options: dict[str, Any]) -> dict[str, Any]:
        listed = self._list(dataclasses.replace(ctx, params={k: v for k, v in ctx.params.items()
                                                            if k in ('labelSelector', 'fieldSelector')}))
        deleted = []
        for item in listed['items']:
            item_ctx = dataclasses.replace(ctx, name=item['metadata']['name'],
                                           namespace=item['metadata'].get('namespace'), warnings=ctx.warnings)
            with contextlib.suppress(ApiError):
                deleted.append(await self._delete(item_ctx, dict(options)))
        listed['items'] = deleted
        listed['metadata'] = {'resourceVersion': str(self.store.rv)}
        return listed

    def _delete_now(self, gp: tuple[str, str], obj: dict[str, Any], policy: str) -> dict[str, Any]:
        """Synchronously mark for deletion or remove; then run the controllers (GC, namespaces, CRDs)."""
        meta = obj['metadata']
        if meta.get('deletionTimestamp'):
            return obj
        finalizers = list(meta.get('finalizers') or [])
        if policy == 'Foreground' and 'foregroundDeletion' not in finalizers:
            finalizers.append('foregroundDeletion')
        if policy == 'Orphan' and 'orphan' not in finalizers and self._dependents(meta['uid']):
            finalizers.append('orphan')
        blocking = bool(finalizers) or gp in (NS_GP,)
        if not blocking:
            final = self.store.remove(gp, obj)
            self._after_removal(gp, final)
            return final
        new = copy.deepcopy(obj)
        new['metadata']['deletionTimestamp'] = _now()
        new['metadata']['deletionGracePeriodSeconds'] = 0
        new['metadata']['finalizers'] = finalizers
        new['metadata']['generation'] = int(meta.get('generation') or 1) + 1
        if not finalizers:
            new['metadata'].pop('finalizers')
        if gp == NS_GP:
            new.setdefault('status', {})['phase'] = 'Terminating'
        stored = self.store.put(gp, new, obj)
        self._reconcile()
        current = self.store.get(gp, meta.get('namespace'), meta['name'])
        return current if current is not None and current['metadata']['uid'] == meta['uid'] else stored

    # -----------------------------------------------------------------------------------------------------------
    # Controllers: garbage collection, namespace & CRD cleanup. Synchronous & deterministic.

    def _after_write(self, rdef: ResourceDef, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = obj['metadata']
        if rdef.gp == CRD_GP:
            self._rebuild_crd_defs()
        if rdef.gp == CLUSTER_ROLES_GP:
            self._aggregate_cluster_roles()
        if rdef.gp == NS_GP and old is None:
            self._populate_namespace(meta['name'])
        if meta.get('deletionTimestamp') and not meta.get('finalizers') and rdef.gp != NS_GP:
            final = self.store.remove(rdef.gp, obj)
            self._after_removal(rdef.gp, final)
        elif meta.get('deletionTimestamp'):
            self._reconcile()

    def _after_removal(self, gp: tuple[str, str], final: dict[str, Any]) -> None:
        if gp == CRD_GP:
            self._rebuild_crd_defs()
        if gp == CLUSTER_ROLES_GP:
            self._aggregate_cluster_roles()
        self._reconcile()

    def _dependents(self, uid: str) -> list[tuple[tuple[str, str], dict[str, Any]]]:
        return [(gp, o) for gp, o in self.store.all_objects()
                if any(ref.get('uid') == uid for ref in o['metadata'].get('ownerReferences') or [])]

    def _reconcile(self) -> None:
        for _ in range(10_000):
            if not self._reconcile_once():
                return
        raise RuntimeError('the test cluster controllers do not converge')

    def _reconcile_once(self) -> bool:
        objects = self.store.all_objects()
        for gp, obj in objects:
            meta = obj['metadata']
            if not meta.get('deletionTimestamp'):
                continue
            finalizers = list(meta.get('finalizers') or [])
            if 'orphan' in finalizers:
                for dgp, dep in self._dependents(meta['uid']):
                    new = copy.deepcopy(dep)
                    new['metadata']['ownerReferences'] = [r for r in dep['metadata']['ownerReferences']
                                                          if r.get('uid') != meta['uid']]
                    if not new['metadata']['ownerReferences']:
                        del new['metadata']['ownerReferences']
                    self.store.put(dgp, new, dep)
                return self._drop_finalizer(gp, obj, 'orphan')
            if 'foregroundDeletion' in finalizers:
                dependents = self._dependents(meta['uid'])
                for dgp, dep in dependents:
                    if not dep['metadata'].get('deletionTimestamp'):
                        self._delete_now(dgp, dep, 'Foreground')
                        return True
                blocking = [d for _, d in dependents if any(
                    r.get('uid') == meta['uid'] and r.get('blockOwnerDeletion')
                    for r in d['metadata'].get('ownerReferences') or [])]
                if not blocking:
                    return self._drop_finalizer(gp, obj, 'foregroundDeletion')
            if gp == NS_GP and self._finalize_namespace(obj):
                return True
            if gp == CRD_GP and CRD_CLEANUP in finalizers:
                spec = obj.get('spec') or {}
                cr_gp = (spec.get('group', ''), (spec.get('names') or {}).get('plural', ''))
                instances = self.store.list(cr_gp)
                for instance in instances:
                    if not instance['metadata'].get('deletionTimestamp'):
                        self._delete_now(cr_gp, instance, 'Background')
                        return True
                if not instances:
                    return self._drop_finalizer(gp, obj, CRD_CLEANUP)

        # Garbage collection: dependents whose owners are all gone go away; dangling refs are dropped.
        for gp, obj in objects:
            refs = obj['metadata'].get('ownerReferences') or []
            if not refs or obj['metadata'].get('deletionTimestamp'):
                continue
            alive = [r for r in refs if self.store.by_uid(r.get('uid', '')) is not None]
            if not alive:
                self._delete_now(gp, obj, 'Background')
                return True
            if len(alive) != len(refs):
                new = copy.deepcopy(obj)
                new['metadata']['ownerReferences'] = alive
                self.store.put(gp, new, obj)
                return True
        return False

    def _drop_finalizer(self, gp: tuple[str, str], obj: dict[str, Any], finalizer: str) -> bool:
        new = copy.deepcopy(obj)
        new['metadata']['finalizers'] = [f for f in obj['metadata'].get('finalizers') or [] if f != finalizer]
        if not new['metadata']['finalizers']:
            del new['metadata']['finalizers']
        if new['metadata'].get('finalizers') or gp == NS_GP:
            self.store.put(gp, new, obj)
        else:
            stored = self.store.put(gp, new, obj)
            self.store.remove(gp, stored)
            if gp == CRD_GP:
                self._rebuild_crd_defs()
        return True

    def _finalize_namespace(self, ns: dict[str, Any]) -> bool:
        name = ns['metadata']['name']
        remaining = False
        for gp, obj in self.store.all_objects():
            if obj['metadata'].get('namespace') != name:
                continue
            remaining = True
            if not obj['metadata'].get('deletionTimestamp'):
                self._delete_now(gp, obj, 'Background')
                return True
        if remaining:
            return False
        if (ns.get('spec') or {}).get('finalizers'):
            new = copy.deepcopy(ns)
            new['spec']['finalizers'] = []
            self.store.put(NS_GP, new, ns)
            return True
        if not ns['metadata'].get('finalizers'):
            self.store.remove(NS_GP, ns)
            return True
        return False

    def _aggregate_cluster_roles(self) -> None:
        """The ClusterRole aggregation controller: repeating it changes nothing once the rules are filled in."""
        for _ in range(100):  # aggregated roles may select each other (admin <- edit <- view)
            changed = False
            roles = self.store.list(CLUSTER_ROLES_GP)
            for role in roles:
                if not role.get('aggregationRule'):
                    continue
                rules = rbac.aggregated_rules(role, roles)
                if (role.get('rules') or []) != rules:
                    new = copy.deepcopy(role)
                    new['rules'] = rules
                    self.store.put(CLUSTER_ROLES_GP, new, role)
                    changed = True
                    break
            if not changed:
                return
        raise RuntimeError('ClusterRole aggregation does not converge')

    def _rebuild_crd_defs(self) -> None:
        defs: dict[tuple[str, str, str], ResourceDef] = {}
        for crd in self.store.list(CRD_GP):
            for rdef in builtin.defs_from_crd(crd):
                defs[(rdef.group, rdef.version, rdef.plural)] = rdef
        self._crd_defs = defs

    # -----------------------------------------------------------------------------------------------------------
    # Bootstrap & internal creation (the work of controllers: namespaces' default SA & root CA configmap).

    def _internal_create(self, group: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        rdef = self._any_def(group, plural)
        assert rdef is not None
        obj = copy.deepcopy(obj)
        obj['apiVersion'], obj['kind'] = rdef.api_version, rdef.kind
        meta = obj['metadata']
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
        builtin.apply_defaults(rdef, obj, None, self.allocator)
        existing = self.store.get(rdef.gp, meta.get('namespace'), meta['name'])
        if existing is not None:
            return existing
        stored = self.store.put(rdef.gp, obj, None)
        if rdef.gp == NS_GP:
            self._populate_namespace(meta['name'])
        return stored

    def _populate_namespace(self, namespace: str) -> None:
        self._internal_create('', 'serviceaccounts', {'metadata': {'name': 'default', 'namespace': namespace}})
        self._internal_create('', 'configmaps', {
            'metadata': {'name': 'kube-root-ca.crt', 'namespace': namespace,
                         'annotations': {'kubernetes.io/description': 'Contains a CA bundle that can be used to '
                                         'verify the kube-apiserver when using internal endpoints such as the '
                                         'internal service IP or kubernetes.default.svc. No other usage is '
                                         'guaranteed across distributions of Kubernetes clusters.'}},
            'data': {'ca.crt': ROOT_CA}})

    def _bootstrap(self) -> None:
        for name in ('default', 'kube-system', 'kube-public', 'kube-node-lease'):
            self._internal_create('', 'namespaces', {'metadata': {'name': name}})
        self._internal_create('', 'services', {
            'metadata': {'name': 'kubernetes', 'namespace': 'default',
                         'labels': {'component': 'apiserver', 'provider': 'kubernetes'}},
            'spec': {'clusterIP': '10.96.0.1', 'ports': [{'name': 'https', 'port': 443, 'protocol': 'TCP',
                                                           'targetPort': 6443}]}})
        for role in rbac.BOOTSTRAP_CLUSTER_ROLES:
            self._internal_create(rbac.RBAC_GROUP, 'clusterroles', role)
        for binding in rbac.BOOTSTRAP_CLUSTER_ROLE_BINDINGS:
            self._internal_create(rbac.RBAC_GROUP, 'clusterrolebindings', binding)
        self._aggregate_cluster_roles()

    # -----------------------------------------------------------------------------------------------------------
    # Reviews (SubjectAccessReview, SelfSubjectAccessReview): answered, never stored.

    async def _review(self, ctx: Ctx, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise errors.bad_request('the body of the request must be a JSON object')
        self._check_type(ctx, data)
        sar = copy.deepcopy(data)
        sar['apiVersion'], sar['kind'] = ctx.rdef.api_version, ctx.rdef.kind
        spec = sar.setdefault('spec', {})
        if not spec.get('resourceAttributes') and not spec.get('nonResourceAttributes'):
            raise errors.invalid(ctx.rdef.kind, ctx.rdef.group, '', [errors.invalid_value(
                'spec.resourceAttributes', None, 'exactly one of nonResourceAttributes or resourceAttributes '
                                                 'must be specified')])
        if ctx.rdef.plural == 'selfsubjectaccessreviews':
            request = {'apiVersion': 'authorization.k8s.io/v1', 'kind': 'SubjectAccessReview', 'metadata': {},
                       'spec': dict(spec, user=ctx.user['username'], groups=list(ctx.user.get('groups') or []),
                                    uid=ctx.user.get('uid', ''), extra=ctx.user.get('extra') or {})}
            reviewed = await hooks.review(self, request)
            sar['status'] = reviewed.get('status', {})
            return sar
        if not spec.get('user') and not spec.get('groups'):
            raise errors.invalid(ctx.rdef.kind, ctx.rdef.group, '', [errors.invalid_value(
                'spec.user', None, 'at least one of user or group must be specified')])
        reviewed = await hooks.review(self, sar)
        if self.access_reviews:  # who asked (the review itself names whom it is about)
            self.access_reviews[-1]['requester'] = ctx.user['username']
        sar['status'] = reviewed.get('status', {})
        sar.setdefault('metadata', {})
        return sar


def _status_response(status: dict[str, Any], code: int) -> aiohttp.web.Response:
    # Exactly ``application/json``, as kube-apiserver writes it: client-go's discovery client cannot
    # negotiate a decoder for ``application/json; charset=utf-8`` and would report the error as "unknown".
    return aiohttp.web.Response(body=json.dumps(status).encode(), status=code,
                                headers={'Content-Type': 'application/json'})


class _TlsServer(aiohttp.test_utils.RawTestServer):
    """kmock's server, listening with TLS."""
    ssl_context: ssl.SSLContext | None = None

    async def start_server(self, loop: asyncio.AbstractEventLoop | None = None, **kwargs: Any) -> None:
        await super().start_server(loop=loop, ssl=self.ssl_context, **kwargs)


@contextlib.asynccontextmanager
async def running_cluster(*, port: int | None = None, kubeconfig: str | Path | None = None,
                          host: str = '127.0.0.1', **kwargs: Any) -> AsyncIterator[FaithfulCluster]:
    """Start a FaithfulCluster on ``host:port`` (random port by default) and write a kubeconfig for it."""
    cluster = FaithfulCluster(**kwargs)
    server_cls = type('TlsServer', (_TlsServer,), {'ssl_context': cluster.tls.server_ssl_context()})
    async with cluster, kmock.Server(cluster, host=host, port=port, server_cls=server_cls):
        if kubeconfig is not None:
            cluster.write_kubeconfig(kubeconfig)
        try:
            yield cluster
        finally:
            cluster.closing.set()
            http = getattr(cluster, 'webhook_http', None)
            if http is not None:
                await http.close()
            await asyncio.sleep(0)

"""Authentication for the test API server: bearer tokens, ServiceAccount tokens (TokenRequest) and impersonation.

Identities, as kube-apiserver establishes them:

- static tokens (``--token-auth-file``): ``Tokens.add_user(token, username, groups)``; the cluster's own admin
  token authenticates ``kubernetes-admin`` in ``system:masters`` (the kubeconfig it writes carries it);
- ServiceAccount tokens, issued by ``POST .../serviceaccounts/<name>/token`` (a TokenRequest, what
  ``kubectl create token`` and the kubelet's projected volumes use). They authenticate as
  ``system:serviceaccount:<ns>:<name>`` in ``system:serviceaccounts`` and ``system:serviceaccounts:<ns>``, with
  ``extra["authentication.kubernetes.io/credential-id"]``; a token bound to a Pod (``boundObjectRef``) also
  carries ``extra["authentication.kubernetes.io/pod-name"]`` / ``pod-uid`` and stops working when that Pod
  (same uid) or the ServiceAccount is gone, or when it expires;
- no credentials: ``system:anonymous`` in ``system:unauthenticated``; an unknown token: 401.

Impersonation (``Impersonate-User``, ``Impersonate-Group``, ``Impersonate-Uid``, ``Impersonate-Extra-*``; what
``kubectl --as / --as-group / --as-uid`` send) is checked with the ``impersonate`` verb on ``users``, ``groups``,
``serviceaccounts``, ``uids`` and ``userextras/<key>``, as ``filters/impersonation.go`` does.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import os
import secrets
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from .errors import ApiError
from .rbac import SA_PREFIX, Attributes, Decision, UserInfo, forbidden_status, service_account_user

ADMIN = UserInfo('kubernetes-admin', ('system:masters', 'system:authenticated'))
ANONYMOUS = UserInfo('system:anonymous', ('system:unauthenticated',))
POD_NAME = 'authentication.kubernetes.io/pod-name'
POD_UID = 'authentication.kubernetes.io/pod-uid'
CREDENTIAL_ID = 'authentication.kubernetes.io/credential-id'
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600


def unauthorized() -> ApiError:
    return ApiError(401, 'Unauthorized', 'Unauthorized', None)


def _parse_time(text: str) -> datetime.datetime:
    return datetime.datetime.strptime(text, '%Y-%m-%dT%H:%M:%SZ').replace(tzinfo=datetime.UTC)


@dataclasses.dataclass
class IssuedToken:
    """A ServiceAccount token: valid while its ServiceAccount and bound Pod (same uids) exist, until it expires."""
    namespace: str
    service_account: str
    service_account_uid: str
    expires: datetime.datetime
    pod: str = ''
    pod_uid: str = ''
    jti: str = dataclasses.field(default_factory=lambda: secrets.token_hex(8))

    def user(self) -> UserInfo:
        extra: dict[str, tuple[str, ...]] = {CREDENTIAL_ID: (f'JTI={self.jti}',)}
        if self.pod:
            extra[POD_NAME], extra[POD_UID] = (self.pod,), (self.pod_uid,)
        return UserInfo(service_account_user(self.namespace, self.service_account),
                        ('system:serviceaccounts', f'system:serviceaccounts:{self.namespace}',
                         'system:authenticated'), self.service_account_uid, extra)


Lookup = Callable[[str, str, str], Mapping[str, Any] | None]
"""(plural, namespace, name) -> the stored core/v1 object or None."""


class Tokens:
    """Bearer tokens the server accepts."""

    def __init__(self) -> None:
        self.admin_token = secrets.token_urlsafe(24)
        self.static: dict[str, UserInfo] = {self.admin_token: ADMIN}
        self.issued: dict[str, IssuedToken] = {}

    def add_user(self, username: str, groups: list[str] | tuple[str, ...] = (), *, token: str | None = None,
                 uid: str = '') -> str:
        """A static token for a person (``system:authenticated`` is added, as for every authenticated user)."""
        token = token or secrets.token_urlsafe(24)
        all_groups = tuple(groups) + (() if 'system:authenticated' in groups else ('system:authenticated',))
        self.static[token] = UserInfo(username, all_groups, uid)
        return token

    def load_token_file(self, path: str | os.PathLike[str]) -> None:
        """kube-apiserver's ``--token-auth-file``: CSV lines ``token,user,uid[,"group1,group2"]``."""
        with open(path, newline='') as f:
            for line, row in enumerate(csv.reader(f), 1):
                if not row or row[0].startswith('#'):
                    continue
                if len(row) < 3:
                    raise ValueError(f'{path}:{line}: expected token,user,uid[,"groups"], got {len(row)} fields')
                groups = [g.strip() for g in row[3].split(',') if g.strip()] if len(row) > 3 else []
                self.add_user(row[1], groups, token=row[0], uid=row[2])

    def authenticate(self, authorization: str, lookup: Lookup) -> UserInfo:
        if not authorization:
            return ANONYMOUS
        scheme, _, token = authorization.partition(' ')
        token = token.strip()
        if scheme.lower() != 'bearer' or not token:
            raise unauthorized()
        if token in self.static:
            return self.static[token]
        issued = self.issued.get(token)
        if issued is None or not self._valid(issued, lookup):
            raise unauthorized()
        return issued.user()

    @staticmethod
    def _valid(issued: IssuedToken, lookup: Lookup) -> bool:
        if datetime.datetime.now(datetime.UTC) >= issued.expires:
            return False
        sa = lookup('serviceaccounts', issued.namespace, issued.service_account)
        if sa is None or sa['metadata'].get('uid') != issued.service_account_uid:
            return False
        if issued.pod:
            pod = lookup('pods', issued.namespace, issued.pod)
            if pod is None or pod['metadata'].get('uid') != issued.pod_uid:
                return False
        return True

    def request(self, sa: Mapping[str, Any], body: Mapping[str, Any], lookup: Lookup) -> dict[str, Any]:
        """Answer a TokenRequest for ServiceAccount ``sa`` (stored): the request with ``status.token``."""
        meta = sa['metadata']
        spec = dict(body.get('spec') or {})
        seconds = int(spec.get('expirationSeconds') or DEFAULT_EXPIRATION)
        if seconds < MIN_EXPIRATION:
            raise ApiError(422, 'Invalid', f'TokenRequest.authentication.k8s.io "{meta["name"]}" is invalid: '
                           f'spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration less '
                           f'than {MIN_EXPIRATION} seconds', {'name': meta['name'], 'group': 'authentication.k8s.io',
                                                              'kind': 'TokenRequest'})
        bound = spec.get('boundObjectRef') or None
        pod = pod_uid = ''
        if bound is not None:
            if bound.get('kind') != 'Pod':
                raise ApiError(400, 'BadRequest', f'cannot bind token to object of type {bound.get("kind")}: '
                               'the test cluster binds tokens to Pods only', {})
            found = lookup('pods', meta['namespace'], bound.get('name') or '')
            if found is None or (bound.get('uid') and bound['uid'] != found['metadata']['uid']):
                raise ApiError(404, 'NotFound', f'pods "{bound.get("name")}" not found',
                               {'name': bound.get('name'), 'kind': 'pods'})
            pod, pod_uid = found['metadata']['name'], found['metadata']['uid']
            spec['boundObjectRef'] = {'kind': 'Pod', 'apiVersion': 'v1', 'name': pod, 'uid': pod_uid}
        expires = datetime.datetime.now(datetime.UTC).replace(microsecond=0) + datetime.timedelta(seconds=seconds)
        token = f'sa.{secrets.token_urlsafe(32)}'
        self.issued[token] = IssuedToken(meta['namespace'], meta['name'], meta['uid'], expires, pod, pod_uid)
        spec['expirationSeconds'] = seconds
        spec.setdefault('audiences', ['https://kubernetes.default.svc.cluster.local'])
        return {'kind': 'TokenRequest', 'apiVersion': 'authentication.k8s.io/v1',
                'metadata': {'name': meta['name'], 'namespace': meta['namespace'],
                             'creationTimestamp': expires.strftime('%Y-%m-%dT%H:%M:%SZ')},
                'spec': spec,
                'status': {'token': token, 'expirationTimestamp': expires.strftime('%Y-%m-%dT%H:%M:%SZ')}}


Authorize = Callable[[Attributes], Decision]


def impersonate(user: UserInfo, headers: Mapping[str, str], headers_all: Callable[[str], list[str]],
                authorize: Authorize) -> UserInfo:
    """The identity a request acts as: ``user`` itself, or the one its Impersonate-* headers name when ``user``
    may impersonate each part (403 naming the first part refused)."""
    username = headers.get('Impersonate-User')
    groups = [g for g in headers_all('Impersonate-Group') if g]
    uid = headers.get('Impersonate-Uid')
    extra: dict[str, list[str]] = {}
    for key in headers:
        if key.lower().startswith('impersonate-extra-'):
            name = urllib.parse.unquote(key[len('impersonate-extra-'):]).lower()
            extra[name] = [v for v in headers_all(key) if v]
    if username is None and not groups and uid is None and not extra:
        return user
    if not username:
        raise ApiError(500, 'InternalError', 'Internal error occurred: requested '
                       f'{_describe(groups, uid, extra)} without impersonating a user', {})

    def check(resource: str, name: str, *, group: str = '', namespace: str = '', subresource: str = '') -> None:
        attrs = Attributes(user=user, verb='impersonate', api_group=group, resource=resource,
                           subresource=subresource, namespace=namespace, name=name)
        if not authorize(attrs).allowed:
            status = forbidden_status(attrs)
            raise ApiError(403, 'Forbidden', status['message'], status['details'])

    service_account = username.startswith(SA_PREFIX) and username.count(':') == 3
    if service_account:
        _, _, sa_ns, sa_name = username.split(':')
        check('serviceaccounts', sa_name, namespace=sa_ns)
    else:
        check('users', username)
    for group in groups:
        check('groups', group)
    if service_account and not groups:  # its groups are known: added without a check, as the real filter does
        groups = ['system:serviceaccounts', f'system:serviceaccounts:{sa_ns}']
    if uid:
        check('uids', uid, group='authentication.k8s.io')
    for key, values in extra.items():
        for value in values:
            check('userextras', value, group='authentication.k8s.io', subresource=key)
    if username != ANONYMOUS.username and 'system:authenticated' not in groups:
        groups.append('system:authenticated')
    return UserInfo(username, tuple(groups), uid or '', {k: tuple(v) for k, v in extra.items()})


def _describe(groups: list[str], uid: str | None, extra: dict[str, list[str]]) -> str:
    parts = [f'{{Group {g}}}' for g in groups]
    if uid:
        parts.append(f'{{UID {uid}}}')
    parts += [f'{{UserExtra {k}={v}}}' for k, v in extra.items()]
    return '[' + ' '.join(parts) + ']'

"""RBAC for the test API server: the decision kube-apiserver's RBAC authorizer makes, from stored objects.

Pure functions over Roles, ClusterRoles, RoleBindings and ClusterRoleBindings (plain dicts as stored), after
``plugin/pkg/auth/authorizer/rbac/rbac.go`` and ``pkg/registry/rbac/validation/rule.go``:

- a request is allowed when a rule of a role bound to the user (by name), one of its groups, or its
  ServiceAccount matches: ClusterRoleBindings everywhere, RoleBindings in their namespace only;
- rules match by verb, API group, resource (``resource/subresource``, ``*``, ``*/subresource``) and
  ``resourceNames`` (an empty list means any name; a request without a name, such as create or list, never
  matches a rule with names), or by non-resource URL (exact, ``*`` or a trailing ``*`` prefix);
- nothing denies: no match means "no opinion", which the server turns into 403 Forbidden;
- ``aggregate`` is the ClusterRole aggregation controller: an aggregated ClusterRole's rules are the rules of
  every ClusterRole its ``aggregationRule`` selects.

``BOOTSTRAP`` holds the roles and bindings a real cluster creates at start-up that matter here:
``cluster-admin`` for ``system:masters``, discovery and health for everybody, self-reviews for authenticated
users, and the user-facing ``view`` / ``edit`` / ``admin`` roles aggregated from
``aggregate-to-*`` ClusterRoles (with a representative subset of their built-in rules).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from . import selectors

RBAC_GROUP = 'rbac.authorization.k8s.io'
MASTERS = 'system:masters'
SA_PREFIX = 'system:serviceaccount:'


@dataclasses.dataclass(frozen=True)
class UserInfo:
    """Who made a request, as authentication found it."""
    username: str
    groups: tuple[str, ...] = ()
    uid: str = ''
    extra: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, info: Mapping[str, Any]) -> UserInfo:
        extra = {k: tuple(v) for k, v in (info.get('extra') or {}).items()}
        return cls(str(info.get('username') or ''), tuple(info.get('groups') or ()), str(info.get('uid') or ''),
                   extra)

    def as_dict(self) -> dict[str, Any]:
        """The ``userInfo`` shape of admission reviews and TokenReviews."""
        out: dict[str, Any] = {'username': self.username, 'groups': list(self.groups)}
        if self.uid:
            out['uid'] = self.uid
        if self.extra:
            out['extra'] = {k: list(v) for k, v in self.extra.items()}
        return out


@dataclasses.dataclass(frozen=True)
class Attributes:
    """What a request asks to do (the authorizer's ``Attributes``)."""
    user: UserInfo
    verb: str
    resource_request: bool = True
    api_group: str = ''
    api_version: str = ''
    resource: str = ''
    subresource: str = ''
    namespace: str = ''
    name: str = ''
    path: str = ''


@dataclasses.dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ''


def _matches(values: Iterable[str], wanted: str) -> bool:
    return any(v == '*' or v == wanted for v in values)


def _resource_matches(resources: Iterable[str], resource: str, subresource: str) -> bool:
    combined = f'{resource}/{subresource}' if subresource else resource
    return any(r in ('*', combined) or (subresource and r == f'*/{subresource}') for r in resources)


def _url_matches(urls: Iterable[str], path: str) -> bool:
    return any(url in ('*', path) or (url.endswith('*') and path.startswith(url[:-1])) for url in urls)


def rule_allows(rule: Mapping[str, Any], attrs: Attributes) -> bool:
    """One PolicyRule against one request (``RuleAllows`` in rbac.go)."""
    if not _matches(rule.get('verbs') or (), attrs.verb):
        return False
    if not attrs.resource_request:
        return _url_matches(rule.get('nonResourceURLs') or (), attrs.path)
    names = rule.get('resourceNames') or ()
    return (_matches(rule.get('apiGroups') or (), attrs.api_group)
            and _resource_matches(rule.get('resources') or (), attrs.resource, attrs.subresource)
            and (not names or attrs.name in names))


def service_account_user(namespace: str, name: str) -> str:
    return f'{SA_PREFIX}{namespace}:{name}'


def subject_matches(subject: Mapping[str, Any], user: UserInfo, binding_namespace: str) -> bool:
    """``appliesToUser`` in rule.go: Users by name, Groups by membership, ServiceAccounts by their user name."""
    kind, name = subject.get('kind'), subject.get('name') or ''
    if kind == 'User':
        return user.username == name
    if kind == 'Group':
        return name in user.groups
    if kind == 'ServiceAccount':
        # A RoleBinding's ServiceAccount subject without a namespace means the binding's namespace.
        return user.username == service_account_user(subject.get('namespace') or binding_namespace, name)
    return False


def describe_subject(subject: Mapping[str, Any], binding_namespace: str) -> str:
    if subject.get('kind') == 'ServiceAccount':
        return f'ServiceAccount "{subject.get("namespace") or binding_namespace}/{subject.get("name")}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


@dataclasses.dataclass
class Objects:
    """The RBAC objects of a cluster, as stored (ClusterRoles already aggregated)."""
    roles: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    cluster_roles: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    role_bindings: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    cluster_role_bindings: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def _role_rules(self, ref: Mapping[str, Any], namespace: str) -> list[dict[str, Any]]:
        if ref.get("apiGroup") not in (RBAC_GROUP, None):
            return []
        name = ref.get('name')
        if ref.get('kind') == 'ClusterRole':
            found = [r for r in self.cluster_roles if r['metadata']['name'] == name]
        elif ref.get('kind') == 'Role' and namespace:
            found = [r for r in self.roles if r['metadata']['name'] == name
                     and r['metadata'].get('namespace') == namespace]
        else:
            found = []
        return list(found[0].get('rules') or []) if found else []


def authorize(objects: Objects, attrs: Attributes) -> Decision:
    """Allowed with the reason the real authorizer gives, or no opinion (``allowed: False``, no reason)."""
    user = attrs.user
    bindings = [(b, '') for b in objects.cluster_role_bindings]
    if attrs.namespace:
        bindings += [(b, attrs.namespace) for b in objects.role_bindings
                     if b['metadata'].get('namespace') == attrs.namespace]
    for binding, namespace in bindings:
        subjects = [s for s in binding.get('subjects') or [] if subject_matches(s, user, namespace)]
        if not subjects:
            continue
        ref = binding.get('roleRef') or {}
        if any(rule_allows(rule, attrs) for rule in objects._role_rules(ref, namespace)):
            kind = 'RoleBinding' if namespace else 'ClusterRoleBinding'
            where = f'{binding["metadata"]["name"]}/{namespace}' if namespace else binding['metadata']['name']
            return Decision(True, f'RBAC: allowed by {kind} "{where}" of {ref.get("kind")} "{ref.get("name")}" '
                                  f'to {describe_subject(subjects[0], namespace)}')
    return Decision(False, '')


def forbidden_message(attrs: Attributes) -> str:
    """The reason kube-apiserver's Forbidden response gives (``forbiddenMessage`` in forbidden.go)."""
    who = f'User "{attrs.user.username}"'
    if not attrs.resource_request:
        return f'{who} cannot {attrs.verb} path "{attrs.path}"'
    resource = f'{attrs.resource}/{attrs.subresource}' if attrs.subresource else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else 'at the cluster scope'
    return f'{who} cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" {where}'


def forbidden_status(attrs: Attributes, reason: str = '') -> dict[str, Any]:
    """The 403 ``Status`` body (``apierrors.NewForbidden`` of the request's group/resource and name)."""
    message = forbidden_message(attrs) + (f': {reason}' if reason else '')
    details: dict[str, Any] = {}
    if attrs.resource_request:
        qualified = f'{attrs.resource}.{attrs.api_group}' if attrs.api_group else attrs.resource
        if attrs.name:
            message = f'{qualified} "{attrs.name}" is forbidden: {message}'
            details['name'] = attrs.name
        else:
            message = f'{qualified} is forbidden: {message}'
        if attrs.api_group:
            details['group'] = attrs.api_group
        details['kind'] = attrs.resource
    else:
        message = f'forbidden: {message}'
    return {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Failure', 'message': message,
            'reason': 'Forbidden', 'details': details, 'code': 403}


# ---------------------------------------------------------------------------------------------------------------
# Escalation prevention (``ConfirmNoEscalation`` in rule.go): nobody grants what they do not hold.

def _atoms(rule: Mapping[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """A rule broken into single-verb, single-resource, single-name rules: (description, attribute fields)."""
    atoms = []
    for verb in rule.get('verbs') or ():
        for url in rule.get('nonResourceURLs') or ():
            atoms.append(({'NonResourceURLs': [url], 'Verbs': [verb]},
                          {'verb': verb, 'resource_request': False, 'path': url}))
        for group in rule.get('apiGroups') or ():
            for combined in rule.get('resources') or ():
                resource, _, sub = combined.partition('/')
                for name in rule.get('resourceNames') or ('',):
                    described: dict[str, Any] = {'APIGroups': [group], 'Resources': [combined]}
                    if name:
                        described['ResourceNames'] = [name]
                    described['Verbs'] = [verb]
                    atoms.append((described, {'verb': verb, 'api_group': group, 'resource': resource,
                                              'subresource': sub, 'name': name}))
    return atoms


def _describe_atom(described: Mapping[str, list[str]]) -> str:
    return '{' + ', '.join(f'{k}:[{" ".join(chr(34) + v + chr(34) for v in vs)}]' for k, vs in described.items()) + '}'


def not_held(objects: Objects, user: UserInfo, rules: Iterable[Mapping[str, Any]], namespace: str) -> list[str]:
    """The parts of ``rules`` (granted in ``namespace``, or cluster-wide when empty) that ``user`` does not hold."""
    missing: list[str] = []
    for rule in rules:
        for described, fields in _atoms(rule):
            attrs = Attributes(user=user, namespace=namespace, **fields)
            if not authorize(objects, attrs).allowed and _describe_atom(described) not in missing:
                missing.append(_describe_atom(described))
    return missing


def escalation_message(user: UserInfo, missing: list[str]) -> str:
    groups = ' '.join(f'"{g}"' for g in user.groups)
    return (f'user "{user.username}" (groups=[{groups}]) is attempting to grant RBAC permissions not currently '
            'held:\n' + '\n'.join(missing))


# ---------------------------------------------------------------------------------------------------------------
# The ClusterRole aggregation controller.

def aggregated_rules(role: Mapping[str, Any], cluster_roles: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rules an aggregated ClusterRole gets: those of every selected ClusterRole (by name), deduplicated."""
    selectors_ = (role.get('aggregationRule') or {}).get('clusterRoleSelectors') or []
    name = role['metadata']['name']
    rules: list[dict[str, Any]] = []
    for other in sorted(cluster_roles, key=lambda r: r['metadata']['name']):
        if other['metadata']['name'] == name:
            continue
        labels = other['metadata'].get('labels') or {}
        if not any(selectors.match_label_selector_object(s, labels) for s in selectors_):
            continue
        for rule in other.get('rules') or []:
            if rule not in rules:
                rules.append(dict(rule))
    return rules


# ---------------------------------------------------------------------------------------------------------------
# Bootstrap policy: what a real cluster creates at start-up (a subset of the built-in rules).

def _cr(name: str, rules: list[dict[str, Any]], labels: dict[str, str] | None = None,
        aggregate_from: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {'name': name, 'labels': {'kubernetes.io/bootstrapping': 'rbac-defaults', **(labels or {})},
                            'annotations': {'rbac.authorization.kubernetes.io/autoupdate': 'true'}}
    role: dict[str, Any] = {'metadata': meta, 'rules': rules}
    if aggregate_from:
        role['aggregationRule'] = {'clusterRoleSelectors': [
            {'matchLabels': {f'rbac.authorization.k8s.io/{label}': 'true'}} for label in aggregate_from]}
    return role


def _crb(name: str, role: str, groups: list[str]) -> dict[str, Any]:
    return {'metadata': {'name': name, 'labels': {'kubernetes.io/bootstrapping': 'rbac-defaults'},
                         'annotations': {'rbac.authorization.kubernetes.io/autoupdate': 'true'}},
            'roleRef': {'apiGroup': RBAC_GROUP, 'kind': 'ClusterRole', 'name': role},
            'subjects': [{'apiGroup': RBAC_GROUP, 'kind': 'Group', 'name': g} for g in groups]}


_READ = ['get', 'list', 'watch']
_WRITE = ['create', 'delete', 'deletecollection', 'patch', 'update']

BOOTSTRAP_CLUSTER_ROLES: list[dict[str, Any]] = [
    _cr('cluster-admin', [{'apiGroups': ['*'], 'resources': ['*'], 'verbs': ['*']},
                          {'nonResourceURLs': ['*'], 'verbs': ['*']}]),
    _cr('system:discovery', [{'nonResourceURLs': ['/api', '/api/*', '/apis', '/apis/*', '/healthz', '/livez',
                                                  '/openapi', '/openapi/*', '/readyz', '/version', '/version/'],
                              'verbs': ['get']}]),
    _cr('system:public-info-viewer', [{'nonResourceURLs': ['/healthz', '/livez', '/readyz', '/version',
                                                           '/version/'], 'verbs': ['get']}]),
    _cr('system:basic-user', [
        {'apiGroups': ['authorization.k8s.io'], 'resources': ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'],
         'verbs': ['create']},
        {'apiGroups': ['authentication.k8s.io'], 'resources': ['selfsubjectreviews'], 'verbs': ['create']}]),
    _cr('admin', [], aggregate_from=['aggregate-to-admin']),
    _cr('edit', [], {'rbac.authorization.k8s.io/aggregate-to-admin': 'true'}, aggregate_from=['aggregate-to-edit']),
    _cr('view', [], {'rbac.authorization.k8s.io/aggregate-to-edit': 'true'}, aggregate_from=['aggregate-to-view']),
    _cr('system:aggregate-to-admin', [
        {'apiGroups': [''], 'resources': ['namespaces'], 'verbs': _READ},
        {'apiGroups': [RBAC_GROUP], 'resources': ['roles', 'rolebindings'], 'verbs': _READ + _WRITE},
        {'apiGroups': ['authorization.k8s.io'], 'resources': ['localsubjectaccessreviews'], 'verbs': ['create']}],
        {'rbac.authorization.k8s.io/aggregate-to-admin': 'true'}),
    _cr('system:aggregate-to-edit', [
        {'apiGroups': [''], 'resources': ['pods', 'pods/attach', 'pods/exec', 'pods/portforward', 'pods/proxy'],
         'verbs': _WRITE},
        {'apiGroups': [''], 'resources': ['configmaps', 'endpoints', 'persistentvolumeclaims', 'secrets',
                                          'serviceaccounts', 'services'], 'verbs': _WRITE},
        {'apiGroups': [''], 'resources': ['serviceaccounts'], 'verbs': ['impersonate']},
        # As kube-apiserver's bootstrap policy: edit reads Secrets (view deliberately does not).
        {'apiGroups': [''], 'resources': ['secrets'], 'verbs': _READ},
        {'apiGroups': ['apps'], 'resources': ['daemonsets', 'deployments', 'replicasets', 'statefulsets'],
         'verbs': _WRITE},
        {'apiGroups': ['batch'], 'resources': ['cronjobs', 'jobs'], 'verbs': _WRITE},
        {'apiGroups': ['coordination.k8s.io'], 'resources': ['leases'], 'verbs': _READ + _WRITE}],
        {'rbac.authorization.k8s.io/aggregate-to-edit': 'true'}),
    _cr('system:aggregate-to-view', [
        {'apiGroups': [''], 'resources': ['configmaps', 'endpoints', 'persistentvolumeclaims', 'pods', 'pods/log',
                                          'pods/status', 'services', 'services/status', 'serviceaccounts',
                                          'events', 'namespaces', 'namespaces/status'], 'verbs': _READ},
        {'apiGroups': ['apps'], 'resources': ['daemonsets', 'deployments', 'replicasets', 'statefulsets'],
         'verbs': _READ},
        {'apiGroups': ['batch'], 'resources': ['cronjobs', 'jobs', 'jobs/status'], 'verbs': _READ},
        {'apiGroups': ['events.k8s.io'], 'resources': ['events'], 'verbs': _READ}],
        {'rbac.authorization.k8s.io/aggregate-to-view': 'true'}),
]

BOOTSTRAP_CLUSTER_ROLE_BINDINGS: list[dict[str, Any]] = [
    _crb('cluster-admin', 'cluster-admin', [MASTERS]),
    _crb('system:discovery', 'system:discovery', ['system:authenticated']),
    _crb('system:public-info-viewer', 'system:public-info-viewer',
         ['system:authenticated', 'system:unauthenticated']),
    _crb('system:basic-user', 'system:basic-user', ['system:authenticated']),
]

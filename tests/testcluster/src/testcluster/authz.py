"""SubjectAccessReview answers for the test API server: the same RBAC evaluation as every request.

``review`` reads the subject (``spec.user``, ``groups``, ``uid``, ``extra``; for a SelfSubjectAccessReview the
requester) and the attributes (``resourceAttributes`` or ``nonResourceAttributes``), asks the cluster's
authorizer (``system:masters``, then RBAC from the stored Roles, ClusterRoles and bindings) and answers
``status.allowed`` with the real authorizer's reason. Nothing denies explicitly (RBAC has no deny rules), so
``status.denied`` is never set. Every review is appended to ``cluster.access_reviews``, so tests can assert what
the product asked.

Tests grant permissions the way a cluster administrator does: with RBAC objects (``kubectl create rolebinding``,
or the manifests from ``testcluster.rbac``).
"""

from __future__ import annotations

import copy
from typing import Any

from .rbac import Attributes, UserInfo
from .schema import FieldError

__all__ = ['attributes', 'review']


def _invalid(message: str, field: str) -> FieldError:
    return FieldError(
        f'SubjectAccessReview.authorization.k8s.io "" is invalid: {field}: Invalid value: "null": {message}',
        causes=[{'reason': 'FieldValueInvalid', 'message': f'Invalid value: "null": {message}', 'field': field}],
        kind='SubjectAccessReview', group='authorization.k8s.io')


def attributes(spec: dict[str, Any], user: UserInfo) -> Attributes:
    """The request a review asks about (raises `FieldError` unless exactly one kind of attributes is given)."""
    resource = spec.get('resourceAttributes')
    non_resource = spec.get('nonResourceAttributes')
    if bool(resource) == bool(non_resource):
        raise _invalid('exactly one of nonResourceAttributes or resourceAttributes must be specified',
                       'spec.resourceAttributes')
    if non_resource:
        return Attributes(user=user, verb=non_resource.get('verb') or '', resource_request=False,
                          path=non_resource.get('path') or '')
    return Attributes(user=user, verb=resource.get('verb') or '', api_group=resource.get('group') or '',
                      api_version=resource.get('version') or '', resource=resource.get('resource') or '',
                      subresource=resource.get('subresource') or '', namespace=resource.get('namespace') or '',
                      name=resource.get('name') or '')


async def review(cluster: Any, sar: dict[str, Any], *, user_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Answer a SubjectAccessReview (or, with ``user_info``, a SelfSubjectAccessReview for that requester).

    Returns a copy of ``sar`` with ``status: {allowed, reason}``. A LocalSubjectAccessReview takes its namespace
    from ``metadata.namespace``.
    """
    result = copy.deepcopy(sar)
    spec = result.setdefault('spec', {})
    kind = result.get('kind') or 'SubjectAccessReview'
    if kind == 'SelfSubjectAccessReview' or user_info is not None:
        user = UserInfo.of(user_info or {})
    else:
        user = UserInfo.of({'username': spec.get('user'), 'groups': spec.get('groups'), 'uid': spec.get('uid'),
                            'extra': spec.get('extra')})
    if kind == 'LocalSubjectAccessReview' and spec.get('resourceAttributes') is not None:
        spec['resourceAttributes'].setdefault('namespace', (result.get('metadata') or {}).get('namespace', ''))
    attrs = attributes(spec, user)
    decision = cluster.authorize(attrs)
    entry = {'kind': kind, 'user': user.username, 'groups': list(user.groups),
             'extra': {k: list(v) for k, v in user.extra.items()}, 'verb': attrs.verb}
    if attrs.resource_request:
        entry.update(group=attrs.api_group, resource=attrs.resource, subresource=attrs.subresource,
                     namespace=attrs.namespace, name=attrs.name)
    else:
        entry['path'] = attrs.path
    entry.update(allowed=decision.allowed, reason=decision.reason)
    cluster.access_reviews.append(entry)
    status: dict[str, Any] = {'allowed': decision.allowed}
    if decision.reason:
        status['reason'] = decision.reason
    result['status'] = status
    return result

"""Legacy (non-aggregated) discovery documents: /api, /api/v1, /apis, /apis/<g>, /apis/<g>/<v>.

Aggregated discovery (``as=APIGroupDiscoveryList``) is not served: clients get ``application/json`` legacy
documents and fall back to them, as against an older API server.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable
from typing import Any

from .builtin import BUILTIN_GROUP_ORDER, ResourceDef

_VERSION_RE = re.compile(r'^v(\d+)(?:(alpha|beta)(\d+))?$')


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key as kube-aggregator orders versions: GA > beta > alpha > others; higher numbers first."""
    m = _VERSION_RE.match(version)
    if not m:
        return (3, 0, 0, version)
    major, stage, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    rank = {None: 0, 'beta': 1, 'alpha': 2}[stage]
    return (rank, -major, -minor, version)


def _hash(rdef: ResourceDef) -> str:
    digest = hashlib.sha256(f'{rdef.group}/{rdef.version}/{rdef.kind}'.encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _entries(rdef: ResourceDef) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        'name': rdef.plural,
        'singularName': rdef.singular_name,
        'namespaced': rdef.namespaced,
        'kind': rdef.kind,
        'verbs': list(rdef.verbs),
    }
    if rdef.short_names:
        main['shortNames'] = list(rdef.short_names)
    if rdef.categories:
        main['categories'] = list(rdef.categories)
    if rdef.stored:
        main['storageVersionHash'] = _hash(rdef)
    result = [main]
    for sub in rdef.subresources:
        verbs = {'status': ['get', 'patch', 'update'], 'log': ['get'], 'finalize': ['update'],
                 'scale': ['get', 'patch', 'update'], 'token': ['create']}.get(sub, ['get'])
        entry: dict[str, Any] = {'name': f'{rdef.plural}/{sub}', 'singularName': '', 'namespaced': rdef.namespaced,
                                 'kind': rdef.kind, 'verbs': verbs}
        if sub == 'scale':
            entry.update(group='autoscaling', version='v1', kind='Scale')
        if sub == 'token':
            entry.update(group='authentication.k8s.io', version='v1', kind='TokenRequest')
        result.append(entry)
    return result


def resource_list(group: str, version: str, defs: Iterable[ResourceDef]) -> dict[str, Any]:
    gv = f'{group}/{version}' if group else version
    resources = [e for d in sorted(defs, key=lambda d: d.plural) if d.group == group and d.version == version
                 for e in _entries(d)]
    return {'kind': 'APIResourceList', 'apiVersion': 'v1', 'groupVersion': gv, 'resources': resources}


def _groups(defs: Iterable[ResourceDef]) -> dict[str, list[str]]:
    groups: dict[str, set[str]] = {}
    for d in defs:
        groups.setdefault(d.group, set()).add(d.version)
    ordered = sorted(groups, key=lambda g: (BUILTIN_GROUP_ORDER.index(g) if g in BUILTIN_GROUP_ORDER
                                             else len(BUILTIN_GROUP_ORDER), g))
    return {g: sorted(groups[g], key=version_priority) for g in ordered}


def group_doc(group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{'groupVersion': f'{group}/{v}', 'version': v} for v in versions]
    return {'kind': 'APIGroup', 'apiVersion': 'v1', 'name': group, 'versions': entries,
            'preferredVersion': entries[0]}


def group_list(defs: Iterable[ResourceDef]) -> dict[str, Any]:
    groups = []
    for group, versions in _groups(defs).items():
        if group:
            doc = group_doc(group, versions)
            del doc['kind'], doc['apiVersion']
            groups.append(doc)
    return {'kind': 'APIGroupList', 'apiVersion': 'v1', 'groups': groups}


def group(defs: Iterable[ResourceDef], name: str) -> dict[str, Any] | None:
    versions = _groups(defs).get(name)
    return group_doc(name, versions) if versions and name else None


def api_versions(address: str) -> dict[str, Any]:
    return {'kind': 'APIVersions', 'versions': ['v1'],
            'serverAddressByClientCIDRs': [{'clientCIDR': '0.0.0.0/0', 'serverAddress': address}]}


def root_paths(defs: Iterable[ResourceDef]) -> dict[str, Any]:
    paths = {'/api', '/api/v1', '/apis', '/healthz', '/livez', '/readyz', '/version', '/openapi/v2', '/openapi/v3'}
    for d in defs:
        if d.group:
            paths.add(f'/apis/{d.group}')
            paths.add(f'/apis/{d.group}/{d.version}')
    return {'paths': sorted(paths)}


VERSION_INFO = {
    'major': '1',
    'minor': '31',
    'gitVersion': 'v1.31.0',
    'gitCommit': '9edcffcde5595e8a5b1a35f88c421764e575afce',
    'gitTreeState': 'clean',
    'buildDate': '2024-08-13T07:28:49Z',
    'goVersion': 'go1.22.5',
    'compiler': 'gc',
    'platform': 'linux/amd64',
}

"""Server-side printing (``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``) as ``kubectl get`` requests it.

Custom resources get their CRD's ``additionalPrinterColumns``; a few built-in kinds get their usual columns;
everything else Name + Age. Age cells are timestamps with the ``date`` type (kubectl renders them as ages).
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from .builtin import ResourceDef

Column = tuple[str, str, str]    # name, type, json path (or a special '@...' computation)

_NAME: Column = ('Name', 'string', '.metadata.name')
_AGE: Column = ('Age', 'date', '.metadata.creationTimestamp')

_BUILTIN_COLUMNS: dict[tuple[str, str], list[Column]] = {
    ('', 'namespaces'): [_NAME, ('Status', 'string', '.status.phase'), _AGE],
    ('', 'pods'): [_NAME, ('Ready', 'string', '@ready'), ('Status', 'string', '.status.phase'),
                   ('Restarts', 'string', '@restarts'), _AGE],
    ('', 'services'): [_NAME, ('Type', 'string', '.spec.type'), ('Cluster-IP', 'string', '.spec.clusterIP'),
                       ('External-IP', 'string', '@none'), ('Port(s)', 'string', '@ports'), _AGE],
    ('', 'configmaps'): [_NAME, ('Data', 'integer', '@data'), _AGE],
    ('', 'secrets'): [_NAME, ('Type', 'string', '.type'), ('Data', 'integer', '@data'), _AGE],
    ('apps', 'deployments'): [_NAME, ('Ready', 'string', '@deploy-ready'),
                              ('Up-to-date', 'integer', '.status.updatedReplicas'),
                              ('Available', 'integer', '.status.availableReplicas'), _AGE],
    ('batch', 'jobs'): [_NAME, ('Status', 'string', '@job-status'), ('Completions', 'string', '@completions'), _AGE],
    ('apiextensions.k8s.io', 'customresourcedefinitions'): [_NAME, ('Created At', 'date',
                                                                    '.metadata.creationTimestamp')],
}


def jsonpath(obj: Any, path: str) -> Any:
    """A small subset of kubectl JSONPath: ``.a.b``, ``[0]``, ``[?(@.type=="Ready")]``."""
    node = obj
    for token in re.findall(r'\.([^.\[]+)|\[(\d+)\]|\[\?\(@\.([^=]+)==["\']([^"\']*)["\']\)\]', path):
        field, index, key, value = token
        if field:
            node = node.get(field) if isinstance(node, dict) else None
        elif index:
            node = node[int(index)] if isinstance(node, list) and int(index) < len(node) else None
        else:
            node = next((i for i in node if isinstance(i, dict) and str(i.get(key)) == value), None) \
                if isinstance(node, list) else None
        if node is None:
            return None
    return node


def human_duration(seconds: float) -> str:
    """As k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    if seconds < -1:
        return '<invalid>'
    s = max(int(seconds), 0)
    m, h, d = s // 60, s // 3600, s // 86400
    if s < 120:
        return f'{s}s'
    if m < 10:
        return f'{m}m{s % 60}s' if s % 60 else f'{m}m'
    if m < 180:
        return f'{m}m'
    if h < 8:
        return f'{h}h{m % 60}m' if m % 60 else f'{h}h'
    if h < 48:
        return f'{h}h'
    if h < 24 * 8:
        return f'{d}d{h % 24}h' if h % 24 else f'{d}d'
    if h < 24 * 365 * 2:
        return f'{d}d'
    y = d // 365
    if y < 8:
        return f'{y}y{d % 365}d' if d % 365 else f'{y}y'
    return f'{y}y'


def _age(value: Any) -> str:
    try:
        then = datetime.datetime.strptime(str(value), '%Y-%m-%dT%H:%M:%SZ').replace(tzinfo=datetime.UTC)
    except ValueError:
        return '<unknown>'
    return human_duration((datetime.datetime.now(datetime.UTC) - then).total_seconds())


def _special(obj: dict[str, Any], what: str) -> Any:
    spec, status = obj.get('spec') or {}, obj.get('status') or {}
    if what == '@ready':
        statuses = status.get('containerStatuses') or []
        return f'{sum(1 for s in statuses if s.get("ready"))}/{len(spec.get("containers") or [])}'
    if what == '@restarts':
        return str(sum(int(s.get('restartCount') or 0) for s in status.get('containerStatuses') or []))
    if what == '@none':
        return '<none>'
    if what == '@ports':
        ports = [f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get('ports') or []]
        return ','.join(ports) or '<none>'
    if what == '@data':
        return len(obj.get('data') or {}) + len(obj.get('binaryData') or {})
    if what == '@deploy-ready':
        return f'{status.get("readyReplicas") or 0}/{spec.get("replicas", 1)}'
    if what == '@completions':
        return f'{status.get("succeeded") or 0}/{spec.get("completions", 1)}'
    if what == '@job-status':
        for cond in status.get('conditions') or []:
            if cond.get('status') == 'True' and cond.get('type') in ('Complete', 'Failed', 'Suspended'):
                return cond['type']
        return 'Running'
    return None


def columns(rdef: ResourceDef, crd_version: dict[str, Any] | None) -> list[Column]:
    if rdef.custom:
        extra = [(c.get('name', ''), c.get('type', 'string'), c.get('jsonPath', ''))
                 for c in (crd_version or {}).get('additionalPrinterColumns') or []]
        if not any(c[2] == '.metadata.creationTimestamp' for c in extra):
            extra.append(_AGE)
        return [_NAME] + extra
    return _BUILTIN_COLUMNS.get(rdef.gp, [_NAME, _AGE])


def wants_table(accept: str) -> bool:
    return 'as=Table' in accept and 'g=meta.k8s.io' in accept


def table(rdef: ResourceDef, crd_version: dict[str, Any] | None, objects: list[dict[str, Any]],
          metadata: dict[str, Any], include: str) -> dict[str, Any]:
    cols = columns(rdef, crd_version)
    rows = []
    for obj in objects:
        cells = [_special(obj, path) if path.startswith('@') else jsonpath(obj, path) for _, _, path in cols]
        cells = [_age(cell) if type_ == 'date' and cell is not None else cell
                 for cell, (_, type_, _) in zip(cells, cols, strict=True)]
        row: dict[str, Any] = {'cells': cells}
        if include == 'Object':
            row['object'] = obj
        elif include != 'None':
            row['object'] = {'kind': 'PartialObjectMetadata', 'apiVersion': 'meta.k8s.io/v1',
                             'metadata': obj.get('metadata', {})}
        rows.append(row)
    return {
        'kind': 'Table', 'apiVersion': 'meta.k8s.io/v1', 'metadata': metadata,
        'columnDefinitions': [{'name': name, 'type': type_, 'format': 'name' if name == 'Name' else '',
                               'description': name, 'priority': 0} for name, type_, _ in cols],
        'rows': rows,
    }

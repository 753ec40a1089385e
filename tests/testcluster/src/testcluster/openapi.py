"""OpenAPI documents: /openapi/v3 (root + one document per group/version) and a minimal /openapi/v2.

Custom resources get their CRD's ``openAPIV3Schema`` (with descriptions, so ``kubectl explain`` works); built-in
kinds get a minimal schema (apiVersion/kind/metadata/spec/status). Every PATCH operation declares the
``fieldValidation`` query parameter, so kubectl and helm use server-side field validation.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from .builtin import ResourceDef

OBJECT_META = 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta'

_PKG = {
    '': 'io.k8s.api.core', 'apps': 'io.k8s.api.apps', 'batch': 'io.k8s.api.batch',
    'coordination.k8s.io': 'io.k8s.api.coordination', 'events.k8s.io': 'io.k8s.api.events',
    'rbac.authorization.k8s.io': 'io.k8s.api.rbac', 'admissionregistration.k8s.io': 'io.k8s.api.admissionregistration',
    'apiextensions.k8s.io': 'io.k8s.apiextensions-apiserver.pkg.apis.apiextensions', 'policy': 'io.k8s.api.policy',
    'networking.k8s.io': 'io.k8s.api.networking', 'authorization.k8s.io': 'io.k8s.api.authorization',
}

_OBJECT_META_SCHEMA: dict[str, Any] = {
    'description': 'ObjectMeta is metadata that all persisted resources must have, which includes all objects '
                   'users must create.',
    'type': 'object',
    'properties': {
        'name': {'type': 'string', 'description': 'Name must be unique within a namespace.'},
        'generateName': {'type': 'string', 'description': 'GenerateName is an optional prefix, used by the '
                                                          'server, to generate a unique name.'},
        'namespace': {'type': 'string', 'description': 'Namespace defines the space within which each name '
                                                       'must be unique.'},
        'uid': {'type': 'string', 'description': 'UID is the unique in time and space value for this object.'},
        'resourceVersion': {'type': 'string', 'description': 'An opaque value that represents the internal '
                                                             'version of this object.'},
        'generation': {'type': 'integer', 'format': 'int64',
                       'description': 'A sequence number representing a specific generation of the desired '
                                      'state.'},
        'creationTimestamp': {'type': 'string', 'format': 'date-time',
                              'description': 'CreationTimestamp is a timestamp representing the server time '
                                             'when this object was created.'},
        'deletionTimestamp': {'type': 'string', 'format': 'date-time',
                              'description': 'DeletionTimestamp is RFC 3339 date and time at which this '
                                             'resource will be deleted.'},
        'labels': {'type': 'object', 'additionalProperties': {'type': 'string', 'default': ''},
                   'description': 'Map of string keys and values that can be used to organize and categorize '
                                  'objects.'},
        'annotations': {'type': 'object', 'additionalProperties': {'type': 'string', 'default': ''},
                        'description': 'Annotations is an unstructured key value map stored with a resource.'},
        'finalizers': {'type': 'array', 'items': {'type': 'string', 'default': ''},
                       'x-kubernetes-list-type': 'set',
                       'description': 'Must be empty before the object is deleted from the registry.'},
        'ownerReferences': {'type': 'array', 'items': {'type': 'object', 'x-kubernetes-map-type': 'atomic'},
                            'x-kubernetes-patch-merge-key': 'uid', 'x-kubernetes-patch-strategy': 'merge',
                            'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['uid'],
                            'description': 'List of objects depended by this object.'},
        'managedFields': {'type': 'array', 'items': {'type': 'object'},
                          'description': 'ManagedFields maps workflow-id and version to the set of fields '
                                         'that are managed by that workflow.'},
    },
}


@functools.cache
def builtin_definitions() -> dict[str, Any]:
    """The real v1.31 definitions (JSON-schema flavoured) as shipped by the ``kubernetes-validate`` package."""
    try:
        import kubernetes_validate
    except ImportError:
        return {}
    path = Path(kubernetes_validate.__file__).parent / 'kubernetes-json-schema' / 'v1.31.0-local' / '_definitions.json'
    if not path.exists():
        return {}
    defs: dict[str, Any] = json.loads(path.read_text())['$defs']
    return defs


@functools.cache
def _gvk_index() -> dict[tuple[str, str, str], str]:
    index = {}
    for name, schema in builtin_definitions().items():
        for gvk in schema.get('x-kubernetes-group-version-kind') or []:
            index.setdefault((gvk.get('group', ''), gvk.get('version', ''), gvk.get('kind', '')), name)
    return index


def builtin_name(rdef: ResourceDef) -> str | None:
    if rdef.custom:
        return None
    return _gvk_index().get((rdef.group, rdef.version, rdef.kind))


def resolve(node: Any) -> Any:
    defs = builtin_definitions()
    while isinstance(node, dict) and isinstance(node.get('$ref'), str):
        node = defs.get(node['$ref'].split('/')[-1])
    return node


def builtin_schema_at(rdef: ResourceDef, path: tuple[str, ...]) -> dict[str, Any] | None:
    """The (unresolved) schema of a field of a built-in kind, by field names (list items add no names)."""
    name = builtin_name(rdef)
    node: Any = builtin_definitions().get(name) if name else None
    for part in path:
        node = resolve(node)
        while isinstance(node, dict) and 'items' in node:
            node = resolve(node['items'])
        if not isinstance(node, dict):
            return None
        props = node.get('properties') or {}
        if part in props:
            node = props[part]
        elif isinstance(node.get('additionalProperties'), dict):
            node = node['additionalProperties']
        else:
            return None
    return node if isinstance(node, dict) else None


def _refs(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get('$ref')
        if isinstance(ref, str):
            out.add(ref.split('/')[-1])
        for value in node.values():
            _refs(value, out)
    elif isinstance(node, list):
        for value in node:
            _refs(value, out)


def closure(names: set[str]) -> set[str]:
    defs = builtin_definitions()
    seen: set[str] = set()
    todo = [n for n in names if n in defs]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        found: set[str] = set()
        _refs(defs[name], found)
        todo.extend(n for n in found if n in defs and n not in seen)
    return seen


def convert(node: Any, prefix: str) -> Any:
    """JSON-schema flavoured definitions -> OpenAPI: refs re-pointed (wrapped in allOf), nullable types flattened."""
    if isinstance(node, list):
        return [convert(x, prefix) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ('$schema', '$id', '$ref'):
            continue
        if key == 'type' and isinstance(value, list):
            types = [t for t in value if t != 'null']
            out['type'] = types[0] if types else 'string'
            continue
        out[key] = convert(value, prefix)
    one_of = out.get('oneOf')
    if isinstance(one_of, list) and all(isinstance(o, dict) and set(o) <= {'type', 'format'} for o in one_of):
        types = [o.get('type') for o in out.pop('oneOf')]
        out['type'] = 'string'
        if 'integer' in types:
            out['format'] = 'int-or-string'
            out['x-kubernetes-int-or-string'] = True
    ref = node.get('$ref')
    if isinstance(ref, str):
        target = prefix + ref.split('/')[-1]
        if not out:
            return {'$ref': target}
        return {'allOf': [{'$ref': target}], **out}
    return out


def schema_name(rdef: ResourceDef) -> str:
    if rdef.custom:
        reversed_group = '.'.join(reversed(rdef.group.split('.')))
        return f'{reversed_group}.{rdef.version}.{rdef.kind}'
    return f'{_PKG.get(rdef.group, "io.k8s.api." + rdef.group.split(".")[0])}.{rdef.version}.{rdef.kind}'


def _gvk(rdef: ResourceDef) -> dict[str, str]:
    return {'group': rdef.group, 'version': rdef.version, 'kind': rdef.kind}


def _kind_schema(rdef: ResourceDef, crd_schema: dict[str, Any] | None, ref_prefix: str) -> dict[str, Any]:
    if crd_schema is not None:
        schema = copy.deepcopy(crd_schema)
    else:
        schema = {
            'description': f'{rdef.kind} is a built-in Kubernetes kind (minimal schema served by the test cluster).',
            'type': 'object',
            'properties': {
                'spec': {'type': 'object', 'x-kubernetes-preserve-unknown-fields': True,
                         'description': f'Spec of the {rdef.kind}.'},
                'status': {'type': 'object', 'x-kubernetes-preserve-unknown-fields': True,
                           'description': f'Most recently observed status of the {rdef.kind}.'},
            },
        }
    props = schema.setdefault('properties', {})
    props['apiVersion'] = {'type': 'string', 'description': 'APIVersion defines the versioned schema of this '
                           'representation of an object.'}
    props['kind'] = {'type': 'string', 'description': 'Kind is a string value representing the REST resource '
                     'this object represents.'}
    props['metadata'] = {'allOf': [{'$ref': f'{ref_prefix}{OBJECT_META}'}], 'default': {},
                         'description': "Standard object's metadata. More info: "
                                        'https://git.k8s.io/community/contributors/devel/sig-architecture/'
                                        'api-conventions.md#metadata'}
    schema.setdefault('type', 'object')
    schema['x-kubernetes-group-version-kind'] = [_gvk(rdef)]
    return schema


def _params(*names: str) -> list[dict[str, Any]]:
    return [{'name': n, 'in': 'query', 'schema': {'type': 'string', 'uniqueItems': True}} for n in names]


def _op(rdef: ResourceDef, action: str, op_id: str, params: list[dict[str, Any]], ref: str) -> dict[str, Any]:
    body_ref = {'$ref': ref}
    op: dict[str, Any] = {
        'operationId': op_id,
        'parameters': params,
        'responses': {'200': {'description': 'OK', 'content': {'application/json': {'schema': body_ref}}}},
        'x-kubernetes-action': action,
        'x-kubernetes-group-version-kind': _gvk(rdef),
    }
    if action in ('post', 'put', 'patch'):
        types = (['application/json-patch+json', 'application/merge-patch+json',
                  'application/strategic-merge-patch+json', 'application/apply-patch+yaml']
                 if action == 'patch' else ['application/json'])
        if rdef.custom:   # no strategic merge patch for custom resources (kubectl looks for it here)
            types = [t for t in types if t != 'application/strategic-merge-patch+json']
        op['requestBody'] = {'content': {t: {'schema': body_ref} for t in types}, 'required': True}
    return op


def _paths(rdef: ResourceDef, ref: str) -> dict[str, Any]:
    base = f'/apis/{rdef.group}/{rdef.version}' if rdef.group else '/api/v1'
    coll = f'{base}/namespaces/{{namespace}}/{rdef.plural}' if rdef.namespaced else f'{base}/{rdef.plural}'
    kind = rdef.kind
    write = _params('dryRun', 'fieldManager', 'fieldValidation')
    paths: dict[str, Any] = {}
    if rdef.verbs == ('create',):
        paths[coll] = {'post': _op(rdef, 'post', f'create{kind}', write, ref)}
        return paths
    paths[coll] = {
        'get': _op(rdef, 'list', f'list{kind}', _params('labelSelector', 'fieldSelector', 'limit', 'continue',
                                                       'resourceVersion', 'watch'), ref),
        'post': _op(rdef, 'post', f'create{kind}', write, ref),
        'delete': _op(rdef, 'deletecollection', f'deleteCollection{kind}', _params('dryRun'), ref),
    }
    if rdef.namespaced:
        paths[f'{base}/{rdef.plural}'] = {'get': _op(rdef, 'list', f'list{kind}ForAllNamespaces', [], ref)}
    item = f'{coll}/{{name}}'
    paths[item] = {
        'get': _op(rdef, 'get', f'read{kind}', [], ref),
        'put': _op(rdef, 'put', f'replace{kind}', write, ref),
        'patch': _op(rdef, 'patch', f'patch{kind}', write + _params('force'), ref),
        'delete': _op(rdef, 'delete', f'delete{kind}', _params('dryRun', 'gracePeriodSeconds',
                                                                'propagationPolicy'), ref),
    }
    if rdef.has_status:
        paths[f'{item}/status'] = {
            'get': _op(rdef, 'get', f'read{kind}Status', [], ref),
            'put': _op(rdef, 'put', f'replace{kind}Status', write, ref),
            'patch': _op(rdef, 'patch', f'patch{kind}Status', write + _params('force'), ref),
        }
    return paths


def _schemas(defs: list[tuple[ResourceDef, dict[str, Any] | None]], prefix: str
             ) -> tuple[dict[str, Any], dict[tuple[str, str, str], str]]:
    """Component schemas for these kinds, and the schema name of each kind."""
    schemas: dict[str, Any] = {}
    names: dict[tuple[str, str, str], str] = {}
    needed: set[str] = set()
    for rdef, crd_schema in defs:
        real = builtin_name(rdef)
        if real is not None:
            names[(rdef.group, rdef.version, rdef.kind)] = real
            needed.add(real)
        else:
            name = schema_name(rdef)
            names[(rdef.group, rdef.version, rdef.kind)] = name
            schemas[name] = _kind_schema(rdef, crd_schema, prefix)
            needed.add(OBJECT_META)
    available = builtin_definitions()
    for name in closure(needed):
        schemas[name] = convert(available[name], prefix)
    if OBJECT_META in needed and OBJECT_META not in schemas:
        schemas[OBJECT_META] = copy.deepcopy(_OBJECT_META_SCHEMA)
    return schemas, names


def gv_document(group: str, version: str, defs: list[tuple[ResourceDef, dict[str, Any] | None]]) -> dict[str, Any]:
    prefix = '#/components/schemas/'
    schemas, names = _schemas(defs, prefix)
    paths: dict[str, Any] = {}
    for rdef, _ in defs:
        paths.update(_paths(rdef, prefix + names[(rdef.group, rdef.version, rdef.kind)]))
    return {
        'openapi': '3.0.0',
        'info': {'title': 'Kubernetes', 'version': 'v1.31.0'},
        'paths': paths,
        'components': {'schemas': schemas},
    }


def gv_key(group: str, version: str) -> str:
    return f'apis/{group}/{version}' if group else f'api/{version}'


def doc_hash(doc: dict[str, Any]) -> str:
    return hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest().upper()[:64]


def v3_root(docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {'paths': {key: {'serverRelativeURL': f'/openapi/v3/{key}?hash={doc_hash(doc)}'}
                      for key, doc in sorted(docs.items())}}


def v2_document(defs: list[tuple[ResourceDef, dict[str, Any] | None]]) -> dict[str, Any]:
    """A Swagger 2.0 document with the same (minimal) definitions; refs point to #/definitions/."""
    prefix = '#/definitions/'
    definitions, names = _schemas(defs, prefix)
    paths: dict[str, Any] = {}
    for rdef, _ in defs:
        name = names[(rdef.group, rdef.version, rdef.kind)]
        for path, ops in _paths(rdef, prefix + name).items():
            converted = {}
            for method, op in ops.items():
                op = {k: v for k, v in op.items() if k not in ('requestBody', 'responses')}
                op['parameters'] = [{'name': p['name'], 'in': 'query', 'type': 'string', 'uniqueItems': True}
                                    for p in op['parameters']]
                op['responses'] = {'200': {'description': 'OK', 'schema': {'$ref': prefix + name}}}
                converted[method] = op
            paths[path] = converted
    return {'swagger': '2.0', 'info': {'title': 'Kubernetes', 'version': 'v1.31.0'}, 'paths': paths,
            'definitions': definitions}

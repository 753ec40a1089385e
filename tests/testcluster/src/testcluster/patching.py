"""PATCH bodies: RFC 6902 JSON patch, RFC 7386 merge patch, strategic merge patch; list semantics per resource.

The list semantics (which lists merge by which key) are shared with server-side apply (``applying.py``):
for built-in kinds they come from the ``patchMergeKey``/``listType`` markers of the Go types (only the lists
that kubectl/helm/operators touch in practice), for custom resources from ``x-kubernetes-list-type`` and
``x-kubernetes-list-map-keys`` in the CRD schema.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from . import errors
from .builtin import ResourceDef

ListSem = tuple[str, tuple[str, ...]]   # ('map', keys) | ('set', ()) | ('atomic', ())
ATOMIC: ListSem = ('atomic', ())
SET: ListSem = ('set', ())


def _m(*keys: str) -> ListSem:
    return ('map', keys)


_POD_SPEC_LISTS: dict[tuple[str, ...], ListSem] = {
    ('volumes',): _m('name'),
    ('imagePullSecrets',): _m('name'),
    ('hostAliases',): _m('ip'),
    ('topologySpreadConstraints',): _m('topologyKey'),
    ('resourceClaims',): _m('name'),
}
for _containers in ('containers', 'initContainers', 'ephemeralContainers'):
    _POD_SPEC_LISTS[(_containers,)] = _m('name')
    _POD_SPEC_LISTS[(_containers, 'ports')] = _m('containerPort')
    _POD_SPEC_LISTS[(_containers, 'env')] = _m('name')
    _POD_SPEC_LISTS[(_containers, 'volumeMounts')] = _m('mountPath')
    _POD_SPEC_LISTS[(_containers, 'volumeDevices')] = _m('devicePath')
    _POD_SPEC_LISTS[(_containers, 'resizePolicy')] = _m('resourceName')

_POD_SPEC_PREFIXES: dict[tuple[str, str], tuple[str, ...]] = {
    ('', 'pods'): ('spec',),
    ('apps', 'deployments'): ('spec', 'template', 'spec'),
    ('apps', 'replicasets'): ('spec', 'template', 'spec'),
    ('apps', 'statefulsets'): ('spec', 'template', 'spec'),
    ('apps', 'daemonsets'): ('spec', 'template', 'spec'),
    ('batch', 'jobs'): ('spec', 'template', 'spec'),
    ('batch', 'cronjobs'): ('spec', 'jobTemplate', 'spec', 'template', 'spec'),
}

_COMMON_LISTS: dict[tuple[str, ...], ListSem] = {
    ('metadata', 'finalizers'): SET,
    ('metadata', 'ownerReferences'): _m('uid'),
}

_KIND_LISTS: dict[tuple[str, str], dict[tuple[str, ...], ListSem]] = {
    ('', 'services'): {('spec', 'ports'): _m('port')},
    ('', 'pods'): {('status', 'conditions'): _m('type')},
    ('apps', 'deployments'): {('status', 'conditions'): _m('type')},
    ('apps', 'replicasets'): {('status', 'conditions'): _m('type')},
    ('apps', 'statefulsets'): {('status', 'conditions'): _m('type')},
    ('apps', 'daemonsets'): {('status', 'conditions'): _m('type')},
    ('admissionregistration.k8s.io', 'mutatingwebhookconfigurations'): {('webhooks',): _m('name')},
    ('admissionregistration.k8s.io', 'validatingwebhookconfigurations'): {('webhooks',): _m('name')},
}


def _schema_at(schema: dict[str, Any] | None, path: tuple[str, ...]) -> dict[str, Any] | None:
    node = schema
    for name in path:
        while isinstance(node, dict) and (node.get('type') == 'array' or 'items' in node):
            node = node.get('items') if isinstance(node.get('items'), dict) else None
        if not isinstance(node, dict):
            return None
        props = node.get('properties') or {}
        if name in props:
            node = props[name]
        elif isinstance(node.get('additionalProperties'), dict):
            node = node['additionalProperties']
        else:
            return None
    return node


class ListTypes:
    """List semantics at a path of field names (list items add no names).

    ``lists(path)`` gives the server-side-apply semantics (``x-kubernetes-list-type``/``-list-map-keys``, falling
    back to the patch strategy), ``lists.smp(path)`` the strategic-merge-patch semantics
    (``x-kubernetes-patch-strategy``/``-patch-merge-key``). Built-in kinds use the real v1.31 schemas shipped by
    ``kubernetes-validate`` (or a small table if it is not installed); custom resources their CRD schema.
    """

    def __init__(self, rdef: ResourceDef, schema: dict[str, Any] | None = None) -> None:
        from . import openapi
        self.rdef = rdef
        self.table = dict(_COMMON_LISTS)
        self.table.update(_KIND_LISTS.get(rdef.gp, {}))
        prefix = _POD_SPEC_PREFIXES.get(rdef.gp)
        if prefix is not None:
            for sub, sem in _POD_SPEC_LISTS.items():
                self.table[prefix + sub] = sem
        self.schema = schema if rdef.custom else None
        self.builtin = None if rdef.custom or openapi.builtin_name(rdef) is None else openapi

    def _builtin_node(self, path: tuple[str, ...]) -> dict[str, Any] | None:
        return self.builtin.builtin_schema_at(self.rdef, path) if self.builtin is not None else None

    def smp(self, path: tuple[str, ...]) -> ListSem:
        if self.builtin is None:
            return self(path)
        node = self._builtin_node(path)
        if node is None:
            return ATOMIC
        strategy = str(node.get('x-kubernetes-patch-strategy') or '').split(',')
        key = node.get('x-kubernetes-patch-merge-key')
        if 'merge' in strategy:
            return ('map', (key,)) if key else SET
        return ATOMIC

    def __call__(self, path: tuple[str, ...]) -> ListSem:
        if self.builtin is not None:
            node = self._builtin_node(path)
            if node is None:
                return ATOMIC
            list_type = node.get('x-kubernetes-list-type')
            if list_type == 'map':
                return ('map', tuple(node.get('x-kubernetes-list-map-keys') or ()))
            if list_type == 'set':
                return SET
            if list_type == 'atomic':
                return ATOMIC
            return self.smp(path)
        if path in self.table and (self.schema is None or path[0] == 'metadata'):
            return self.table[path]
        if self.schema is not None:
            node = _schema_at(self.schema, path)
            if isinstance(node, dict):
                list_type = node.get('x-kubernetes-list-type')
                if list_type == 'map':
                    return ('map', tuple(node.get('x-kubernetes-list-map-keys') or ()))
                if list_type == 'set':
                    return SET
        return ATOMIC


# ---------------------------------------------------------------------------------------------------------------
# RFC 6902 JSON patch.

def json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith('/')):
        raise errors.bad_request(f'invalid JSON pointer: {path!r}')
    if path == '':
        return []
    return [part.replace('~1', '/').replace('~0', '~') for part in path[1:].split('/')]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise errors.unprocessable(f'doc is missing path: "{path}": missing value')
    return node


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    key = parts[-1]
    if isinstance(parent, dict) and key in parent:
        return parent[key]
    if isinstance(parent, list) and key.isdigit() and int(key) < len(parent):
        return parent[int(key)]
    raise errors.unprocessable(f'doc is missing path: "{path}": missing value')


def _add(doc: Any, path: str, value: Any, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    key = parts[-1]
    if isinstance(parent, dict):
        if replace and key not in parent:
            raise errors.unprocessable(f'replace operation does not apply: doc is missing key: {path}: '
                                       'missing value')
        parent[key] = value
    elif isinstance(parent, list):
        if key == '-' and not replace:
            parent.append(value)
        elif key.isdigit() and int(key) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(key)] = value
            else:
                parent.insert(int(key), value)
        else:
            raise errors.unprocessable(f'add operation does not apply: doc is missing path: "{path}": '
                                       'missing value')
    else:
        raise errors.unprocessable(f'doc is missing path: "{path}": missing value')
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    parts = _pointer(path)
    if not parts:
        raise errors.unprocessable('cannot remove the root')
    parent = _parent(doc, parts, path)
    key = parts[-1]
    if isinstance(parent, dict) and key in parent:
        return doc, parent.pop(key)
    if isinstance(parent, list) and key.isdigit() and int(key) < len(parent):
        return doc, parent.pop(int(key))
    raise errors.unprocessable(f'remove operation does not apply: doc is missing path: "{path}": missing value')


def json_patch(doc: dict[str, Any], ops: Any) -> dict[str, Any]:
    if not isinstance(ops, list):
        raise errors.bad_request('json: cannot unmarshal object into Go value of type jsonpatch.Patch')
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or not isinstance(op.get('op'), str):
            raise errors.bad_request(f'invalid JSON patch operation: {op!r}')
        name, path = op['op'], op.get('path')
        if path is None:
            raise errors.unprocessable(f'operation missing path: {op!r}')
        if name in ('add', 'replace', 'test') and 'value' not in op:
            raise errors.unprocessable(f'Unexpected kind: {name} operation requires value')
        if name == 'add':
            doc = _add(doc, path, copy.deepcopy(op['value']))
        elif name == 'replace':
            doc = _add(doc, path, copy.deepcopy(op['value']), replace=True)
        elif name == 'remove':
            doc, _ = _remove(doc, path)
        elif name == 'move':
            doc, value = _remove(doc, op.get('from'))
            doc = _add(doc, path, value)
        elif name == 'copy':
            doc = _add(doc, path, copy.deepcopy(_get(doc, op.get('from'))))
        elif name == 'test':
            try:
                actual = _get(doc, path)
            except errors.ApiError:
                actual = None
            if not json_equal(actual, op['value']):
                raise errors.unprocessable(f'testing value {path} failed: test failed')
        else:
            raise errors.unprocessable(f'Unexpected kind: {name}')
    if not isinstance(doc, dict):
        raise errors.unprocessable('the patched document is not an object')
    return doc


# ---------------------------------------------------------------------------------------------------------------
# RFC 7386 JSON merge patch.

def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# ---------------------------------------------------------------------------------------------------------------
# Strategic merge patch (built-in kinds only).

def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items()
                if not k.startswith('$') and v is not None}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def strategic_merge_patch(original: dict[str, Any], patch: Any, lists: Callable[[tuple[str, ...]], ListSem]
                          ) -> dict[str, Any]:
    if not isinstance(patch, dict):
        raise errors.bad_request('strategic merge patch must be a JSON object')
    result = _smp_map(copy.deepcopy(original), patch, (), lists)
    if not isinstance(result, dict):
        raise errors.unprocessable('the patched document is not an object')
    return result


def _smp_map(original: Any, patch: dict[str, Any], path: tuple[str, ...],
             lists: Callable[[tuple[str, ...]], ListSem]) -> Any:
    directive = patch.get('$patch')
    if directive == 'replace':
        return _strip_directives({k: v for k, v in patch.items() if k != '$patch'})
    if directive == 'delete':
        return None
    result = dict(original) if isinstance(original, dict) else {}
    retain = patch.get('$retainKeys')
    for key, value in patch.items():
        if key.startswith('$deleteFromPrimitiveList/'):
            field = key.split('/', 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if key.startswith('$'):
            continue   # $setElementOrder/..., $retainKeys (below), $patch (above)
        sub = path + (key,)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = _smp_map(result.get(key), value, sub, lists)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _smp_list(result.get(key), value, sub, lists)
        else:
            result[key] = value
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _smp_list(original: Any, patch: list[Any], path: tuple[str, ...],
              lists: Callable[[tuple[str, ...]], ListSem]) -> list[Any]:
    kind, keys = lists(path)
    original = original if isinstance(original, list) else []
    if any(isinstance(item, dict) and item.get('$patch') == 'replace' for item in patch):
        return [_strip_directives(item) for item in patch
                if not (isinstance(item, dict) and item.get('$patch') == 'replace')]
    if kind == 'set':
        result = list(original)
        for item in patch:
            if item not in result:
                result.append(item)
        return result
    if kind != 'map':
        return [_strip_directives(item) for item in patch]
    key = keys[0]
    result = list(original)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise errors.unprocessable(f'map: {item!r} does not contain declared merge key: {key}')
        index = next((i for i, old in enumerate(result) if isinstance(old, dict) and old.get(key) == item[key]),
                     None)
        if item.get('$patch') == 'delete':
            if index is not None:
                result.pop(index)
            continue
        if index is None:
            result.append(_strip_directives(item))
        else:
            result[index] = _smp_map(result[index], item, path, lists)
    return result


def parse_body(body: bytes, content_type: str) -> Any:
    """Decode a JSON (or, for apply patches, YAML) request body; 400 on garbage."""
    if not body.strip():
        raise errors.bad_request('the request body is empty')
    try:
        return json.loads(body)
    except ValueError:
        if 'yaml' not in content_type:
            raise errors.bad_request('error decoding patch/body: invalid JSON') from None
    import yaml
    try:
        return yaml.safe_load(body)
    except yaml.YAMLError as e:
        raise errors.bad_request(f'error decoding YAML: {e}') from None

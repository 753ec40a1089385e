"""Server-side apply and ``metadata.managedFields`` (a simplified structured-merge-diff).

Field sets are sets of paths; a path is a tuple of elements in the fieldsV1 notation: ``f:name`` for a map key,
``k:{"name":"c"}`` for an item of a keyed list (a path ending in it is the item itself, ``.`` in fieldsV1),
``v:"x"`` for a value of a set-like list. Atomic lists and scalars are leaves.

Simplifications (documented in the package docstring): list-map keys are single keys as in the SMP table
(e.g. container ports by ``containerPort`` only); the applied configuration is not defaulted before diffing;
ownership of Update operations is computed by diffing old/new objects; conflicts are value-based.
"""

from __future__ import annotations

import copy
import datetime
import json
from collections.abc import Callable, Iterable
from typing import Any

from . import errors
from .patching import ListSem

Path = tuple[str, ...]
MISSING: Any = object()

# Fields never owned by anyone (server-managed or identity).
_IGNORED_META = {'name', 'namespace', 'uid', 'resourceVersion', 'generation', 'creationTimestamp',
                 'managedFields', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'selfLink', 'generateName'}


def _names(path: Path) -> tuple[str, ...]:
    return tuple(pe[2:] for pe in path if pe.startswith('f:'))


# Key fields that the server defaults when omitted (the applied configuration is not defaulted here).
_KEY_DEFAULTS = {'protocol': 'TCP'}


def _key_pe(item: dict[str, Any], keys: tuple[str, ...]) -> str:
    values = {k: item.get(k, _KEY_DEFAULTS.get(k)) for k in keys}
    return 'k:' + json.dumps(values, sort_keys=True, separators=(',', ':'))


def fieldset(obj: Any, lists: Callable[[tuple[str, ...]], ListSem], *, only_status: bool = False,
             skip_status: bool = False) -> set[Path]:
    paths: set[Path] = set()
    if not isinstance(obj, dict):
        return paths
    for key, value in obj.items():
        if key in ('apiVersion', 'kind'):
            continue
        if key == 'status' and skip_status:
            continue
        if key != 'status' and only_status:
            continue
        if key == 'metadata' and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in _IGNORED_META}
            if not value:
                continue
        _walk(value, ('f:' + key,), lists, paths)
    return paths


def _walk(value: Any, path: Path, lists: Callable[[tuple[str, ...]], ListSem], out: set[Path]) -> None:
    if isinstance(value, dict) and value:
        for key, sub in value.items():
            _walk(sub, path + ('f:' + key,), lists, out)
    elif isinstance(value, list) and value:
        kind, keys = lists(_names(path))
        if kind == 'map' and all(isinstance(item, dict) for item in value):
            for item in value:
                item_path = path + (_key_pe(item, keys),)
                out.add(item_path)
                _walk(item, item_path, lists, out)
        elif kind == 'set':
            for item in value:
                out.add(path + ('v:' + json.dumps(item, sort_keys=True, separators=(',', ':')),))
        else:
            out.add(path)
    else:
        out.add(path)


def _find_item(items: list[Any], pe: str) -> int | None:
    wanted = json.loads(pe[2:])
    for i, item in enumerate(items):
        if isinstance(item, dict) and all(item.get(k, _KEY_DEFAULTS.get(k)) == v for k, v in wanted.items()):
            return i
    return None


def get_at(obj: Any, path: Path) -> Any:
    node = obj
    for pe in path:
        if pe.startswith('f:'):
            if not isinstance(node, dict) or pe[2:] not in node:
                return MISSING
            node = node[pe[2:]]
        elif pe.startswith('k:'):
            if not isinstance(node, list):
                return MISSING
            index = _find_item(node, pe)
            if index is None:
                return MISSING
            node = node[index]
        elif pe.startswith('v:'):
            value = json.loads(pe[2:])
            if not isinstance(node, list) or value not in node:
                return MISSING
            node = value
    return node


def delete_at(obj: Any, path: Path) -> None:
    if not path:
        return
    parent = get_at(obj, path[:-1])
    pe = path[-1]
    if pe.startswith('f:') and isinstance(parent, dict):
        parent.pop(pe[2:], None)
    elif pe.startswith('k:') and isinstance(parent, list):
        index = _find_item(parent, pe)
        if index is not None:
            parent.pop(index)
    elif pe.startswith('v:') and isinstance(parent, list):
        value = json.loads(pe[2:])
        if value in parent:
            parent.remove(value)


def merge_applied(obj: Any, applied: Any, lists: Callable[[tuple[str, ...]], ListSem],
                  names: tuple[str, ...] = ()) -> Any:
    if isinstance(applied, dict):
        result = dict(obj) if isinstance(obj, dict) else {}
        for key, value in applied.items():
            if value is None:
                result.pop(key, None)
            else:
                result[key] = merge_applied(result.get(key, MISSING), value, lists, names + (key,))
        return result
    if isinstance(applied, list):
        kind, keys = lists(names)
        current = obj if isinstance(obj, list) else []
        if kind == 'map' and all(isinstance(item, dict) for item in applied):
            result_list = list(current)
            for item in applied:
                index = _find_item(result_list, _key_pe(item, keys))
                if index is None:
                    result_list.append(copy.deepcopy(item))
                else:
                    result_list[index] = merge_applied(result_list[index], item, lists, names)
            return result_list
        if kind == 'set':
            return list(current) + [v for v in applied if v not in current]
        return copy.deepcopy(applied)
    return applied


# ---------------------------------------------------------------------------------------------------------------
# managedFields (de)serialisation.

def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for pe in path:
            node = node.setdefault(pe, {})
        if path and path[-1].startswith('k:'):
            node['.'] = {}
    return root


def from_fields_v1(tree: dict[str, Any], prefix: Path = ()) -> set[Path]:
    paths: set[Path] = set()
    for key, sub in (tree or {}).items():
        if key == '.':
            paths.add(prefix)
            continue
        if not sub:
            paths.add(prefix + (key,))
        else:
            paths |= from_fields_v1(sub, prefix + (key,))
    return paths


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')


class Managed:
    """The managedFields entries of one object, keyed by (manager, operation, subresource)."""

    def __init__(self, entries: list[dict[str, Any]] | None) -> None:
        self.sets: dict[tuple[str, str, str], set[Path]] = {}
        self.meta: dict[tuple[str, str, str], dict[str, Any]] = {}
        for entry in entries or []:
            key = (entry.get('manager', ''), entry.get('operation', 'Update'), entry.get('subresource', ''))
            self.sets[key] = from_fields_v1(entry.get('fieldsV1') or {})
            self.meta[key] = entry
        self.original = {k: set(v) for k, v in self.sets.items()}

    def others(self, key: tuple[str, str, str]) -> dict[tuple[str, str, str], set[Path]]:
        return {k: v for k, v in self.sets.items() if k != key}

    def serialize(self, api_version: str) -> list[dict[str, Any]]:
        entries = []
        for key, paths in self.sets.items():
            if not paths:
                continue
            manager, operation, subresource = key
            if key in self.meta and self.original.get(key) == paths:
                entries.append(self.meta[key])
                continue
            entry = {'manager': manager, 'operation': operation, 'apiVersion': api_version, 'time': now_iso(),
                     'fieldsType': 'FieldsV1', 'fieldsV1': to_fields_v1(paths)}
            if subresource:
                entry['subresource'] = subresource
            entries.append(entry)
        return entries


def track_update(managed: Managed, old: dict[str, Any] | None, new: dict[str, Any], manager: str,
                 subresource: str, lists: Callable[[tuple[str, ...]], ListSem], statusful: bool) -> None:
    """An Update (POST/PUT/non-apply PATCH): the manager takes the fields it changed from everyone."""
    only_status = statusful and subresource == 'status'
    skip_status = statusful and subresource != 'status'
    new_paths = fieldset(new, lists, only_status=only_status, skip_status=skip_status)
    old_paths = fieldset(old or {}, lists, only_status=only_status, skip_status=skip_status)
    changed = {p for p in new_paths if old is None or not _same(get_at(old, p), get_at(new, p))}
    removed = old_paths - new_paths
    for key, paths in managed.sets.items():
        managed.sets[key] = paths - changed - removed
    if changed:
        key = (manager, 'Update', subresource if subresource == 'status' else '')
        managed.sets[key] = managed.sets.get(key, set()) | changed


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (dict, list)) and isinstance(b, (dict, list)):
        return True   # nodes (keyed items): their leaves are compared separately
    return a is not MISSING and b is not MISSING and a == b


def apply(current: dict[str, Any], applied: dict[str, Any], managed: Managed, manager: str, force: bool,
          lists: Callable[[tuple[str, ...]], ListSem], *, statusful: bool, subresource: str,
          conflict: Callable[[str], errors.ApiError]) -> dict[str, Any]:
    """Merge an applied configuration into ``current``; updates ``managed`` in place; returns the new object."""
    only_status = statusful and subresource == 'status'
    skip_status = statusful and subresource != 'status'
    key = (manager, 'Apply', 'status' if only_status else '')
    new_set = fieldset(applied, lists, only_status=only_status, skip_status=skip_status)
    old_set = managed.sets.get(key, set())

    conflicts: list[tuple[str, Path]] = []
    for path in sorted(new_set):
        if path[-1].startswith('k:'):
            continue
        cur, app = get_at(current, path), get_at(applied, path)
        if cur is MISSING or cur == app:
            continue
        for other, paths in managed.others(key).items():
            if path in paths:
                conflicts.append((other[0], path))
    if conflicts and not force:
        lines = [f'- conflict with "{m}": .{".".join(pe[2:] for pe in p)}' for m, p in conflicts]
        raise conflict(f'Apply failed with {len(conflicts)} conflict{"s" if len(conflicts) > 1 else ""}: '
                       + '\n'.join(lines))
    if conflicts:
        conflicting = {p for _, p in conflicts}
        for other_key in managed.others(key):
            managed.sets[other_key] -= conflicting

    result = copy.deepcopy(current)
    still_owned = set().union(*managed.others(key).values()) if managed.others(key) else set()
    still_owned |= new_set
    for path in sorted(old_set - new_set, key=len):
        if any(q[:len(path)] == path for q in still_owned):
            continue
        delete_at(result, path)

    body = {k: v for k, v in applied.items() if k not in ('apiVersion', 'kind')}
    if skip_status:
        body.pop('status', None)
    if only_status:
        body = {'status': body.get('status')} if 'status' in body else {}
    meta = body.get('metadata')
    if isinstance(meta, dict):
        body['metadata'] = {k: v for k, v in meta.items() if k not in _IGNORED_META}
    result = merge_applied(result, body, lists)
    managed.sets[key] = new_set
    return result

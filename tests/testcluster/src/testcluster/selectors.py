"""Label and field selectors as the API server parses and applies them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import ApiError, bad_request

_KEY_RE = re.compile(r'^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?'
                     r'[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')
_VALUE_RE = re.compile(r'^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')

LabelRequirement = tuple[str, str, tuple[str, ...]]  # key, operator, values


def _split_top(text: str) -> list[str]:
    """Split by commas that are not inside parentheses."""
    parts: list[str] = []
    depth = 0
    current = ''
    for ch in text:
        if ch == '(':
            depth += 1
        elif ch == ')':
            depth -= 1
        if ch == ',' and depth == 0:
            parts.append(current)
            current = ''
        else:
            current += ch
    parts.append(current)
    return parts


def parse_label_selector(text: str | None) -> list[LabelRequirement]:
    if not text or not text.strip():
        return []
    reqs: list[LabelRequirement] = []
    for raw in _split_top(text):
        part = raw.strip()
        if not part:
            raise bad_request(f'unable to parse requirement: found \'\', expected: identifier (in {text!r})')
        m = re.match(r'^(\S+?)\s+(in|notin)\s*\((.*)\)$', part)
        if m:
            key, op, values = m.group(1), m.group(2), tuple(v.strip() for v in m.group(3).split(','))
            values = tuple(v for v in values if v) if op == 'notin' else values
        elif part.startswith('!'):
            key, op, values = part[1:].strip(), '!', ()
        else:
            m = re.match(r'^([^=!<>\s]+)\s*(==|=|!=|>|<)\s*(.*)$', part)
            if m:
                key, op, values = m.group(1), m.group(2), (m.group(3).strip(),)
                op = '=' if op == '==' else op
            elif re.match(r'^[^=!<>\s()]+$', part):
                key, op, values = part, 'exists', ()
            else:
                raise bad_request(f'unable to parse requirement: {part!r}')
        if not _KEY_RE.match(key) or len(key.split('/')[-1]) > 63:
            raise bad_request(f'unable to parse requirement: values[0][{key}]: Invalid value: "{key}": '
                              'name part must consist of alphanumeric characters, \'-\', \'_\' or \'.\'')
        for value in values:
            if op in ('<', '>'):
                if not re.match(r'^-?\d+$', value):
                    raise bad_request(f'unable to parse requirement: for \'Gt\', \'Lt\' operators, '
                                      f'the value must be an integer: {value!r}')
            elif not _VALUE_RE.match(value) or len(value) > 63:
                raise bad_request(f'unable to parse requirement: values[0][{key}]: Invalid value: "{value}": '
                                  'a valid label must be an empty string or consist of alphanumeric characters')
        reqs.append((key, op, values))
    return reqs


def match_labels(reqs: list[LabelRequirement], labels: dict[str, str] | None) -> bool:
    labels = labels or {}
    for key, op, values in reqs:
        present = key in labels
        value = labels.get(key)
        if op == 'exists' and not present:
            return False
        if op == '!' and present:
            return False
        if op in ('=', 'in') and (not present or value not in values):
            return False
        if op in ('!=', 'notin') and present and value in values:
            return False
        if op in ('<', '>'):
            try:
                number = int(value) if value is not None else None
            except ValueError:
                return False
            if number is None:
                return False
            if op == '<' and not number < int(values[0]):
                return False
            if op == '>' and not number > int(values[0]):
                return False
    return True


def match_label_selector_object(selector: dict[str, Any] | None, labels: dict[str, str] | None) -> bool:
    """Match a structured ``LabelSelector`` (matchLabels/matchExpressions), e.g. of a Deployment."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get('matchLabels') or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get('matchExpressions') or []:
        key, op, values = expr.get('key'), expr.get('operator'), expr.get('values') or []
        if op == 'In' and labels.get(key) not in values:
            return False
        if op == 'NotIn' and key in labels and labels[key] in values:
            return False
        if op == 'Exists' and key not in labels:
            return False
        if op == 'DoesNotExist' and key in labels:
            return False
    return True


# Field selectors: which fields each resource supports (besides metadata.name/namespace).
_COMMON_FIELDS = {'metadata.name', 'metadata.namespace'}
_EXTRA_FIELDS: dict[tuple[str, str], set[str]] = {
    ('', 'pods'): {'spec.nodeName', 'spec.restartPolicy', 'spec.schedulerName', 'spec.serviceAccountName',
                   'spec.hostNetwork', 'status.phase', 'status.podIP', 'status.nominatedNodeName'},
    ('', 'events'): {'involvedObject.kind', 'involvedObject.namespace', 'involvedObject.name',
                     'involvedObject.uid', 'involvedObject.apiVersion', 'involvedObject.resourceVersion',
                     'involvedObject.fieldPath', 'reason', 'reportingComponent', 'source', 'type'},
    ('events.k8s.io', 'events'): {'regarding.kind', 'regarding.namespace', 'regarding.name', 'regarding.uid',
                                  'reason', 'type', 'reportingController'},
    ('', 'secrets'): {'type'},
    ('', 'namespaces'): {'status.phase'},
    ('', 'persistentvolumeclaims'): set(),
    ('batch', 'jobs'): {'status.successful'},
    ('apps', 'replicasets'): {'status.replicas'},
}

FieldRequirement = tuple[str, str, str]  # field, operator (= or !=), value


def _split_escaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], '', False
    for ch in text:
        if escaped:
            current += ch
            escaped = False
        elif ch == '\\':
            escaped = True
        elif ch == sep:
            parts.append(current)
            current = ''
        else:
            current += ch
    parts.append(current)
    return parts


def parse_field_selector(text: str | None, group: str, plural: str,
                         extra: set[str] | None = None, *, describe: str = '') -> list[FieldRequirement]:
    if not text or not text.strip():
        return []
    reqs: list[FieldRequirement] = []
    supported = _COMMON_FIELDS | _EXTRA_FIELDS.get((group, plural), set()) | (extra or set())
    for part in _split_escaped(text, ','):
        part = part.strip()
        m = re.match(r'^([^=!]+?)\s*(==|=|!=)\s*(.*)$', part)
        if not m:
            raise bad_request(f'invalid selector: \'{text}\'; can\'t understand \'{part}\'')
        field, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
        if field not in supported:
            raise ApiError(400, 'BadRequest',
                           f'Unable to find "{describe}" that match label selector "", field selector '
                           f'"{text}": field label not supported: {field}')
        reqs.append((field, '!=' if op == '!=' else '=', value))
    return reqs


def field_value(obj: dict[str, Any], field: str) -> str:
    node: Any = obj
    for part in field.split('.'):
        if not isinstance(node, dict):
            node = None
            break
        node = node.get(part)
    if node is None:
        return ''
    if isinstance(node, bool):
        return 'true' if node else 'false'
    return str(node)


def match_fields(reqs: list[FieldRequirement], obj: dict[str, Any]) -> bool:
    for field, op, value in reqs:
        actual = field_value(obj, field)
        if op == '=' and actual != value:
            return False
        if op == '!=' and actual == value:
            return False
    return True


def make_matcher(label_selector: str | None, field_selector: str | None, group: str, plural: str,
                 extra_fields: set[str] | None = None, describe: str = '') -> Callable[[dict[str, Any]], bool]:
    labels = parse_label_selector(label_selector)
    fields = parse_field_selector(field_selector, group, plural, extra_fields, describe=describe)

    def matcher(obj: dict[str, Any]) -> bool:
        return match_labels(labels, obj.get('metadata', {}).get('labels')) and match_fields(fields, obj)

    return matcher

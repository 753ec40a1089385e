"""Admission of custom objects against their CRD's structural schema, as the API server does.

`admit_custom_object` reproduces, for one custom resource and one CRD version, what
kube-apiserver (apiextensions-apiserver, Kubernetes 1.33+ behaviour) does between
decoding a request body and storing it:

1. **Pruning** of fields the structural schema does not declare
   (``x-kubernetes-preserve-unknown-fields``, ``x-kubernetes-embedded-resource``,
   ``additionalProperties``, root ``apiVersion``/``kind``/``metadata`` honoured; unknown
   ``metadata`` fields are dropped as the ObjectMeta decoder does). With
   ``fieldValidation=Strict`` unknown fields fail the request the way the real decoder does:
   ``400 BadRequest``, ``<Kind> in version "<v>" cannot be handled as a <Kind>: strict
   decoding error: unknown field "spec.foo"``; ``Warn`` returns ``unknown field "spec.foo"``
   warnings; ``Ignore`` prunes silently. Non-nullable ``null``s without a default are dropped.
2. **Defaulting** (``default``), recursively, inside ``items`` and ``additionalProperties``,
   for nested objects only when the parent exists, and for non-nullable ``null`` values.
3. **Validation**, collecting all errors: OpenAPI keywords with kube-openapi's messages
   (``spec.x in body should be at least 1 chars long``...), embedded-resource
   ``apiVersion``/``kind``, ``x-kubernetes-list-type`` set/map uniqueness, then
   ``x-kubernetes-validations`` CEL rules (via `testcluster.cel`) - or, as the real server
   does, the note ``<nil>: Invalid value: null: some validation rules were not checked
   because the object was invalid; ...`` when a blocking error (type, required, enum,
   maxLength, maxItems/maxProperties) was found. On UPDATE the real server *ratchets*:
   errors located in parts of the object that did not change are dropped (CEL ones become
   warnings, except transition rules); this is reproduced.

Errors are raised as `FieldError` (422 Invalid, with ``causes`` as in ``metav1.Status``).
``metadata.name`` validity and ``status``-subresource handling are the caller's job.

`crd_rule_problems` / `check_crd_rules` reproduce the part of CRD creation that concerns CEL:
the real server refuses a CRD whose rules do not compile, e.g. because they select a field the
schema does not expose to CEL (an untyped ``x-kubernetes-preserve-unknown-fields`` property is
not exposed). `admit_custom_object` itself evaluates such rules leniently.

Simplified: CEL cost budgets are not enforced; ``messageExpression`` is best effort (falls
back to ``message`` on any problem, as the real server does on evaluation errors); only
common string ``format``s are checked (date-time, date, duration, byte, uuid*, email,
hostname, ipv4, ipv6, cidr, mac, uri, hexcolor, rgbcolor, bsonobjectid); ``matchPolicy``
conversions between CRD versions are not done (the caller stores one version).
"""

from __future__ import annotations

import base64
import copy
import datetime
import ipaddress
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from . import cel

__all__ = ["FieldError", "admit_custom_object", "check_crd_rules", "crd_rule_problems", "version_schema"]

_MISSING = object()
OMIT = object()  # field.OmitValueType: the error body carries no value

# ErrorType -> canonical text (apimachinery field.ErrorType.String()).
_TYPE_TEXT = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "InternalError": "Internal error",
    "FieldValueTypeInvalid": "Invalid value",
}
_NO_VALUE_TYPES = {"FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong", "InternalError"}
_BLOCKING = {
    "FieldValueNotSupported",
    "FieldValueRequired",
    "FieldValueTooLong",
    "FieldValueTooMany",
    "FieldValueTypeInvalid",
}
_BLOCKED_NOTE = (
    "some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)

_OBJECT_META_FIELDS = frozenset(
    [
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    ]
)


# --------------------------------------------------------------------------------------------
# Value rendering (Go fmt as used by field.Error)
# --------------------------------------------------------------------------------------------


def go_float(value: float) -> str:
    """Go's ``%v`` for a float64 (strconv 'g' with the shortest representation)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits_t, exponent = Decimal(repr(value)).as_tuple()
    digits = list(digits_t)
    while len(digits) > 1 and digits[-1] == 0:
        digits.pop()
        exponent += 1
    text = "".join(map(str, digits))
    count = len(digits)
    point = count + exponent
    exp = point - 1
    neg = "-" if sign else ""
    if exp < -4 or exp >= 6:
        mantissa = text[0] + ("." + text[1:] if count > 1 else "")
        return f"{neg}{mantissa}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
    if point <= 0:
        return f"{neg}0.{'0' * (-point)}{text}"
    if point >= count:
        return f"{neg}{text}{'0' * (point - count)}"
    return f"{neg}{text[:point]}.{text[point:]}"


def go_quote(text: str) -> str:
    """Go's ``%q`` (strconv.Quote) for printable text; close enough for error messages."""
    return json.dumps(text, ensure_ascii=False)


def render_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def _num_text(value: Any) -> str:
    if isinstance(value, float):
        return go_float(value)
    return str(value)


@dataclass
class _Err:
    """One field.Error."""

    type: str
    field: str
    value: Any = OMIT
    detail: str = ""

    def body(self) -> str:
        text = _TYPE_TEXT[self.type]
        if self.type not in _NO_VALUE_TYPES and self.value is not OMIT:
            text = f"{text}: {render_value(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def error(self) -> str:
        return f"{self.field}: {self.body()}"

    def cause(self) -> dict:
        return {"reason": self.type, "message": self.body(), "field": self.field}


class FieldError(Exception):
    """The request is rejected: ``status``/``reason``/``message``/``causes`` as in metav1.Status.

    ``causes`` are ``{"field", "message", "reason"}`` dicts (``reason`` is the cause type, e.g.
    ``FieldValueRequired``). `to_status` gives the full ``Status`` object the server returns.
    """

    def __init__(
        self,
        message: str,
        *,
        causes: list[dict],
        status: int = 422,
        reason: str = "Invalid",
        kind: str = "",
        group: str = "",
        name: str = "",
        details: bool = True,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.causes = causes
        self.status = status
        self.code = status
        self.reason = reason
        self.kind = kind
        self.group = group
        self.name = name
        self._details = details

    @property
    def fields(self) -> list[str]:
        return [c["field"] for c in self.causes]

    def to_status(self) -> dict:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.status,
        }
        if self._details:
            status["details"] = {
                "name": self.name,
                "group": self.group,
                "kind": self.kind,
                "causes": [dict(c) for c in self.causes],
            }
        return status

    def __repr__(self) -> str:
        return f"FieldError({self.status}, {self.message!r})"


def _invalid(kind: str, group: str, name: str, errors: list[_Err]) -> FieldError:
    qualified = f"{kind}.{group}" if group else kind
    seen: list[str] = []
    for err in errors:
        text = err.error()
        if text not in seen:
            seen.append(text)
    aggregate = seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"
    return FieldError(
        f"{qualified} {go_quote(name)} is invalid: {aggregate}",
        causes=[e.cause() for e in errors],
        kind=kind,
        group=group,
        name=name,
    )


# --------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------

Path = tuple  # of ("p", name) | ("k", key) | ("i", index)


def path_openapi(path: Path) -> str:
    """kube-openapi's error name: ``spec.items[0].name``; additionalProperties keys as ``.key``."""
    out = ""
    for kind, item in path:
        if kind == "i":
            out += f"[{item}]"
        else:
            out += f".{item}" if out else str(item)
    return out


def path_field(path: Path) -> str:
    """field.Path.String(): ``spec.items[0].name``, map keys as ``[key]``; empty -> ``<nil>``."""
    if not path:
        return "<nil>"
    out = ""
    for kind, item in path:
        if kind in ("i", "k"):
            out += f"[{item}]"
        else:
            out += f".{item}" if out else str(item)
    return out


# --------------------------------------------------------------------------------------------
# JSON helpers
# --------------------------------------------------------------------------------------------


def json_equal(a: Any, b: Any) -> bool:
    """Deep equality with JSON types kept apart (``True != 1``, ``1 == 1.0``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _json_key(value: Any) -> str:
    def norm(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
            return int(v)
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v

    return json.dumps(norm(value), sort_keys=True, separators=(",", ":"))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def version_schema(crd: dict, version: str) -> dict | None:
    """The ``openAPIV3Schema`` of a CRD version (None when the version has no schema)."""
    for entry in (crd.get("spec") or {}).get("versions") or []:
        if entry.get("name") == version:
            return ((entry.get("schema") or {}).get("openAPIV3Schema")) or None
    raise ValueError(f"version {version!r} is not served by CRD {crd.get('metadata', {}).get('name')!r}")


def _props(schema: dict | None) -> dict:
    if not isinstance(schema, dict):
        return {}
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


def _addl(schema: dict | None) -> dict | None:
    if not isinstance(schema, dict):
        return None
    addl = schema.get("additionalProperties")
    return addl if isinstance(addl, dict) else None


def _items(schema: dict | None) -> dict | None:
    if not isinstance(schema, dict):
        return None
    items = schema.get("items")
    return items if isinstance(items, dict) else None


# --------------------------------------------------------------------------------------------
# 1. Pruning
# --------------------------------------------------------------------------------------------


def _prune_metadata(meta: Any, path: Path, unknown: list[str]) -> None:
    if not isinstance(meta, dict):
        return
    for key in list(meta):
        if key not in _OBJECT_META_FIELDS:
            unknown.append(path_openapi((*path, ("p", key))))
            del meta[key]


def _prune(value: Any, schema: dict | None, path: Path, unknown: list[str], *, root: bool = False) -> None:
    if isinstance(schema, dict) and schema.get("x-kubernetes-preserve-unknown-fields"):
        _skip_prune(value, schema, path, unknown, root=root)
        return
    if isinstance(value, dict):
        if not isinstance(schema, dict):
            for key in list(value):
                unknown.append(path_openapi((*path, ("p", key))))
                del value[key]
            return
        embedded = root or bool(schema.get("x-kubernetes-embedded-resource"))
        props = _props(schema)
        addl = schema.get("additionalProperties")
        for key in list(value):
            child = (*path, ("p", key))
            if embedded and key in ("apiVersion", "kind") and key not in props:
                continue
            if embedded and key == "metadata":
                _prune_metadata(value[key], child, unknown)
                continue
            if key in props:
                _prune(
                    value[key],
                    props[key],
                    child,
                    unknown,
                    root=bool(props[key].get("x-kubernetes-embedded-resource")),
                )
            elif isinstance(addl, dict):
                _prune(
                    value[key], addl, child, unknown, root=bool(addl.get("x-kubernetes-embedded-resource"))
                )
            elif addl is True:
                continue
            else:
                unknown.append(path_openapi(child))
                del value[key]
    elif isinstance(value, list):
        items = _items(schema)
        for idx, item in enumerate(value):
            _prune(
                item,
                items,
                (*path, ("i", idx)),
                unknown,
                root=bool(items and items.get("x-kubernetes-embedded-resource")),
            )


def _skip_prune(value: Any, schema: dict, path: Path, unknown: list[str], *, root: bool = False) -> None:
    if isinstance(value, dict):
        embedded = root or bool(schema.get("x-kubernetes-embedded-resource"))
        props = _props(schema)
        addl = _addl(schema)
        for key in list(value):
            child = (*path, ("p", key))
            if embedded and key == "metadata":
                _prune_metadata(value[key], child, unknown)
                continue
            if embedded and key in ("apiVersion", "kind"):
                continue
            if key in props:
                _prune(
                    value[key],
                    props[key],
                    child,
                    unknown,
                    root=bool(props[key].get("x-kubernetes-embedded-resource")),
                )
            elif addl is not None:
                _prune(
                    value[key], addl, child, unknown, root=bool(addl.get("x-kubernetes-embedded-resource"))
                )
    elif isinstance(value, list):
        items = _items(schema)
        if items is None:
            return
        for idx, item in enumerate(value):
            _skip_prune(
                item,
                items,
                (*path, ("i", idx)),
                unknown,
                root=bool(items.get("x-kubernetes-embedded-resource")),
            )


def _prune_nulls(value: Any, schema: dict | None) -> None:
    """structuraldefaulting.PruneNonNullableNullsWithoutDefaults."""
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        props = _props(schema)
        addl = _addl(schema)
        for key in list(value):
            sub = props.get(key) if key in props else addl
            if sub is None:
                continue
            if value[key] is None and "default" not in sub and not sub.get("nullable"):
                del value[key]
                continue
            _prune_nulls(value[key], sub)
    elif isinstance(value, list):
        items = _items(schema)
        for item in value:
            _prune_nulls(item, items)


# --------------------------------------------------------------------------------------------
# 2. Defaulting
# --------------------------------------------------------------------------------------------


def _is_non_nullable_null(value: Any, schema: dict | None) -> bool:
    return value is None and isinstance(schema, dict) and "default" in schema and not schema.get("nullable")


def _default(value: Any, schema: dict | None) -> None:
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        props = _props(schema)
        for key, sub in props.items():
            if not isinstance(sub, dict) or "default" not in sub:
                continue
            if key not in value or _is_non_nullable_null(value[key], sub):
                value[key] = copy.deepcopy(sub["default"])
        addl = _addl(schema)
        for key in list(value):
            if key in props:
                _default(value[key], props[key])
            elif addl is not None:
                if _is_non_nullable_null(value[key], addl):
                    value[key] = copy.deepcopy(addl["default"])
                _default(value[key], addl)
    elif isinstance(value, list):
        items = _items(schema)
        for idx in range(len(value)):
            if _is_non_nullable_null(value[idx], items):
                value[idx] = copy.deepcopy(items["default"])  # type: ignore[index]
            _default(value[idx], items)


# --------------------------------------------------------------------------------------------
# 3a. OpenAPI validation (kube-openapi semantics and messages)
# --------------------------------------------------------------------------------------------

_DATE_TIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:?\d{2})$"
)
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_DURATION = re.compile(
    r"^[+-]?(\d+(\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s|m|h|d|w|"
    r"nanoseconds?|microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?)"
    r"(\s*(\d+(\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s|m|h|d|w|"
    r"nanoseconds?|microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?))*$"
)
_UUID = re.compile(
    r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?([0-9a-fA-F])[0-9a-fA-F]{3}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
)
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
_HOSTNAME = re.compile(
    r"^[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)*$"
)
_MAC = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{4}\.){2}[0-9A-Fa-f]{4}$")
_HEXCOLOR = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_RGBCOLOR = re.compile(r"^rgb\(\s*\d{1,3}\s*,\s*\d{1,3}\s*,\s*\d{1,3}\s*\)$")
_BSON = re.compile(r"^[0-9a-fA-F]{24}$")


def _valid_date(y: str, m: str, d: str) -> bool:
    try:
        datetime.date(int(y), int(m), int(d))
    except ValueError:
        return False
    return True


def _format_ok(fmt: str, value: str) -> bool:
    if fmt in ("date-time", "datetime"):
        match = _DATE_TIME.match(value)
        return (
            bool(match)
            and _valid_date(*match.groups()[:3])
            and int(match.group(4)) < 24
            and int(match.group(5)) < 60
            and int(match.group(6)) < 61
        )
    if fmt == "date":
        match = _DATE.match(value)
        return bool(match) and _valid_date(*match.groups())
    if fmt == "duration":
        return bool(_DURATION.match(value))
    if fmt == "byte":
        try:
            base64.b64decode(value, validate=True)
        except ValueError:
            return False
        return True
    if fmt in ("uuid", "uuid3", "uuid4", "uuid5"):
        match = _UUID.match(value)
        if not match:
            return False
        return fmt == "uuid" or match.group(1) == fmt[-1]
    if fmt == "email":
        return bool(_EMAIL.match(value))
    if fmt == "hostname":
        return len(value) <= 255 and bool(_HOSTNAME.match(value))
    if fmt == "ipv4":
        try:
            return isinstance(ipaddress.ip_address(value), ipaddress.IPv4Address)
        except ValueError:
            return False
    if fmt == "ipv6":
        try:
            return isinstance(ipaddress.ip_address(value), ipaddress.IPv6Address)
        except ValueError:
            return False
    if fmt == "cidr":
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            return False
        return "/" in value
    if fmt == "mac":
        return bool(_MAC.match(value))
    if fmt == "uri":
        return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*:", value))
    if fmt == "hexcolor":
        return bool(_HEXCOLOR.match(value))
    if fmt == "rgbcolor":
        return bool(_RGBCOLOR.match(value))
    if fmt == "bsonobjectid":
        return bool(_BSON.match(value))
    return True  # formats Kubernetes strips (int32, int64, float, double, password, ...) or unknown


_PATTERN_CACHE: dict[str, Any] = {}


def _pattern_search(pattern: str, value: str) -> bool:
    compiled = _PATTERN_CACHE.get(pattern)
    if compiled is None:
        try:
            import re2

            compiled = re2.compile(pattern)
        except Exception:  # noqa: BLE001 - fall back to Python's engine
            try:
                compiled = re.compile(pattern)
            except re.error:
                return True
        _PATTERN_CACHE[pattern] = compiled
    return compiled.search(value) is not None


@dataclass
class _Ctx:
    ratchet: bool = False


def _type_list(schema: dict) -> list[str]:
    if schema.get("x-kubernetes-int-or-string"):
        return ["integer", "string"]
    typ = schema.get("type")
    return [typ] if isinstance(typ, str) and typ else []


def _type_ok(types: list[str], value: Any) -> bool:
    actual = _json_type(value)
    if actual in types:
        return True
    if actual == "number" and "integer" in types and float(value).is_integer():
        return True
    return actual == "integer" and "number" in types


def _validate(value: Any, schema: dict, path: Path, old: Any, errs: list[_Err], ctx: _Ctx) -> None:
    start = len(errs)
    _validate_node(value, schema, path, old, errs, ctx)
    if ctx.ratchet and old is not _MISSING and json_equal(value, old):
        del errs[start:]


def _validate_node(value: Any, schema: dict, path: Path, old: Any, errs: list[_Err], ctx: _Ctx) -> None:
    name = path_openapi(path)
    fpath = path_openapi(path) or "<nil>"
    types = _type_list(schema)

    if value is None:
        if types and not schema.get("nullable"):
            errs.append(
                _Err(
                    "FieldValueTypeInvalid",
                    fpath,
                    "null",
                    f'{name} in body must be of type {",".join(types)}: "null"',
                )
            )
        enum = schema.get("enum")
        if enum and not schema.get("nullable") and not any(e is None for e in enum):
            errs.append(_enum_error(fpath, value, enum))
        return

    # type validator
    if types and not _type_ok(types, value):
        actual = _json_type(value)
        errs.append(
            _Err(
                "FieldValueTypeInvalid",
                fpath,
                actual,
                f'{name} in body must be of type {",".join(types)}: "{actual}"',
            )
        )

    # schema props validator (allOf / anyOf / oneOf / not)
    for sub in schema.get("allOf") or []:
        if isinstance(sub, dict):
            _validate_node(value, sub, path, old, errs, ctx)
    any_of = [s for s in schema.get("anyOf") or [] if isinstance(s, dict)]
    if any_of and not any(_passes(value, s, path) for s in any_of):
        errs.append(
            _Err("FieldValueInvalid", fpath, "", f"{name} in body must validate at least one schema (anyOf)")
        )
    one_of = [s for s in schema.get("oneOf") or [] if isinstance(s, dict)]
    if one_of and sum(1 for s in one_of if _passes(value, s, path)) != 1:
        errs.append(
            _Err(
                "FieldValueInvalid",
                fpath,
                "",
                f"{name} in body must validate one and only one schema (oneOf)",
            )
        )
    not_schema = schema.get("not")
    if isinstance(not_schema, dict) and _passes(value, not_schema, path):
        errs.append(
            _Err("FieldValueInvalid", fpath, "", f"{name} in body must not validate the schema (not)")
        )

    # string validator
    if isinstance(value, str):
        length = len(value)  # unicode code points, as utf8.RuneCountInString
        max_length = schema.get("maxLength")
        if isinstance(max_length, int) and length > max_length:
            errs.append(_Err("FieldValueTooLong", fpath, OMIT, f"may not be more than {max_length} bytes"))
        min_length = schema.get("minLength")
        if isinstance(min_length, int) and length < min_length:
            errs.append(
                _Err(
                    "FieldValueInvalid",
                    fpath,
                    value,
                    f"{name} in body should be at least {min_length} chars long",
                )
            )
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and not _pattern_search(pattern, value):
            errs.append(_Err("FieldValueInvalid", fpath, value, f"{name} in body should match '{pattern}'"))
        # format validator
        fmt = schema.get("format")
        if isinstance(fmt, str) and fmt and not _format_ok(fmt, value):
            errs.append(
                _Err(
                    "FieldValueTypeInvalid",
                    fpath,
                    value,
                    f"{name} in body must be of type {fmt}: {go_quote(value)}",
                )
            )

    # number validator
    if _is_number(value):
        _validate_number(value, schema, name, fpath, errs)

    # slice validator
    if isinstance(value, list):
        items = _items(schema)
        if items is not None:
            old_items = _correlate_list(schema, old)
            for idx, item in enumerate(value):
                _validate(item, items, (*path, ("i", idx)), old_items(item, idx), errs, ctx)
        size = len(value)
        min_items = schema.get("minItems")
        if isinstance(min_items, int) and size < min_items:
            errs.append(
                _Err(
                    "FieldValueInvalid", fpath, size, f"{name} in body should have at least {min_items} items"
                )
            )
        max_items = schema.get("maxItems")
        if isinstance(max_items, int) and size > max_items:
            errs.append(_Err("FieldValueTooMany", fpath, size, f"must have at most {max_items} items"))
        if schema.get("uniqueItems"):
            keys = [_json_key(v) for v in value]
            if len(set(keys)) != len(keys):
                errs.append(
                    _Err("FieldValueInvalid", fpath, "", f"{name} in body shouldn't contain duplicates")
                )

    # common validator (enum)
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and not any(json_equal(value, e) for e in enum):
        errs.append(_enum_error(fpath, value, enum))

    # object validator
    if isinstance(value, dict):
        count = len(value)
        min_props = schema.get("minProperties")
        if isinstance(min_props, int) and count < min_props:
            errs.append(
                _Err(
                    "FieldValueInvalid",
                    fpath,
                    count,
                    f"{name} in body should have at least {min_props} properties",
                )
            )
            return
        max_props = schema.get("maxProperties")
        if isinstance(max_props, int) and count > max_props:
            errs.append(_Err("FieldValueTooMany", fpath, count, f"must have at most {max_props} items"))
            return
        props = _props(schema)
        addl = _addl(schema)
        if addl is not None:
            for key, item in value.items():
                if key not in props:
                    _validate(item, addl, (*path, ("k", key)), _child_old(old, key), errs, ctx)
        for key, sub in props.items():
            if key in value and isinstance(sub, dict):
                _validate(value[key], sub, (*path, ("p", key)), _child_old(old, key), errs, ctx)
        for key in schema.get("required") or []:
            if key not in value:
                errs.append(_Err("FieldValueRequired", path_openapi((*path, ("p", key)))))


def _validate_number(value: Any, schema: dict, name: str, fpath: str, errs: list[_Err]) -> None:
    def limit_text(limit: Any) -> str:
        if isinstance(value, int) and _is_number(limit) and float(limit).is_integer():
            return str(int(limit))
        return _num_text(float(limit))

    multiple = schema.get("multipleOf")
    if _is_number(multiple) and multiple > 0:
        quotient = Decimal(repr(value)) / Decimal(repr(multiple))
        if quotient != quotient.to_integral_value():
            errs.append(
                _Err(
                    "FieldValueInvalid",
                    fpath,
                    value,
                    f"{name} in body should be a multiple of {_num_text(multiple)}",
                )
            )
    maximum = schema.get("maximum")
    if _is_number(maximum):
        if schema.get("exclusiveMaximum") and value >= maximum:
            errs.append(
                _Err(
                    "FieldValueInvalid",
                    fpath,
                    value,
                    f"{name} in body should be less than {limit_text(maximum)}",
                )
            )
        elif value > maximum:
            errs.append(
                _Err(
                    "FieldValueInvalid",
                    fpath,
                    value,
                    f"{name} in body should be less than or equal to {limit_text(maximum)}",
                )
            )
    minimum = schema.get("minimum")
    if _is_number(minimum):
        if schema.get("exclusiveMinimum") and value <= minimum:
            errs.append(
                _Err(
                    "FieldValueInvalid",
                    fpath,
                    value,
                    f"{name} in body should be greater than {limit_text(minimum)}",
                )
            )
        elif value < minimum:
            errs.append(
                _Err(
                    "FieldValueInvalid",
                    fpath,
                    value,
                    f"{name} in body should be greater than or equal to {limit_text(minimum)}",
                )
            )


def _enum_error(fpath: str, value: Any, enum: list) -> _Err:
    allowed = []
    for item in enum:
        allowed.append(item if isinstance(item, str) else json.dumps(item, separators=(",", ":")))
    detail = "supported values: " + ", ".join(go_quote(a) for a in allowed)
    return _Err("FieldValueNotSupported", fpath, value, detail)


def _passes(value: Any, schema: dict, path: Path) -> bool:
    errs: list[_Err] = []
    _validate_node(value, schema, path, _MISSING, errs, _Ctx())
    return not errs


def _child_old(old: Any, key: str) -> Any:
    if isinstance(old, dict) and key in old:
        return old[key]
    return _MISSING


def _map_keys(schema: dict | None) -> list[str]:
    if not isinstance(schema, dict) or schema.get("x-kubernetes-list-type") != "map":
        return []
    keys = schema.get("x-kubernetes-list-map-keys") or []
    return [k for k in keys if isinstance(k, str)]


def _correlate_list(schema: dict | None, old: Any):
    """Old element for a new list element: by map keys for ``list-type: map``, else none."""
    keys = _map_keys(schema)
    if not keys or not isinstance(old, list):
        return lambda item, idx: _MISSING
    index: dict[str, Any] = {}
    for element in old:
        if isinstance(element, dict):
            index.setdefault(_json_key([element.get(k) for k in keys]), element)

    def lookup(item: Any, idx: int) -> Any:
        if not isinstance(item, dict):
            return _MISSING
        return index.get(_json_key([item.get(k) for k in keys]), _MISSING)

    return lookup


# --------------------------------------------------------------------------------------------
# Structural walk (embedded resources, list types, CEL)
# --------------------------------------------------------------------------------------------


@dataclass
class _Node:
    value: Any
    schema: dict
    path: Path
    old: Any  # _MISSING when not correlatable
    unchanged: bool  # ratcheting: the nearest correlatable node (this or an ancestor) is unchanged
    root: bool


def _walk(value: Any, schema: dict, path: Path, old: Any, unchanged: bool, root: bool) -> Iterator[_Node]:
    if old is not _MISSING:
        unchanged = json_equal(value, old)
    yield _Node(value, schema, path, old, unchanged, root)
    if isinstance(value, dict):
        props = _props(schema)
        addl = _addl(schema)
        for key, item in value.items():
            if key in props and isinstance(props[key], dict):
                sub = props[key]
                yield from _walk(
                    item,
                    sub,
                    (*path, ("p", key)),
                    _child_old(old, key),
                    unchanged,
                    bool(sub.get("x-kubernetes-embedded-resource")),
                )
            elif addl is not None and key not in props:
                yield from _walk(
                    item,
                    addl,
                    (*path, ("k", key)),
                    _child_old(old, key),
                    unchanged,
                    bool(addl.get("x-kubernetes-embedded-resource")),
                )
    elif isinstance(value, list):
        items = _items(schema)
        if items is not None:
            lookup = _correlate_list(schema, old)
            for idx, item in enumerate(value):
                yield from _walk(
                    item,
                    items,
                    (*path, ("i", idx)),
                    lookup(item, idx),
                    unchanged,
                    bool(items.get("x-kubernetes-embedded-resource")),
                )


def _embedded_errors(nodes: list[_Node]) -> list[_Err]:
    errs: list[_Err] = []
    for node in nodes:
        if not (node.root and node.path) or not isinstance(node.value, dict):
            continue
        for key in ("apiVersion", "kind"):
            child = path_field((*node.path, ("p", key)))
            if key not in node.value:
                errs.append(_Err("FieldValueRequired", child, OMIT, "must not be empty"))
            elif not isinstance(node.value[key], str):
                errs.append(_Err("FieldValueInvalid", child, node.value[key], "must be a string"))
            elif not node.value[key]:
                errs.append(_Err("FieldValueInvalid", child, node.value[key], "must not be empty"))
    return errs


def _list_type_errors(nodes: list[_Node]) -> list[_Err]:
    errs: list[_Err] = []
    for node in nodes:
        if not isinstance(node.value, list):
            continue
        list_type = node.schema.get("x-kubernetes-list-type")
        if list_type == "set":
            seen: set[str] = set()
            for idx, item in enumerate(node.value):
                key = _json_key(item)
                if key in seen:
                    errs.append(_Err("FieldValueDuplicate", path_field((*node.path, ("i", idx))), item))
                seen.add(key)
        elif list_type == "map":
            keys = _map_keys(node.schema)
            seen_keys: set[str] = set()
            for idx, item in enumerate(node.value):
                item_path = (*node.path, ("i", idx))
                if not isinstance(item, dict):
                    errs.append(
                        _Err(
                            "FieldValueInvalid",
                            path_field(item_path),
                            item,
                            "must be an object for an array of list-type map",
                        )
                    )
                    continue
                missing = [k for k in keys if k not in item]
                for key in missing:
                    errs.append(_Err("FieldValueRequired", path_field((*item_path, ("p", key)))))
                if missing:
                    continue
                key = _json_key([item[k] for k in keys])
                if key in seen_keys:
                    errs.append(
                        _Err("FieldValueDuplicate", path_field(item_path), {k: item[k] for k in keys})
                    )
                seen_keys.add(key)
    return errs


def _rule_field_path(field_path: str, schema: dict) -> Path:
    """Parse a rule's ``fieldPath`` (``.a.b``, ``['a.b']``) relative to ``schema``."""
    out: list = []
    current: dict | None = schema
    tokens = re.findall(r"\.([^.\[\]]+)|\[\s*'((?:[^'\\]|\\.)*)'\s*\]", field_path or "")
    for dotted, quoted in tokens:
        name = dotted or re.sub(r"\\(.)", r"\1", quoted)
        props = _props(current)
        if props:
            out.append(("p", name))
            current = props.get(name) if isinstance(props.get(name), dict) else None
        elif _addl(current) is not None:
            out.append(("k", name))
            current = _addl(current)
        else:
            out.append(("p", name))
            current = None
    return tuple(out)


def _rule_errors(
    node: _Node, rules: list, errs: list[_Err], warnings: list[str], *, ratchet: bool, allow_ratchet: bool
) -> None:
    schema_type = "object" if node.root else (node.schema.get("type") or "")
    fpath = path_field(node.path)
    has_old = node.old is not _MISSING and node.old is not None
    converted: dict[str, Any] = {}

    def variables(program: cel.Program, optional_old: bool) -> dict[str, Any]:
        if "self" not in converted:
            converted["self"] = cel.to_cel(node.value, node.schema, root=node.root)
        bound = {"self": converted["self"]}
        if program.uses_old_self or optional_old:
            if has_old and "oldSelf" not in converted:
                converted["oldSelf"] = cel.to_cel(node.old, node.schema, root=node.root)
            if optional_old:
                bound["oldSelf"] = (
                    cel.CelOptional(converted["oldSelf"], True) if has_old else cel.CelOptional()
                )
            elif has_old:
                bound["oldSelf"] = converted["oldSelf"]
        return bound

    for rule in rules:
        if not isinstance(rule, dict) or not rule.get("rule"):
            continue
        source = rule["rule"]
        message = (rule.get("message") or "").strip()
        rule_text = message or source.strip()
        try:
            program = cel.compile_rule(source)
        except cel.CELError as exc:
            errs.append(_Err("FieldValueInvalid", fpath, schema_type, f"rule compile error: {exc.message}"))
            continue
        optional_old = bool(rule.get("optionalOldSelf"))
        if program.uses_old_self and not has_old and not optional_old:
            continue  # transition rules run only when there is a correlatable old value
        if ratchet and allow_ratchet and not program.uses_old_self and node.unchanged:
            continue  # ratcheting: an unchanged value cannot newly fail; skip the (slow) evaluation
        try:
            result = program.run(variables(program, optional_old))
        except cel.CELError as exc:
            if exc.message.startswith("no such overload"):
                detail = (
                    f"'{exc.message}': call arguments did not match a supported operator, "
                    f"function or macro signature for rule: {rule_text}"
                )
            else:
                detail = f"{exc.message} evaluating rule: {rule_text}"
            errs.append(_Err("FieldValueInvalid", fpath, schema_type, detail))
            continue
        if not isinstance(result, cel.celtypes.BoolType):
            errs.append(
                _Err(
                    "FieldValueInvalid",
                    fpath,
                    schema_type,
                    f"rule compile error: rule must evaluate to a bool: {rule_text}",
                )
            )
            continue
        if result:
            continue
        err_path = fpath
        if rule.get("fieldPath"):
            err_path = path_field((*node.path, *_rule_field_path(rule["fieldPath"], node.schema)))
        detail = _message_expression(rule, variables(program, False)) or (
            message or f"failed rule: {source.strip()}"
        )
        value = OMIT if schema_type in ("object", "array") else node.value
        reason = rule.get("reason")
        if reason == "FieldValueForbidden":
            err = _Err("FieldValueForbidden", err_path, OMIT, detail)
        elif reason == "FieldValueRequired":
            err = _Err("FieldValueRequired", err_path, OMIT, detail)
        elif reason == "FieldValueDuplicate":
            err = _Err("FieldValueDuplicate", err_path, value, "")
        else:
            err = _Err("FieldValueInvalid", err_path, value, detail)
        if allow_ratchet and ratchet and not program.uses_old_self and node.unchanged:
            warnings.append(err.error())
        else:
            errs.append(err)


def _message_expression(rule: dict, variables: dict[str, Any]) -> str | None:
    """Evaluate ``messageExpression``; None means "use message" (as on any failure upstream)."""
    expression = rule.get("messageExpression")
    if not expression:
        return None
    try:
        program = cel.compile_rule(expression)
        bound = dict(variables)
        if program.uses_old_self and "oldSelf" not in bound:
            return None
        result = program.run(bound)
    except cel.CELError:
        return None
    if not isinstance(result, str):
        return None
    text = str(result).strip()
    if not text or "\n" in text or len(text.encode()) > 5000:
        return None
    return text


def _cel_errors(nodes: list[_Node], *, ratchet: bool) -> tuple[list[_Err], list[str]]:
    errs: list[_Err] = []
    warnings: list[str] = []
    for node in nodes:
        if node.value is None:
            continue
        rules = node.schema.get("x-kubernetes-validations")
        if rules:
            _rule_errors(node, rules, errs, warnings, ratchet=ratchet, allow_ratchet=True)
        for sub in node.schema.get("allOf") or []:
            if isinstance(sub, dict) and sub.get("x-kubernetes-validations"):
                _rule_errors(
                    node,
                    sub["x-kubernetes-validations"],
                    errs,
                    warnings,
                    ratchet=ratchet,
                    allow_ratchet=False,
                )
    return errs, warnings


# --------------------------------------------------------------------------------------------
# CRD creation: rule compilation (what the real server checks when a CRD is created/updated)
# --------------------------------------------------------------------------------------------


def _schema_nodes(schema: Any, path: str, root: bool) -> Iterator[tuple[dict, str, bool]]:
    if not isinstance(schema, dict):
        return
    yield schema, path, root
    for key, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict):
            yield from _schema_nodes(
                sub, f"{path}.properties[{key}]", bool(sub.get("x-kubernetes-embedded-resource"))
            )
    for key in ("items", "additionalProperties"):
        sub = schema.get(key)
        if isinstance(sub, dict):
            yield from _schema_nodes(sub, f"{path}.{key}", bool(sub.get("x-kubernetes-embedded-resource")))
    for idx, sub in enumerate(schema.get("allOf") or []):
        if isinstance(sub, dict):
            yield from _schema_nodes(sub, f"{path}.allOf[{idx}]", False)


def crd_rule_problems(crd: dict) -> list[dict]:
    """Causes the real API server would reject a CRD with because of its CEL rules.

    Checks every ``x-kubernetes-validations`` rule (and ``messageExpression``) of every version:
    syntax, and selections of fields the schema does not expose to CEL (``undefined field``,
    e.g. an untyped ``x-kubernetes-preserve-unknown-fields`` property). Returns
    ``{"field", "message", "reason"}`` causes (empty when the CRD is fine); partial: cel-go's
    full type check and cost estimation are not reproduced.
    """
    problems: list[dict] = []
    for vidx, version in enumerate((crd.get("spec") or {}).get("versions") or []):
        schema = ((version.get("schema") or {}).get("openAPIV3Schema")) or None
        base = f"spec.versions[{vidx}].schema.openAPIV3Schema"
        for node, path, root in _schema_nodes(schema, base, True):
            for ridx, rule in enumerate(node.get("x-kubernetes-validations") or []):
                if not isinstance(rule, dict):
                    continue
                for key in ("rule", "messageExpression"):
                    source = rule.get(key)
                    if not source:
                        continue
                    field_path = f"{path}.x-kubernetes-validations[{ridx}].{key}"
                    try:
                        cel.compile_rule(source)
                    except cel.CELError as exc:
                        problems.append(_Err("FieldValueInvalid", field_path, source, exc.message).cause())
                        continue
                    undefined = cel.undefined_fields(source, node, root=root)
                    if undefined:
                        detail = "compilation failed: " + "\n".join(undefined)
                        problems.append(_Err("FieldValueInvalid", field_path, source, detail).cause())
    return problems


def check_crd_rules(crd: dict) -> None:
    """Raise `FieldError` (as the real server does for the CRD) when `crd_rule_problems` finds any."""
    causes = crd_rule_problems(crd)
    if not causes:
        return
    name = str((crd.get("metadata") or {}).get("name") or "")
    texts = []
    for cause in causes:
        text = f"{cause['field']}: {cause['message']}"
        if text not in texts:
            texts.append(text)
    aggregate = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    raise FieldError(
        f"CustomResourceDefinition.apiextensions.k8s.io {go_quote(name)} is invalid: {aggregate}",
        causes=causes,
        kind="CustomResourceDefinition",
        group="apiextensions.k8s.io",
        name=name,
    )


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


@dataclass
class _Names:
    kind: str
    group: str
    name: str
    version: str


def admit_custom_object(
    crd: dict,
    version: str,
    obj: dict,
    old: dict | None,
    *,
    field_validation: str = "Strict",
    ratcheting: bool = True,
) -> tuple[dict, list[str]]:
    """Prune, default and validate a custom object; return ``(object, warnings)``.

    ``crd`` is the stored apiextensions.k8s.io/v1 CustomResourceDefinition, ``version`` the
    version ``obj`` is expressed in, ``old`` the stored object on UPDATE (None on CREATE).
    ``field_validation`` is the request's ``fieldValidation`` (``Strict``, ``Warn``,
    ``Ignore``; kubectl defaults to Strict, most clients send nothing and the server then
    uses Warn: pass what the request says, or ``"Warn"`` when absent). ``ratcheting=False``
    disables update ratcheting (older servers). Raises `FieldError`. Inputs are not mutated.
    """
    names = _Names(
        kind=((crd.get("spec") or {}).get("names") or {}).get("kind", ""),
        group=(crd.get("spec") or {}).get("group", ""),
        name=str(((obj or {}).get("metadata") or {}).get("name") or ""),
        version=version,
    )
    schema = version_schema(crd, version)
    result = copy.deepcopy(obj)
    warnings: list[str] = []
    if schema is None:
        return result, warnings

    # 1. pruning (the decoder)
    unknown: list[str] = []
    _prune(result, schema, (), unknown, root=True)
    unknown = sorted(set(unknown))
    mode = (field_validation or "Warn").strip()
    if unknown and mode == "Strict":
        listed = ", ".join(f"unknown field {go_quote(p)}" for p in unknown)
        raise FieldError(
            f"{names.kind} in version {go_quote(version)} cannot be handled as a {names.kind}: "
            f"strict decoding error: {listed}",
            causes=[
                {"reason": "FieldValueInvalid", "message": f"unknown field {go_quote(p)}", "field": p}
                for p in unknown
            ],
            status=400,
            reason="BadRequest",
            kind=names.kind,
            group=names.group,
            name=names.name,
            details=False,
        )
    if unknown and mode == "Warn":
        warnings.extend(f"unknown field {go_quote(p)}" for p in unknown)

    # 2. defaulting
    _prune_nulls(result, schema)
    _default(result, schema)
    leftover: list[str] = []
    _prune(
        result, schema, (), leftover, root=True
    )  # defaults are pruned too (real CRDs reject such defaults)

    # 3. validation
    update = old is not None
    ratchet = ratcheting and update
    old_root = copy.deepcopy(old) if update else _MISSING
    errs: list[_Err] = []
    _validate(result, schema, (), old_root if ratchet else _MISSING, errs, _Ctx(ratchet=ratchet))

    nodes = list(_walk(result, schema, (), old_root, False, True))
    errs.extend(_embedded_errors(nodes))
    list_errs = _list_type_errors(nodes)
    if ratchet and list_errs:
        old_nodes = list(_walk(old_root, schema, (), _MISSING, False, True))
        already = {e.error() for e in _list_type_errors(old_nodes)}
        list_errs = [e for e in list_errs if e.error() not in already]
    errs.extend(list_errs)

    if any(e.type in _BLOCKING for e in errs):
        errs.append(_Err("FieldValueInvalid", "<nil>", None, _BLOCKED_NOTE))
    else:
        cel_errs, cel_warnings = _cel_errors(nodes, ratchet=ratchet)
        errs.extend(cel_errs)
        warnings.extend(cel_warnings)

    if errs:
        raise _invalid(names.kind, names.group, names.name, errs)
    return result, warnings

"""Kubernetes-flavoured CEL for the test API server, on top of cel-python.

The real API server evaluates CRD ``x-kubernetes-validations`` rules and
admission ``matchConditions`` with cel-go plus the Kubernetes CEL libraries.
This module runs the same expressions with cel-python (``celpy``) and adds
shims for what cel-python lacks and CRD authors use:

- cel-go string extensions: ``charAt``, ``indexOf``, ``lastIndexOf``,
  ``lowerAscii``, ``upperAscii``, ``replace``, ``split``, ``substring``,
  ``trim``, ``join``, ``reverse``, ``format`` (``%s %d %f %e %x %X %o %b %%``);
- Kubernetes list library: ``isSorted``, ``sum``, ``min`` (cel-python's own
  macro), ``max``, ``indexOf``, ``lastIndexOf``; cel-go list extensions
  ``slice``, ``flatten``, ``distinct``, ``sort``, ``reverse``;
- Kubernetes regex library: ``find``, ``findAll``;
- Kubernetes URL library: ``url``, ``isURL``, ``getScheme``, ``getHost``,
  ``getHostname``, ``getPort``, ``getEscapedPath``, ``getQuery``;
- Kubernetes quantity library: ``quantity``, ``isQuantity``, ``isInteger``,
  ``asInteger``, ``asApproximateFloat``, ``sign``, ``add``, ``sub``,
  ``isGreaterThan``, ``isLessThan``, ``compareTo``;
- optionals: ``optional.of``, ``optional.none``, ``optional.ofNonZeroValue``,
  ``hasValue``, ``value``, ``orValue``, ``or`` (``oldSelf`` is an optional for
  rules with ``optionalOldSelf: true``); the ``.?field`` / ``[?key]`` syntax is
  *not* supported (cel-python's grammar has no optional selection);
- sets: ``sets.contains``, ``sets.equivalent``, ``sets.intersects``;
- heterogeneous equality as in cel-go: ``1 == 1.0`` is true and values of
  different types compare unequal instead of raising.

Values are converted from JSON to CEL following the structural schema, as the
API server does: ``integer`` -> int, ``number`` -> double (even for ``1``),
``string`` with ``format: date-time``/``date`` -> timestamp, ``duration`` ->
duration, ``byte`` -> bytes; objects with ``properties`` expose only declared
properties under Kubernetes' escaped names (``foo-bar`` -> ``foo__dash__bar``,
``namespace`` -> ``__namespace__``). `undefined_fields` is the static part of
cel-go's type check that matters most for CRDs: selecting a field the schema
does not expose to CEL (undeclared, or declared without a type such as an
untyped ``x-kubernetes-preserve-unknown-fields`` property, or
``metadata.labels`` at a resource root) is a compile error upstream, so the
CRD itself is rejected.

Not enforced: CEL cost limits and budgets, static type checking (a rule the
real server would reject at CRD creation may evaluate here), the exact cel-go
error texts (runtime errors are mapped to cel-go-like messages where known).
"""

from __future__ import annotations

import base64
import datetime
import functools
import ipaddress
import math
import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import celpy
import lark
import re2
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, CELUnsupportedError

__all__ = [
    "NO_OLD",
    "undefined_fields",
    "CELError",
    "CelOptional",
    "Program",
    "Quantity",
    "compile_rule",
    "evaluate",
    "evaluate_expression",
    "from_cel",
    "to_cel",
]


class CELError(Exception):
    """A rule failed to compile or to evaluate (not: evaluated to false)."""

    def __init__(self, message: str, *, rule: str | None = None, compile_error: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.rule = rule
        self.compile_error = compile_error


class _NoOld:
    _instance: _NoOld | None = None

    def __new__(cls) -> _NoOld:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_OLD"

    def __bool__(self) -> bool:
        return False


NO_OLD: Any = _NoOld()
"""Sentinel for "no old value": ``oldSelf`` is not bound (or is ``optional.none()``)."""


# --------------------------------------------------------------------------------------------
# Value model helpers
# --------------------------------------------------------------------------------------------

_NUMERIC = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)


class _Fail(Exception):
    """Raised inside a shim; turned into a CEL evaluation error."""


def _cel_error(message: str) -> CELEvalError:
    return CELEvalError(message, _Fail, (message,))


def _shim(fn):
    """Run a shim, turning `_Fail` (and Python errors) into CEL errors with a clear text."""

    @functools.wraps(fn)
    def wrapper(*args):
        for arg in args:
            if isinstance(arg, CELEvalError):
                return arg
        try:
            return fn(*args)
        except _Fail as exc:
            return _cel_error(str(exc))
        except TypeError as exc:
            return _cel_error(f"no such overload: {fn.__name__.lstrip('_')}: {exc}")

    return wrapper


def _is_num(value: Any) -> bool:
    return isinstance(value, (*_NUMERIC, int, float)) and not isinstance(value, (bool, celtypes.BoolType))


def _wrap(value: Any) -> Any:
    """Python value -> CEL value (already CEL values pass through)."""
    if value is None or isinstance(
        value,
        (
            celtypes.BoolType,
            celtypes.IntType,
            celtypes.UintType,
            celtypes.DoubleType,
            celtypes.StringType,
            celtypes.BytesType,
            celtypes.ListType,
            celtypes.MapType,
            celtypes.TimestampType,
            celtypes.DurationType,
            CelOptional,
            Quantity,
            _URL,
        ),
    ):
        return value
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        # The API server decodes JSON integers beyond int64 as float64, as Go does.
        if not -(2**63) <= value < 2**63:
            return celtypes.DoubleType(float(value))
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, bytes):
        return celtypes.BytesType(value)
    if isinstance(value, dict):
        return celtypes.MapType({_wrap(k): _wrap(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return celtypes.ListType([_wrap(v) for v in value])
    if isinstance(value, datetime.datetime):
        return celtypes.TimestampType(value)
    if isinstance(value, datetime.timedelta):
        return celtypes.DurationType(value)
    return value


def from_cel(value: Any) -> Any:
    """CEL value -> plain Python/JSON value (timestamps as RFC 3339 strings)."""
    if isinstance(value, CelOptional):
        return from_cel(value.value) if value.has_value else None
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, (celtypes.IntType, celtypes.UintType)):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, celtypes.BytesType):
        return bytes(value)
    if isinstance(value, celtypes.TimestampType):
        return value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, celtypes.DurationType):
        return datetime.timedelta(days=value.days, seconds=value.seconds, microseconds=value.microseconds)
    if isinstance(value, dict):
        return {from_cel(k): from_cel(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [from_cel(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------
# Schema-driven conversion (apiextensions UnstructuredToVal)
# --------------------------------------------------------------------------------------------

_RESERVED = frozenset(
    [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ]
)
_IDENT = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
_ESCAPABLE = re.compile(r"^[_a-zA-Z./\-][_a-zA-Z0-9./\-]*$")


def escape_property_name(name: str) -> str | None:
    """Kubernetes' CEL property name escaping; None when the name is not accessible."""
    if name in _RESERVED:
        return f"__{name}__"
    if not _ESCAPABLE.match(name):
        return None
    out = name.replace("__", "__underscores__")
    out = out.replace(".", "__dot__").replace("-", "__dash__").replace("/", "__slash__")
    return out if _IDENT.match(out) else None


def _parse_rfc3339(value: str) -> celtypes.TimestampType:
    return celtypes.TimestampType(value)


def to_cel(value: Any, schema: dict | None = None, *, root: bool = False) -> Any:
    """Convert a JSON value to CEL following an (apiextensions v1) structural schema.

    ``root=True`` marks the root of a resource (or of an x-kubernetes-embedded-resource), whose
    ``apiVersion``, ``kind`` and ``metadata`` are kept even when the schema does not declare them.
    Declared properties are converted by their schema under their escaped names; undeclared
    (preserved) fields are kept as dynamic data so that ``==`` and ``size()`` behave like the
    real server's unstructured equality. The real server refuses, at CRD creation, rules that
    *select* undeclared fields (``undefined field``): use `undefined_fields` to find those.
    """
    if value is None:
        return None
    if schema is None:
        return _wrap(value)
    if schema.get("x-kubernetes-int-or-string"):
        return _wrap(value)
    typ = schema.get("type")
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, (int, float)):
        if typ == "number":
            return celtypes.DoubleType(float(value))
        if typ == "integer" and (isinstance(value, int) or float(value).is_integer()) \
                and -(2**63) <= int(value) < 2**63:
            return celtypes.IntType(int(value))
        return _wrap(value)
    if isinstance(value, str):
        fmt = schema.get("format")
        try:
            if typ == "string" and fmt in ("date-time", "datetime"):
                return _parse_rfc3339(value)
            if typ == "string" and fmt == "date":
                return celtypes.TimestampType(value + "T00:00:00Z")
            if typ == "string" and fmt == "duration":
                return celtypes.DurationType(value)
            if typ == "string" and fmt == "byte":
                return celtypes.BytesType(base64.b64decode(value, validate=True))
        except Exception:  # noqa: BLE001 - an unparsable value stays a string (schema validation reports it)
            return celtypes.StringType(value)
        return celtypes.StringType(value)
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema.get("items"), dict) else None
        embedded = bool(items and items.get("x-kubernetes-embedded-resource"))
        return celtypes.ListType([to_cel(v, items, root=embedded) for v in value])
    if isinstance(value, dict):
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        embedded = root or bool(schema.get("x-kubernetes-embedded-resource"))
        if props is None and isinstance(addl, dict):
            sub_embedded = bool(addl.get("x-kubernetes-embedded-resource"))
            return celtypes.MapType(
                {celtypes.StringType(k): to_cel(v, addl, root=sub_embedded) for k, v in value.items()}
            )
        if props is None and not embedded:
            # x-kubernetes-preserve-unknown-fields without properties, or additionalProperties: true:
            # the content is exposed as dynamic data.
            return _wrap(value)
        out: dict = {}
        for key, item in value.items():
            if props is not None and key in props and isinstance(props[key], dict):
                escaped = escape_property_name(key)
                if escaped is None:
                    continue
                sub = props[key]
                out[celtypes.StringType(escaped)] = to_cel(
                    item, sub, root=bool(sub.get("x-kubernetes-embedded-resource"))
                )
            else:
                # apiVersion/kind/metadata of a resource root and preserved unknown fields: the real
                # server compares them in ==/size() (unstructured equality), and rejects rules that
                # select them at CRD creation (see `undefined_fields`); here they stay dynamic data.
                out[celtypes.StringType(key)] = _wrap(item)
        return celtypes.MapType(out)
    return _wrap(value)


# --------------------------------------------------------------------------------------------
# Shims: optionals, sets
# --------------------------------------------------------------------------------------------


class CelOptional:
    """A cel-go optional value (``optional.of(x)`` / ``optional.none()``)."""

    __slots__ = ("has_value", "value")

    def __init__(self, value: Any = None, has_value: bool = False) -> None:
        self.value = value
        self.has_value = has_value

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, CelOptional):
            return False
        return self.has_value == other.has_value and (not self.has_value or self.value == other.value)

    def __hash__(self) -> int:
        return hash((self.has_value, repr(self.value)))

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.has_value else "optional.none()"


class _Namespace:
    """Binds a dotted library name (``optional``, ``sets``) as a variable."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_OPTIONAL_NS = _Namespace("optional")
_SETS_NS = _Namespace("sets")


def _is_zero(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, celtypes.BoolType):
        return not bool(value)
    if isinstance(value, (str, bytes, list, dict)):
        return len(value) == 0
    if _is_num(value):
        return value == 0
    if isinstance(value, celtypes.DurationType):
        return value == datetime.timedelta(0)
    return False


@_shim
def _of(ns, value=None):
    if ns is not _OPTIONAL_NS:
        raise _Fail("no such overload: of")
    return CelOptional(value, True)


@_shim
def _none(ns):
    if ns is not _OPTIONAL_NS:
        raise _Fail("no such overload: none")
    return CelOptional()


@_shim
def _of_non_zero_value(ns, value=None):
    if ns is not _OPTIONAL_NS:
        raise _Fail("no such overload: ofNonZeroValue")
    return CelOptional() if _is_zero(value) else CelOptional(value, True)


@_shim
def _has_value(opt):
    if not isinstance(opt, CelOptional):
        raise _Fail("no such overload: hasValue")
    return celtypes.BoolType(opt.has_value)


@_shim
def _value(opt):
    if not isinstance(opt, CelOptional):
        raise _Fail("no such overload: value")
    if not opt.has_value:
        raise _Fail("optional.none() dereference")
    return opt.value


@_shim
def _or_value(opt, default):
    if not isinstance(opt, CelOptional):
        raise _Fail("no such overload: orValue")
    return opt.value if opt.has_value else default


@_shim
def _or(opt, other):
    if not isinstance(opt, CelOptional) or not isinstance(other, CelOptional):
        raise _Fail("no such overload: or")
    return opt if opt.has_value else other


def _elements_equal(a: Any, b: Any) -> bool:
    result = _eq(a, b)
    return bool(result) if not isinstance(result, CELEvalError) else False


@_shim
def _sets_contains(ns, a, b):
    if ns is not _SETS_NS:
        raise _Fail("no such overload: contains")
    return celtypes.BoolType(all(any(_elements_equal(x, y) for y in a) for x in b))


def _contains(container, item=None, *rest):
    """``contains``: ``sets.contains(a, b)`` or the standard ``string.contains`` / list membership."""
    if container is _SETS_NS:
        return _sets_contains(container, item, *rest)
    for arg in (container, item):
        if isinstance(arg, CELEvalError):
            return arg
    try:
        if isinstance(container, str):
            return celtypes.BoolType(str(item) in container)
        return celtypes.BoolType(container.contains(item))
    except (TypeError, AttributeError) as exc:
        return _cel_error(f"no such overload: contains: {exc}")


@_shim
def _sets_equivalent(ns, a, b):
    if ns is not _SETS_NS:
        raise _Fail("no such overload: equivalent")
    return celtypes.BoolType(
        all(any(_elements_equal(x, y) for y in b) for x in a)
        and all(any(_elements_equal(x, y) for y in a) for x in b)
    )


@_shim
def _sets_intersects(ns, a, b):
    if ns is not _SETS_NS:
        raise _Fail("no such overload: intersects")
    return celtypes.BoolType(any(any(_elements_equal(x, y) for y in b) for x in a))


# --------------------------------------------------------------------------------------------
# Shims: heterogeneous equality
# --------------------------------------------------------------------------------------------


def _eq(a: Any, b: Any) -> Any:
    if isinstance(a, CELEvalError):
        return a
    if isinstance(b, CELEvalError):
        return b
    if _is_num(a) and _is_num(b):
        if isinstance(a, float) or isinstance(b, float):
            return celtypes.BoolType(float(a) == float(b))
        return celtypes.BoolType(int(a) == int(b))
    if a is None or b is None:
        return celtypes.BoolType(a is None and b is None)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return celtypes.BoolType(False)
        return celtypes.BoolType(all(_elements_equal(x, y) for x, y in zip(a, b, strict=True)))
    if isinstance(a, dict) and isinstance(b, dict):
        if len(a) != len(b):
            return celtypes.BoolType(False)
        for key, value in a.items():
            if key in b:
                other = b[key]
            else:
                match = [k for k in b if _elements_equal(k, key)]
                if not match:
                    return celtypes.BoolType(False)
                other = b[match[0]]
            if not _elements_equal(value, other):
                return celtypes.BoolType(False)
        return celtypes.BoolType(True)
    if isinstance(a, celtypes.BoolType) != isinstance(b, celtypes.BoolType):
        return celtypes.BoolType(False)
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return celtypes.BoolType(a.value == b.value)
    if type(a) is not type(b) and not (isinstance(a, str) and isinstance(b, str)):
        if isinstance(a, celtypes.TypeType) or isinstance(b, celtypes.TypeType):
            try:
                return celtypes.BoolType(a == b)
            except TypeError:
                return celtypes.BoolType(False)
        return celtypes.BoolType(False)
    try:
        return celtypes.BoolType(a == b)
    except TypeError:
        return celtypes.BoolType(False)


def _ne(a: Any, b: Any) -> Any:
    result = _eq(a, b)
    if isinstance(result, CELEvalError):
        return result
    return celtypes.BoolType(not result)


def _in(item: Any, container: Any) -> Any:
    if isinstance(item, CELEvalError):
        return item
    if isinstance(container, CELEvalError):
        return container
    if isinstance(container, (list, tuple, dict)):
        return celtypes.BoolType(any(_elements_equal(item, x) for x in container))
    return _cel_error("no such overload: in")


# --------------------------------------------------------------------------------------------
# Shims: strings (cel-go ext/strings) and lists
# --------------------------------------------------------------------------------------------

# Go's unicode.IsSpace (strings.TrimSpace), which is narrower than Python's str.isspace.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def _need_str(value: Any, fn: str) -> str:
    if not isinstance(value, str):
        raise _Fail(f"no such overload: {fn}")
    return value


def _need_int(value: Any, fn: str) -> int:
    if not isinstance(value, (celtypes.IntType, int)) or isinstance(value, (bool, celtypes.BoolType)):
        raise _Fail(f"no such overload: {fn}")
    return int(value)


@_shim
def _char_at(s, i):
    s = _need_str(s, "charAt")
    i = _need_int(i, "charAt")
    if i < 0 or i > len(s):
        raise _Fail(f"index out of range: {i}")
    return celtypes.StringType(s[i : i + 1])


@_shim
def _index_of(x, sub, offset=None):
    if isinstance(x, (list, tuple)):
        if offset is not None:
            raise _Fail("no such overload: indexOf")
        for idx, item in enumerate(x):
            if _elements_equal(item, sub):
                return celtypes.IntType(idx)
        return celtypes.IntType(-1)
    s = _need_str(x, "indexOf")
    sub = _need_str(sub, "indexOf")
    if offset is None:
        return celtypes.IntType(s.find(sub))
    start = _need_int(offset, "indexOf")
    if sub == "":
        return celtypes.IntType(start)
    if start < 0 or start >= len(s):
        raise _Fail(f"index out of range: {start}")
    return celtypes.IntType(s.find(sub, start))


@_shim
def _last_index_of(x, sub, offset=None):
    if isinstance(x, (list, tuple)):
        if offset is not None:
            raise _Fail("no such overload: lastIndexOf")
        for idx in range(len(x) - 1, -1, -1):
            if _elements_equal(x[idx], sub):
                return celtypes.IntType(idx)
        return celtypes.IntType(-1)
    s = _need_str(x, "lastIndexOf")
    sub = _need_str(sub, "lastIndexOf")
    if offset is None:
        return celtypes.IntType(s.rfind(sub))
    if sub == s:
        return celtypes.IntType(0)
    end = _need_int(offset, "lastIndexOf")
    if end < 0 or end >= len(s):
        raise _Fail(f"index out of range: {end}")
    end = min(end, len(s) - len(sub))
    if end < 0:
        return celtypes.IntType(-1)
    # the match must start at or before `end`
    return celtypes.IntType(s.rfind(sub, 0, end + len(sub)))


@_shim
def _lower_ascii(s):
    s = _need_str(s, "lowerAscii")
    return celtypes.StringType("".join(c.lower() if "A" <= c <= "Z" else c for c in s))


@_shim
def _upper_ascii(s):
    s = _need_str(s, "upperAscii")
    return celtypes.StringType("".join(c.upper() if "a" <= c <= "z" else c for c in s))


@_shim
def _replace(s, old, new, n=None):
    s = _need_str(s, "replace")
    old = _need_str(old, "replace")
    new = _need_str(new, "replace")
    count = -1 if n is None else _need_int(n, "replace")
    if count == 0:
        return celtypes.StringType(s)
    return celtypes.StringType(s.replace(old, new, count if count > 0 else -1))


@_shim
def _split(s, sep, n=None):
    s = _need_str(s, "split")
    sep = _need_str(sep, "split")
    limit = -1 if n is None else _need_int(n, "split")
    if limit == 0:
        return celtypes.ListType([])
    if sep == "":
        parts = list(s)
        if 0 < limit < len(parts):
            parts = parts[: limit - 1] + ["".join(parts[limit - 1 :])]
    else:
        parts = s.split(sep, limit - 1) if limit > 0 else s.split(sep)
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


@_shim
def _substring(s, start, end=None):
    s = _need_str(s, "substring")
    begin = _need_int(start, "substring")
    stop = len(s) if end is None else _need_int(end, "substring")
    if begin < 0 or begin > len(s):
        raise _Fail(f"index out of range: {begin}")
    if stop < 0 or stop > len(s):
        raise _Fail(f"index out of range: {stop}")
    if begin > stop:
        raise _Fail(f"invalid substring range. start: {begin}, end: {stop}")
    return celtypes.StringType(s[begin:stop])


@_shim
def _trim(s):
    s = _need_str(s, "trim")
    return celtypes.StringType(s.strip(_GO_SPACE))


@_shim
def _join(items, sep=None):
    if not isinstance(items, (list, tuple)):
        raise _Fail("no such overload: join")
    separator = "" if sep is None else _need_str(sep, "join")
    for item in items:
        if not isinstance(item, str):
            raise _Fail("no such overload: join")
    return celtypes.StringType(separator.join(items))


@_shim
def _reverse(x):
    if isinstance(x, str):
        return celtypes.StringType(x[::-1])
    if isinstance(x, (list, tuple)):
        return celtypes.ListType(list(x)[::-1])
    raise _Fail("no such overload: reverse")


_FORMAT_RE = re.compile(r"%(?:\.(\d+))?([sdfexXobq%])")


@_shim
def _format(template, args):
    template = _need_str(template, "format")
    if not isinstance(args, (list, tuple)):
        raise _Fail("no such overload: format")
    values = list(args)
    position = 0

    def render(match: re.Match) -> str:
        nonlocal position
        precision, verb = match.group(1), match.group(2)
        if verb == "%":
            return "%"
        if position >= len(values):
            raise _Fail(f"index {position} out of range")
        value = values[position]
        position += 1
        if verb == "s":
            return _to_string(value)
        if verb == "q":
            return '"' + _to_string(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
        if verb == "d":
            return str(int(value))
        if verb == "f":
            return f"{float(value):.{int(precision) if precision else 6}f}"
        if verb == "e":
            return f"{float(value):.{int(precision) if precision else 6}e}"
        if verb in "xX":
            text = format(int(value), "x") if _is_num(value) else str(value).encode().hex()
            return text.upper() if verb == "X" else text
        if verb == "o":
            return format(int(value), "o")
        if verb == "b":
            return format(int(value), "b")
        raise _Fail(f"unrecognized formatting clause: {verb}")

    return celtypes.StringType(_FORMAT_RE.sub(render, template))


def _to_string(value: Any) -> str:
    if isinstance(value, celtypes.BoolType):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, celtypes.DoubleType):
        return repr(float(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_to_string(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_to_string(k)}: {_to_string(v)}" for k, v in value.items()) + "}"
    if isinstance(value, celtypes.TimestampType):
        return str(from_cel(value))
    return str(value)


def _comparable_list(items: Any, fn: str) -> list:
    if not isinstance(items, (list, tuple)):
        raise _Fail(f"no such overload: {fn}")
    return list(items)


@_shim
def _is_sorted(items):
    values = _comparable_list(items, "isSorted")
    return celtypes.BoolType(all(not (values[i + 1] < values[i]) for i in range(len(values) - 1)))


@_shim
def _sum(items):
    values = _comparable_list(items, "sum")
    if not values:
        return celtypes.IntType(0)
    total = values[0]
    for value in values[1:]:
        total = total + value
    return _wrap(total)


@_shim
def _max(items):
    values = _comparable_list(items, "max")
    if not values:
        raise _Fail("max(list) argument must not be empty")
    best = values[0]
    for value in values[1:]:
        if value > best:
            best = value
    return best


@_shim
def _slice(items, start, end):
    values = _comparable_list(items, "slice")
    begin, stop = _need_int(start, "slice"), _need_int(end, "slice")
    if begin < 0 or stop < 0:
        raise _Fail(f"cannot slice({begin}, {stop}), negative indexes not supported")
    if begin > stop:
        raise _Fail(f"cannot slice({begin}, {stop}), start index must be less than or equal to end index")
    if stop > len(values):
        raise _Fail(f"cannot slice({begin}, {stop}), list is length {len(values)}")
    return celtypes.ListType(values[begin:stop])


@_shim
def _flatten(items, depth=None):
    values = _comparable_list(items, "flatten")
    levels = 1 if depth is None else _need_int(depth, "flatten")
    if levels < 0:
        raise _Fail("level must be non-negative")

    def flat(seq: Iterable, level: int) -> list:
        out: list = []
        for item in seq:
            if isinstance(item, (list, tuple)) and level > 0:
                out.extend(flat(item, level - 1))
            else:
                out.append(item)
        return out

    return celtypes.ListType(flat(values, levels))


@_shim
def _distinct(items):
    values = _comparable_list(items, "distinct")
    out: list = []
    for value in values:
        if not any(_elements_equal(value, seen) for seen in out):
            out.append(value)
    return celtypes.ListType(out)


@_shim
def _sort(items):
    return celtypes.ListType(sorted(_comparable_list(items, "sort")))


# --------------------------------------------------------------------------------------------
# Shims: regex
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _regex(pattern: str):
    try:
        return re2.compile(pattern)
    except re2.error as exc:
        raise _Fail(f"invalid regex: {pattern!r}: {exc}") from exc


@_shim
def _find(s, pattern):
    s = _need_str(s, "find")
    match = _regex(_need_str(pattern, "find")).search(s)
    return celtypes.StringType(match.group(0) if match else "")


@_shim
def _find_all(s, pattern, limit=None):
    s = _need_str(s, "findAll")
    n = -1 if limit is None else _need_int(limit, "findAll")
    if n == 0:
        return celtypes.ListType([])
    out = []
    for match in _regex(_need_str(pattern, "findAll")).finditer(s):
        out.append(celtypes.StringType(match.group(0)))
        if 0 < n <= len(out):
            break
    return celtypes.ListType(out)


# --------------------------------------------------------------------------------------------
# Shims: URLs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _URL:
    raw: str
    parts: urllib.parse.SplitResult


def _parse_url(text: str) -> _URL | None:
    # Go's url.ParseRequestURI: an absolute URI or an absolute path; no fragment allowed.
    if not text or any(ord(c) < 0x21 or c == "\x7f" for c in text) or "#" in text:
        return None
    try:
        parts = urllib.parse.urlsplit(text)
        _ = parts.port  # validates the port
    except ValueError:
        return None
    if parts.scheme:
        if not re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*$", parts.scheme):
            return None
        if not parts.netloc and not parts.path.startswith("/") and not parts.path:
            return None
    elif not text.startswith("/"):
        return None
    return _URL(text, parts)


@_shim
def _url(text):
    parsed = _parse_url(_need_str(text, "url"))
    if parsed is None:
        raise _Fail(f"URL parse error during conversion from string: {text}")
    return parsed


@_shim
def _is_url(text):
    return celtypes.BoolType(_parse_url(_need_str(text, "isURL")) is not None)


def _need_url(value: Any, fn: str) -> _URL:
    if not isinstance(value, _URL):
        raise _Fail(f"no such overload: {fn}")
    return value


@_shim
def _get_scheme(u):
    return celtypes.StringType(_need_url(u, "getScheme").parts.scheme)


@_shim
def _get_host(u):
    return celtypes.StringType(_need_url(u, "getHost").parts.netloc.rpartition("@")[2])


@_shim
def _get_hostname(u):
    host = _need_url(u, "getHostname").parts.netloc.rpartition("@")[2]
    if host.startswith("["):
        return celtypes.StringType(host[1 : host.index("]")])
    return celtypes.StringType(host.rsplit(":", 1)[0] if ":" in host else host)


@_shim
def _get_port(u):
    host = _need_url(u, "getPort").parts.netloc.rpartition("@")[2]
    if host.startswith("["):
        rest = host[host.index("]") + 1 :]
        return celtypes.StringType(rest[1:] if rest.startswith(":") else "")
    return celtypes.StringType(host.rsplit(":", 1)[1] if ":" in host else "")


@_shim
def _get_escaped_path(u):
    return celtypes.StringType(_need_url(u, "getEscapedPath").parts.path)


@_shim
def _get_query(u):
    query = urllib.parse.parse_qs(_need_url(u, "getQuery").parts.query, keep_blank_values=True)
    return celtypes.MapType(
        {
            celtypes.StringType(k): celtypes.ListType([celtypes.StringType(v) for v in vs])
            for k, vs in query.items()
        }
    )


# --------------------------------------------------------------------------------------------
# Shims: quantities
# --------------------------------------------------------------------------------------------

_QUANTITY_RE = re.compile(
    r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$"
)
_SUFFIX = {
    "": Decimal(1),
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


@dataclass(frozen=True)
class Quantity:
    """A Kubernetes resource.Quantity (exact decimal value)."""

    text: str
    value: Decimal

    @classmethod
    def parse(cls, text: str) -> Quantity | None:
        match = _QUANTITY_RE.match(text)
        if not match:
            return None
        number, suffix = match.group(1), match.group(2) or ""
        try:
            base = Decimal(number)
            if suffix[:1] in ("e", "E") and suffix not in _SUFFIX:
                multiplier = Decimal(10) ** int(suffix[1:])
            else:
                multiplier = _SUFFIX[suffix]
        except (InvalidOperation, KeyError, ValueError):
            return None
        return cls(text, base * multiplier)


def _need_quantity(value: Any, fn: str) -> Quantity:
    if not isinstance(value, Quantity):
        raise _Fail(f"no such overload: {fn}")
    return value


def _as_quantity(value: Any, fn: str) -> Quantity:
    if _is_num(value) and not isinstance(value, celtypes.DoubleType):
        return Quantity(str(int(value)), Decimal(int(value)))
    return _need_quantity(value, fn)


@_shim
def _quantity(text):
    parsed = Quantity.parse(_need_str(text, "quantity"))
    if parsed is None:
        raise _Fail(
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        )
    return parsed


@_shim
def _is_quantity(text):
    return celtypes.BoolType(Quantity.parse(_need_str(text, "isQuantity")) is not None)


@_shim
def _is_integer(q):
    value = _need_quantity(q, "isInteger").value
    return celtypes.BoolType(value == value.to_integral_value() and abs(value) < 2**63)


@_shim
def _as_integer(q):
    value = _need_quantity(q, "asInteger").value
    if value != value.to_integral_value() or abs(value) >= 2**63:
        raise _Fail("cannot convert value to integer")
    return celtypes.IntType(int(value))


@_shim
def _as_approximate_float(q):
    return celtypes.DoubleType(float(_need_quantity(q, "asApproximateFloat").value))


@_shim
def _sign(q):
    value = _need_quantity(q, "sign").value
    return celtypes.IntType((value > 0) - (value < 0))


@_shim
def _add(q, other):
    a, b = _need_quantity(q, "add"), _as_quantity(other, "add")
    total = a.value + b.value
    return Quantity(str(total), total)


@_shim
def _sub(q, other):
    a, b = _need_quantity(q, "sub"), _as_quantity(other, "sub")
    total = a.value - b.value
    return Quantity(str(total), total)


@_shim
def _is_greater_than(q, other):
    return celtypes.BoolType(
        _need_quantity(q, "isGreaterThan").value > _need_quantity(other, "isGreaterThan").value
    )


@_shim
def _is_less_than(q, other):
    return celtypes.BoolType(
        _need_quantity(q, "isLessThan").value < _need_quantity(other, "isLessThan").value
    )


@_shim
def _compare_to(q, other):
    a, b = _need_quantity(q, "compareTo").value, _need_quantity(other, "compareTo").value
    return celtypes.IntType((a > b) - (a < b))


# --------------------------------------------------------------------------------------------
# Shims: IP addresses (subset of the Kubernetes IP library)
# --------------------------------------------------------------------------------------------


@_shim
def _is_ip(text):
    try:
        ipaddress.ip_address(_need_str(text, "isIP"))
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


@_shim
def _is_cidr(text):
    try:
        ipaddress.ip_network(_need_str(text, "isCIDR"), strict=False)
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType("/" in text)


FUNCTIONS: dict[str, Any] = {
    "_==_": _eq,
    "_!=_": _ne,
    "_in_": _in,
    # optionals
    "of": _of,
    "none": _none,
    "ofNonZeroValue": _of_non_zero_value,
    "hasValue": _has_value,
    "value": _value,
    "orValue": _or_value,
    "or": _or,
    # sets
    "contains": _contains,
    "equivalent": _sets_equivalent,
    "intersects": _sets_intersects,
    # strings
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": _trim,
    "join": _join,
    "reverse": _reverse,
    "format": _format,
    # lists
    "isSorted": _is_sorted,
    "sum": _sum,
    "max": _max,
    "slice": _slice,
    "flatten": _flatten,
    "distinct": _distinct,
    "sort": _sort,
    # regex
    "find": _find,
    "findAll": _find_all,
    # url
    "url": _url,
    "isURL": _is_url,
    "getScheme": _get_scheme,
    "getHost": _get_host,
    "getHostname": _get_hostname,
    "getPort": _get_port,
    "getEscapedPath": _get_escaped_path,
    "getQuery": _get_query,
    # quantity
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "isInteger": _is_integer,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_approximate_float,
    "sign": _sign,
    "add": _add,
    "sub": _sub,
    "isGreaterThan": _is_greater_than,
    "isLessThan": _is_less_than,
    "compareTo": _compare_to,
    # ip
    "isIP": _is_ip,
    "isCIDR": _is_cidr,
}


# --------------------------------------------------------------------------------------------
# Static check: field selections on self/oldSelf (cel-go's "undefined field")
# --------------------------------------------------------------------------------------------


def schema_exposed(schema: Any) -> bool:
    """Whether a schema node has a CEL type upstream (apiserver/pkg/cel/common.SchemaDeclType)."""
    if not isinstance(schema, dict):
        return False
    if schema.get("x-kubernetes-int-or-string"):
        return True
    typ = schema.get("type")
    if typ == "array":
        return schema_exposed(schema.get("items"))
    if typ == "object":
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict):
            return schema_exposed(addl)
        return True
    return typ in ("string", "boolean", "number", "integer")


_ROOT_META = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}},
}


def _select(schema: Any, root: bool, name: str) -> tuple[str, Any, bool]:
    """('ok'|'undefined'|'unknown', child schema, child is a resource root)."""
    if not isinstance(schema, dict) or schema.get("x-kubernetes-int-or-string"):
        return "unknown", None, False
    props = dict(schema.get("properties") or {})
    if root:
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        meta = props.get("metadata")
        if not (isinstance(meta, dict) and meta.get("properties")):
            props["metadata"] = _ROOT_META
    typ = schema.get("type") or ("object" if root else None)
    if typ != "object":
        return "unknown", None, False
    addl = schema.get("additionalProperties")
    if isinstance(addl, dict) and not schema.get("properties"):
        return "ok", addl, bool(addl.get("x-kubernetes-embedded-resource"))
    fields = {}
    for key, sub in props.items():
        escaped = escape_property_name(key)
        if escaped is not None and schema_exposed(sub):
            fields[escaped] = sub
    if name in fields:
        sub = fields[name]
        return "ok", sub, bool(sub.get("x-kubernetes-embedded-resource"))
    return "undefined", None, False


def undefined_fields(rule: str, schema: dict | None, *, root: bool = False) -> list[str]:
    """cel-go compile errors a rule would get for selecting fields of ``self``/``oldSelf`` that
    the node's schema does not expose (e.g. ``undefined field 'tools'``). Partial type check:
    only plain selection chains starting at ``self``/``oldSelf`` are followed."""
    try:
        tree = _ENV.compile(rule)
    except Exception:  # noqa: BLE001 - syntax errors are reported by compile_rule
        return []
    problems: list[str] = []
    for node in tree.iter_subtrees_topdown():
        if node.data != "member_dot":
            continue
        chain: list[lark.Token] = []
        current: Any = node
        while isinstance(current, lark.Tree):
            if current.data == "member_dot":
                chain.insert(0, current.children[1])
                current = current.children[0]
            elif current.data in ("member", "primary") and len(current.children) == 1:
                current = current.children[0]
            elif current.data == "ident":
                chain.insert(0, current.children[0])
                break
            else:
                chain = []
                break
        if not chain or str(chain[0]) not in ("self", "oldSelf"):
            continue
        current_schema, current_root = schema, root
        for token in chain[1:]:
            status, current_schema, current_root = _select(current_schema, current_root, str(token))
            if status == "undefined":
                where = f"<input>:{getattr(token, 'line', 1)}:{getattr(token, 'column', 0)}"
                message = f"ERROR: {where}: undefined field '{token}'"
                if message not in problems:
                    problems.append(message)
                break
            if status == "unknown":
                break
    return problems


# --------------------------------------------------------------------------------------------
# Compilation and evaluation
# --------------------------------------------------------------------------------------------

_ENV = celpy.Environment()


def _clean_message(exc: BaseException) -> str:
    """Turn a cel-python error into a short cel-go-like message."""
    raw = str(exc.args[0]) if exc.args else str(exc)
    cause = exc.args[1] if len(exc.args) > 1 else None
    raw = raw.split(" (in activation", 1)[0]
    match = re.match(r"no such member in mapping: '(.*)'$", raw)
    if match:
        return f"no such key: {match.group(1)}"
    if raw == "no such key" and len(exc.args) > 2 and exc.args[2]:
        return f"no such key: {exc.args[2][0]}"
    if cause is ZeroDivisionError:
        return "division by zero" if "divide" in raw else "modulus by zero"
    if raw == "return error for overflow":
        return "integer overflow"
    if raw.startswith("found no matching overload") or raw.startswith("no such overload"):
        return "no such overload" + (
            raw[len("no such overload") :] if raw.startswith("no such overload") else ""
        )
    if raw.startswith("undeclared reference to"):
        return raw
    return raw


@dataclass(frozen=True)
class Program:
    """A compiled CEL expression."""

    source: str
    runner: Any
    identifiers: frozenset[str]

    @property
    def uses_old_self(self) -> bool:
        return "oldSelf" in self.identifiers

    def run(self, variables: dict[str, Any]) -> Any:
        """Evaluate with already-converted CEL variables; raise CELError on evaluation errors."""
        activation = dict(variables)
        activation.setdefault("optional", _OPTIONAL_NS)
        activation.setdefault("sets", _SETS_NS)
        try:
            result = self.runner.evaluate(activation)
        except CELEvalError as exc:
            raise CELError(_clean_message(exc), rule=self.source) from exc
        except CELUnsupportedError as exc:
            raise CELError(f"unsupported: {exc}", rule=self.source) from exc
        except RecursionError as exc:
            raise CELError("expression too deep", rule=self.source) from exc
        except Exception as exc:  # noqa: BLE001 - cel-python may leak Python errors
            raise CELError(f"evaluation error: {type(exc).__name__}: {exc}", rule=self.source) from exc
        if isinstance(result, CELEvalError):
            raise CELError(_clean_message(result), rule=self.source)
        return result


def _identifiers(tree: lark.Tree) -> frozenset[str]:
    found = set()
    for token in tree.scan_values(lambda t: isinstance(t, lark.Token) and t.type == "IDENT"):
        found.add(str(token))
    return frozenset(found)


@functools.lru_cache(maxsize=4096)
def compile_rule(rule: str) -> Program:
    """Parse and prepare a CEL expression (cached by source text). Raises CELError."""
    if not isinstance(rule, str) or not rule.strip():
        raise CELError("rule must be a non-empty string", rule=rule, compile_error=True)
    try:
        ast = _ENV.compile(rule)
    except CELParseError as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else "syntax error"
        raise CELError(
            f"compilation failed: ERROR: <input>: Syntax error: {text}", rule=rule, compile_error=True
        ) from exc
    except Exception as exc:  # noqa: BLE001 - lark may raise its own errors
        raise CELError(f"compilation failed: {exc}", rule=rule, compile_error=True) from exc
    runner = _ENV.program(ast, functions=FUNCTIONS)
    return Program(source=rule, runner=runner, identifiers=_identifiers(ast))


def evaluate(
    rule: str,
    self_value: Any,
    old_self: Any = NO_OLD,
    *,
    schema: dict | None = None,
    optional_old_self: bool = False,
    root: bool = False,
) -> bool:
    """Evaluate a validation rule with ``self`` (and ``oldSelf``) bound; returns the boolean result.

    ``schema`` is the structural schema of the value (drives the JSON -> CEL conversion);
    ``root`` marks a resource root (see `to_cel`). With ``optional_old_self`` ``oldSelf`` is an
    optional (``optional.none()`` when ``old_self`` is NO_OLD). Raises CELError on compile or
    evaluation errors and when the result is not a bool.
    """
    program = compile_rule(rule)
    variables: dict[str, Any] = {"self": to_cel(self_value, schema, root=root)}
    if optional_old_self:
        variables["oldSelf"] = (
            CelOptional() if old_self is NO_OLD else CelOptional(to_cel(old_self, schema, root=root), True)
        )
    elif old_self is not NO_OLD:
        variables["oldSelf"] = to_cel(old_self, schema, root=root)
    result = program.run(variables)
    if not isinstance(result, celtypes.BoolType):
        raise CELError(f"rule must evaluate to a bool, got {type(result).__name__}", rule=rule)
    return bool(result)


def evaluate_expression(expression: str, variables: dict[str, Any], *, convert: bool = True) -> Any:
    """Evaluate any CEL expression with JSON variables; returns a plain Python value.

    Used for ``messageExpression`` and admission ``matchConditions``. With ``convert=False``
    the variables are taken as CEL values already and the CEL result is returned as is.
    """
    program = compile_rule(expression)
    bound = {k: _wrap(v) for k, v in variables.items()} if convert else dict(variables)
    result = program.run(bound)
    return from_cel(result) if convert else result


def is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

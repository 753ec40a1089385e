"""Decoding of ``application/vnd.kubernetes.protobuf`` request bodies (client-go typed clients send them).

kubectl's imperative commands (``kubectl create namespace|configmap|secret|job ...``) and Helm's release storage
(Secrets) write built-in objects with protobuf bodies. No ``.proto`` files are shipped anywhere here, so the schema
is read at run time from the Go type metadata of a local client-go binary (the project's own ``kubectl``): struct
fields, their ``json:"..."`` and ``protobuf:"..."`` tags and Go types. That is exactly the schema the client encoded
with. Only ELF/amd64 Go >= 1.21 binaries are understood; without one, protobuf bodies get 415.
"""

from __future__ import annotations

import base64
import datetime
import functools
import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any

MAGIC = b'k8s\x00'

# Go reflect kinds.
_BOOL, _INT, _INT8, _INT16, _INT32, _INT64 = 1, 2, 3, 4, 5, 6
_UINT, _UINT8, _UINT16, _UINT32, _UINT64 = 7, 8, 9, 10, 11
_FLOAT32, _FLOAT64 = 13, 14
_ARRAY, _INTERFACE, _MAP, _PTR, _SLICE, _STRING, _STRUCT = 17, 20, 21, 22, 23, 24, 25
_INTS = {_INT, _INT8, _INT16, _INT32, _INT64, _UINT, _UINT8, _UINT16, _UINT32, _UINT64}

_PACKAGES = {
    '': 'k8s.io/api/core', 'apps': 'k8s.io/api/apps', 'batch': 'k8s.io/api/batch',
    'rbac.authorization.k8s.io': 'k8s.io/api/rbac', 'coordination.k8s.io': 'k8s.io/api/coordination',
    'events.k8s.io': 'k8s.io/api/events', 'admissionregistration.k8s.io': 'k8s.io/api/admissionregistration',
    'networking.k8s.io': 'k8s.io/api/networking', 'policy': 'k8s.io/api/policy',
    'authorization.k8s.io': 'k8s.io/api/authorization', 'authentication.k8s.io': 'k8s.io/api/authentication', 'meta.k8s.io': 'k8s.io/apimachinery/pkg/apis/meta',
    'apiextensions.k8s.io': 'k8s.io/apiextensions-apiserver/pkg/apis/apiextensions',
}
_META = 'k8s.io/apimachinery/pkg/apis/meta/v1'
_ZERO_TIME = -62135596800


class ProtobufUnsupported(Exception):
    pass


class GoTypes:
    """Go runtime type metadata of an ELF binary: named structs by (package path, name), and their fields."""

    def __init__(self, path: Path) -> None:
        self.data = path.read_bytes()
        data = self.data
        if data[:4] != b'\x7fELF' or data[4] != 2:
            raise ProtobufUnsupported(f'not an ELF64 binary: {path}')
        shoff = struct.unpack_from('<Q', data, 0x28)[0]
        shentsize, shnum, shstrndx = struct.unpack_from('<HHH', data, 0x3A)
        sections = []
        for i in range(shnum):
            name, _, _, addr, offset, size = struct.unpack_from('<IIQQQQ', data, shoff + i * shentsize)
            sections.append((name, addr, offset, size))
        strtab = sections[shstrndx][2]
        by_name = {data[strtab + s[0]:data.index(b'\0', strtab + s[0])].decode(): s for s in sections}
        if '.rodata' not in by_name or '.typelink' not in by_name:
            raise ProtobufUnsupported(f'no Go type metadata in {path}')
        self.segments = [(addr, offset, size) for _, addr, offset, size in sections if addr and size]
        self.types_base = by_name['.rodata'][1]
        _, _, tl_off, tl_size = by_name['.typelink']
        self.structs: dict[tuple[str, str], int] = {}
        for rel in struct.unpack_from(f'<{tl_size // 4}i', data, tl_off):
            addr = self.types_base + rel
            if self.kind(addr) == _PTR:
                elem = self.u64(addr + 48)
                if self.kind(elem) == _STRUCT:
                    key = self.identity(elem)
                    if key is not None:
                        self.structs.setdefault(key, elem)

    def off(self, addr: int) -> int:
        for seg_addr, seg_off, size in self.segments:
            if seg_addr <= addr < seg_addr + size:
                return addr - seg_addr + seg_off
        raise ProtobufUnsupported(f'address {addr:#x} is not in the binary')

    def u64(self, addr: int) -> int:
        return int(struct.unpack_from('<Q', self.data, self.off(addr))[0])

    def kind(self, addr: int) -> int:
        return self.data[self.off(addr) + 23] & 31

    def _varint(self, pos: int) -> tuple[int, int]:
        result, shift = 0, 0
        while True:
            byte = self.data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return result, pos

    def name(self, addr: int) -> tuple[str, str | None]:
        pos = self.off(addr)
        flags = self.data[pos]
        length, pos = self._varint(pos + 1)
        name = self.data[pos:pos + length].decode('utf-8', 'replace')
        tag = None
        if flags & 2:
            tag_len, tpos = self._varint(pos + length)
            tag = self.data[tpos:tpos + tag_len].decode('utf-8', 'replace')
        return name, tag

    def type_name(self, addr: int) -> str:
        pos = self.off(addr)
        tflag = self.data[pos + 20]
        name_off = struct.unpack_from('<i', self.data, pos + 40)[0]
        name, _ = self.name(self.types_base + name_off)
        return name[1:] if tflag & 2 else name

    def identity(self, addr: int) -> tuple[str, str] | None:
        """(package path, type name) of a named type, e.g. ('k8s.io/api/core/v1', 'Secret')."""
        pos = self.off(addr)
        tflag = self.data[pos + 20]
        if not tflag & 1 or not tflag & 4:   # uncommon & named
            return None
        kind = self.kind(addr)
        extra = {_STRUCT: 32, _PTR: 8, _SLICE: 8, _ARRAY: 24}.get(kind, 0)
        if kind in (_MAP, _INTERFACE, 18, 19):
            return None
        pkg_off = struct.unpack_from('<i', self.data, pos + 48 + extra)[0]
        pkg, _ = self.name(self.types_base + pkg_off)
        return pkg, self.type_name(addr).rsplit('.', 1)[-1]

    @functools.cache  # noqa: B019  (one instance per binary, kept for the process lifetime)
    def fields(self, addr: int) -> list[tuple[str, str, bool, int | None, int]]:
        """(go name, json name, omitempty, proto field number, field type address) of a struct type."""
        pos = self.off(addr)
        fields_ptr, fields_len = struct.unpack_from('<QQ', self.data, pos + 56)
        result = []
        for i in range(fields_len):
            name_addr, type_addr, _ = struct.unpack_from('<QQQ', self.data, self.off(fields_ptr + 24 * i))
            go_name, tag = self.name(name_addr)
            json_name, omitempty, number = go_name, False, None
            for part in _split_tag(tag or ''):
                key, _, value = part.partition(':')
                value = value.strip('"')
                if key == 'json':
                    bits = value.split(',')
                    json_name = bits[0] or ('' if 'inline' in bits else go_name)
                    omitempty = 'omitempty' in bits
                elif key == 'protobuf':
                    number = int(value.split(',')[1])
            result.append((go_name, json_name, omitempty, number, type_addr))
        return result


def _split_tag(tag: str) -> list[str]:
    parts, current, quoted = [], '', False
    for ch in tag:
        if ch == '"':
            quoted = not quoted
        if ch == ' ' and not quoted:
            if current:
                parts.append(current)
            current = ''
        else:
            current += ch
    if current:
        parts.append(current)
    return parts


def _find_binary() -> Path | None:
    explicit = os.environ.get('FAITHFUL_CLUSTER_GO_BINARY')
    candidates = [Path(explicit)] if explicit else []
    found = shutil.which('kubectl')
    if found:
        candidates.append(Path(found))
    return next((c for c in candidates if c.is_file()), None)


@functools.cache
def go_types() -> GoTypes:
    binary = _find_binary()
    if binary is None:
        raise ProtobufUnsupported('no client-go binary (kubectl) found to read the protobuf schema from')
    return GoTypes(binary)


# ---------------------------------------------------------------------------------------------------------------
# Wire format.

def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, pos


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(number, wire type, raw value) for each field occurrence of a message."""
    pos, result = 0, []
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError(f'unsupported wire type {wire}')
        result.append((number, wire, value))
    return result


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


class Decoder:
    def __init__(self, types: GoTypes) -> None:
        self.types = types

    def scalar(self, type_addr: int, wire: int, raw: Any) -> Any:
        kind = self.types.kind(type_addr)
        if kind == _PTR:
            return self.scalar(self.types.u64(type_addr + 48), wire, raw)
        if kind == _STRING:
            return raw.decode('utf-8', 'replace')
        if kind == _BOOL:
            return bool(raw)
        if kind in _INTS:
            return _signed(raw)
        if kind == _FLOAT64:
            return struct.unpack('<d', raw)[0]
        if kind == _FLOAT32:
            return struct.unpack('<f', raw)[0]
        if kind == _SLICE and self.types.kind(self.types.u64(type_addr + 48)) == _UINT8:
            return base64.b64encode(raw).decode()
        if kind == _STRUCT:
            return self.message(type_addr, raw)
        raise ValueError(f'cannot decode a {self.types.type_name(type_addr)} from wire type {wire}')

    def message(self, type_addr: int, data: bytes) -> Any:
        identity = self.types.identity(type_addr)
        occurrences = _fields(data)
        special = self.special(identity, occurrences)
        if special is not NotImplemented:
            return special
        by_number = {num: (json_name, omit, t) for _, json_name, omit, num, t in self.types.fields(type_addr)
                     if num is not None}
        result: dict[str, Any] = {}
        for number, wire, raw in occurrences:
            if number not in by_number:
                continue
            json_name, _, field_type = by_number[number]
            kind = self.types.kind(field_type)
            if not json_name:   # an inline (embedded) struct, e.g. Volume.VolumeSource
                inline = self.scalar(field_type, wire, raw)
                if isinstance(inline, dict):
                    result.update(inline)
            elif kind == _SLICE and self.types.kind(self.types.u64(field_type + 48)) != _UINT8:
                elem = self.types.u64(field_type + 48)
                items = result.setdefault(json_name, [])
                if wire == 2 and self.types.kind(elem) in _INTS | {_BOOL}:
                    pos = 0
                    while pos < len(raw):
                        value, pos = _read_varint(raw, pos)
                        items.append(self.scalar(elem, 0, value))
                else:
                    items.append(self.scalar(elem, wire, raw))
            elif kind == _MAP:
                key_type, value_type = self.types.u64(field_type + 48), self.types.u64(field_type + 56)
                entry = {n: (w, v) for n, w, v in _fields(raw)}
                key = self.scalar(key_type, *entry[1]) if 1 in entry else ''
                value = self.scalar(value_type, *entry[2]) if 2 in entry else self._zero(value_type)
                result.setdefault(json_name, {})[key] = value
            else:
                result[json_name] = self.scalar(field_type, wire, raw)
        for _, json_name, omitempty, _number, field_type in self.types.fields(type_addr):
            if json_name in result and omitempty and _is_zero(result[json_name]) \
                    and self.types.kind(field_type) != _STRUCT:
                del result[json_name]
        return result

    def _zero(self, type_addr: int) -> Any:
        kind = self.types.kind(type_addr)
        return {_STRING: '', _BOOL: False}.get(kind, 0 if kind in _INTS else None)

    @staticmethod
    def special(identity: tuple[str, str] | None, occurrences: list[tuple[int, int, Any]]) -> Any:
        if identity is None:
            return NotImplemented
        values = {n: v for n, _, v in occurrences}
        pkg, name = identity
        if pkg == _META and name in ('Time', 'MicroTime'):
            seconds, nanos = _signed(values.get(1, 0)), values.get(2, 0)
            if seconds in (_ZERO_TIME, 0) and not nanos:
                return None
            moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
            if name == 'MicroTime':
                return moment.strftime('%Y-%m-%dT%H:%M:%S') + f'.{nanos // 1000:06d}Z'
            return moment.strftime('%Y-%m-%dT%H:%M:%SZ')
        if pkg == _META and name == 'Duration':
            return f'{_signed(values.get(1, 0)) / 1e9:g}s'
        if pkg == 'k8s.io/apimachinery/pkg/util/intstr' and name == 'IntOrString':
            return values.get(3, b'').decode() if values.get(1) == 1 else _signed(values.get(2, 0))
        if pkg == 'k8s.io/apimachinery/pkg/api/resource' and name == 'Quantity':
            return values.get(1, b'').decode()
        if (pkg, name) in (('k8s.io/apimachinery/pkg/runtime', 'RawExtension'), (_META, 'FieldsV1'),
                           ('k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1', 'JSON')):
            raw = values.get(1, b'')
            return json.loads(raw) if raw else None
        return NotImplemented


def _is_zero(value: Any) -> bool:
    if isinstance(value, bool):
        return value is False
    return value is None or value == '' or value == 0 or value == {} or value == []


def decode(body: bytes, expected: tuple[str, str] | None = None) -> dict[str, Any]:
    """Decode a protobuf-encoded object (``k8s\\0`` + runtime.Unknown envelope) into its JSON form."""
    if not body.startswith(MAGIC):
        raise ValueError('not a Kubernetes protobuf body')
    envelope = {n: v for n, _, v in _fields(body[len(MAGIC):])}
    type_meta = {n: v.decode() for n, _, v in _fields(envelope.get(1, b''))}
    api_version, kind = type_meta.get(1, ''), type_meta.get(2, '')
    if not kind and expected is not None:
        api_version, kind = expected
    group, _, version = api_version.rpartition('/')
    if kind in ('DeleteOptions', 'CreateOptions', 'UpdateOptions', 'PatchOptions', 'Status'):
        group, version = 'meta.k8s.io', 'v1'   # registered into every group version, defined in meta/v1
    package = _PACKAGES.get(group)
    types = go_types()
    type_addr = types.structs.get((f'{package}/{version}', kind)) if package else None
    if type_addr is None:
        raise ProtobufUnsupported(f'no protobuf schema for {api_version} {kind}')
    obj = Decoder(types).message(type_addr, envelope.get(2, b''))
    if not isinstance(obj, dict):
        raise ValueError('the protobuf body is not an object')
    if type_meta.get(2):
        obj = {'apiVersion': api_version, 'kind': kind, **obj}
    return obj

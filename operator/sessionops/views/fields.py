"""One field of a watched object, declared once: ``Field("status", "phase")``.

A view class lists its fields as ``Field`` attributes; reading one walks the raw dict along
its path (a missing or empty step reads as the default), so a field's wire name is written in
exactly one place, and a test checks each path against the API models' schema.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")

EMPTY: Mapping[str, Any] = MappingProxyType({})
"""The default of a missing object field: read-only, so no caller can fill the shared default."""


class Field(Generic[T]):
    """The value at ``path`` of the view's object, or ``default`` when a step is missing,
    null or empty (what ``(obj.get("status") or {}).get("phase") or default`` reads)."""

    __slots__ = ("path", "default")

    def __init__(self, *path: str, default: T) -> None:
        self.path = path
        self.default = default

    def read(self, obj: Mapping[str, Any] | None) -> T:
        value: Any = obj
        for key in self.path:
            if not value:
                return self.default
            value = value.get(key)
        return value or self.default

    @overload
    def __get__(self, view: None, owner: type) -> Field[T]: ...

    @overload
    def __get__(self, view: object, owner: type) -> T: ...

    def __get__(self, view: Any, owner: type) -> Field[T] | T:
        if view is None:
            return self
        return self.read(view.raw)


class View:
    """A read view over one watched object: holds the dict itself (no copy, no validation).
    ``None`` (an object not found) reads as an object without fields: every field is its default."""

    __slots__ = ("raw",)

    name: Field[str] = Field("metadata", "name", default="")
    namespace: Field[str] = Field("metadata", "namespace", default="")
    deletion_timestamp: Field[str | None] = Field("metadata", "deletionTimestamp", default=None)
    finalizers: Field[Sequence[str]] = Field("metadata", "finalizers", default=())
    labels: Field[Mapping[str, str]] = Field("metadata", "labels", default=EMPTY)

    def __init__(self, raw: Mapping[str, Any] | None) -> None:
        self.raw = raw

    @property
    def deleting(self) -> bool:
        return bool(self.deletion_timestamp)

    @classmethod
    def fields(cls) -> dict[str, Field[Any]]:
        """Every field the view reads, by attribute name (what the schema test checks)."""
        found: dict[str, Field[Any]] = {}
        for klass in reversed(cls.__mro__):
            found.update({k: v for k, v in vars(klass).items() if isinstance(v, Field)})
        return found

"""Adapter to the schema/CEL, admission and authorization modules (written separately).

If a module is absent (``ModuleNotFoundError`` for that very module), a pass-through fallback is used: objects are
admitted unchanged, no webhooks are called, and SubjectAccessReviews are allowed. ``AVAILABLE`` tells which
real modules were found. Any other import error propagates (a broken module must not be silently ignored).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

AVAILABLE: dict[str, bool] = {}


def _load(name: str) -> ModuleType | None:
    qualified = f'{__package__}.{name}'
    try:
        module = importlib.import_module(qualified)
    except ModuleNotFoundError as e:
        if e.name != qualified:
            raise
        module = None
    AVAILABLE[name] = module is not None
    return module


schema = _load('schema')
admission = _load('admission')
authz = _load('authz')


class _FallbackFieldError(Exception):
    status = 422
    reason = 'Invalid'
    causes: list[dict[str, str]] = []
    message = ''


class _FallbackAdmissionDenied(Exception):
    status = 403
    reason = 'Forbidden'
    message = ''


FieldError: type[Exception] = getattr(schema, 'FieldError', _FallbackFieldError)
AdmissionDenied: type[Exception] = getattr(admission, 'AdmissionDenied', _FallbackAdmissionDenied)


def admit_custom_object(crd: dict[str, Any], version: str, obj: dict[str, Any], old: dict[str, Any] | None, *,
                        field_validation: str = 'Strict') -> tuple[dict[str, Any], list[str]]:
    if schema is None:
        return obj, []
    return schema.admit_custom_object(crd, version, obj, old, field_validation=field_validation)


async def run_admission(**kwargs: Any) -> dict[str, Any] | None:
    if admission is None:
        return kwargs.get('obj')
    return await admission.run_admission(**kwargs)


async def review(cluster: Any, sar: dict[str, Any]) -> dict[str, Any]:
    if authz is None:
        result = dict(sar)
        result['status'] = {'allowed': True, 'reason': 'no authorization module: allowing everything'}
        return result
    return await authz.review(cluster, sar)

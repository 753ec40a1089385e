"""Kubernetes-shaped API errors (``kind: Status`` bodies) as kube-apiserver returns them."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An API error rendered as a ``Status`` object with the given HTTP code."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def as_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            'kind': 'Status',
            'apiVersion': 'v1',
            'metadata': {},
            'status': 'Failure',
            'message': self.message,
            'reason': self.reason,
            'code': self.code,
        }
        if self.details is not None:
            status['details'] = self.details
        return status


def qualified(group: str, plural: str) -> str:
    """``pods`` for the core group, ``jobs.batch`` for others (as in error messages)."""
    return f'{plural}.{group}' if group else plural


def _details(group: str, plural: str, name: str | None) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details['name'] = name
    if group:
        details['group'] = group
    details['kind'] = plural
    return details


def not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(404, 'NotFound', f'{qualified(group, plural)} "{name}" not found',
                    _details(group, plural, name))


def resource_not_found() -> ApiError:
    return ApiError(404, 'NotFound', 'the server could not find the requested resource', {})


def already_exists(group: str, plural: str, name: str) -> ApiError:
    return ApiError(409, 'AlreadyExists', f'{qualified(group, plural)} "{name}" already exists',
                    _details(group, plural, name))


def conflict(group: str, plural: str, name: str, why: str | None = None) -> ApiError:
    why = why or 'the object has been modified; please apply your changes to the latest version and try again'
    return ApiError(409, 'Conflict', f'Operation cannot be fulfilled on {qualified(group, plural)} "{name}": {why}',
                    _details(group, plural, name))


def invalid(kind: str, group: str, name: str, causes: list[dict[str, str]]) -> ApiError:
    """422 Invalid; ``causes`` are ``{field, reason, message}`` as in field.ErrorList."""
    texts = [f"{c['field']}: {c['message']}" if c.get('field') else c['message'] for c in causes]
    summary = texts[0] if len(texts) == 1 else '[' + ', '.join(texts) + ']'
    details: dict[str, Any] = {'name': name, 'group': group, 'kind': kind, 'causes': causes}
    if not group:
        del details['group']
    return ApiError(422, 'Invalid', f'{kind} "{name}" is invalid: {summary}', details)


def cause(field: str, reason: str, message: str) -> dict[str, str]:
    return {'reason': reason, 'message': message, 'field': field}


def required(field: str, detail: str = '') -> dict[str, str]:
    return cause(field, 'FieldValueRequired', 'Required value' + (f': {detail}' if detail else ''))


def invalid_value(field: str, value: Any, detail: str) -> dict[str, str]:
    import json
    return cause(field, 'FieldValueInvalid', f'Invalid value: {json.dumps(value)}: {detail}')


def forbidden_field(field: str, detail: str) -> dict[str, str]:
    return cause(field, 'FieldValueForbidden', f'Forbidden: {detail}')


def unsupported_value(field: str, value: Any, supported: list[str]) -> dict[str, str]:
    import json
    values = ', '.join(json.dumps(v) for v in supported)
    return cause(field, 'FieldValueNotSupported', f'Unsupported value: {json.dumps(value)}: supported values: {values}')


def unprocessable(message: str) -> ApiError:
    """A 422 as NewGenericServerResponse makes it (e.g. a failed JSON-patch ``test`` op)."""
    return ApiError(422, 'Invalid',
                    f'the server rejected our request due to an error in our request ({message})', {})


def bad_request(message: str) -> ApiError:
    return ApiError(400, 'BadRequest', message)


def forbidden(message: str, group: str = '', plural: str = '', name: str | None = None) -> ApiError:
    return ApiError(403, 'Forbidden', message, _details(group, plural, name) if plural else None)


def method_not_allowed() -> ApiError:
    return ApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource', {})


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(415, 'UnsupportedMediaType',
                    'the body of the request was in an unknown format - accepted media types include: '
                    'application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml',
                    {})


def request_too_large(limit: int) -> ApiError:
    """The API server's request body limit (``MaxRequestBodyBytes``, 3 MiB by default)."""
    return ApiError(413, 'RequestEntityTooLarge', f'Request entity too large: limit is {limit}', {})


def storage_too_large() -> ApiError:
    """etcd refuses a value over its request limit; kube-apiserver passes it on as a 500."""
    return ApiError(500, 'InternalError', 'etcdserver: request is too large', {})


def gone(message: str) -> ApiError:
    return ApiError(410, 'Expired', message, {})


def too_old(requested: int, oldest: int) -> ApiError:
    return gone(f'too old resource version: {requested} ({oldest})')

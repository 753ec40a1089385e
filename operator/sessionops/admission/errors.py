"""Rejections are values with a field path, a reason and an HTTP code."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)

INVALID = 422
CONFLICT = 409
FORBIDDEN = 403
NOT_FOUND = 404


@dataclasses.dataclass(frozen=True)
class Rejection(Exception):
    """Why admission refuses a request; ``str()`` is what the user reads in kubectl."""

    field: str
    message: str
    code: int = INVALID

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def parse(model: type[M], value: Any, field: str = "spec") -> M:
    """Validate a wire object; the first problem becomes a Rejection with its field path.

    Mutating webhooks run before the API server's schema validation, so they must
    expect any JSON at all and answer 422, never fail.
    """
    try:
        return model.model_validate(value)
    except ValidationError as e:
        err = e.errors()[0]
        parts = [str(p) for p in err["loc"] if not str(p).startswith(("literal[", "list[", "str", "function-"))]
        path = field
        for p in parts:
            path += f"[{p}]" if p.isdigit() else f".{p}"
        raise Rejection(path, err["msg"]) from None

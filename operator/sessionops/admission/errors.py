"""Rejections are values with a field path, a reason and an HTTP code."""

from __future__ import annotations

import dataclasses

INVALID = 422
CONFLICT = 409
NOT_FOUND = 404


@dataclasses.dataclass(frozen=True)
class Rejection(Exception):
    """Why admission refuses a request; ``str()`` is what the user reads in kubectl."""

    field: str
    message: str
    code: int = INVALID

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"

"""Resume completeness at receipt: a waitpoint is answered only by a complete resume.

The rules live once, in ``sessionops.agent.waitpoints.validate_resume``: the worker applies
the same function when it builds ``Command(resume=...)``, so admission and execution can
never disagree about what "complete" means.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from sessionops.admission.errors import CONFLICT, Rejection
from sessionops.agent.waitpoints import validate_resume
from sessionops.api.run import Waitpoint


def check_resume(waitpoint: dict[str, Any], *, answers: list[Any] | None,
                 decisions: list[dict[str, Any]] | None) -> None:
    """Raise a Rejection (the first error, with its field path) unless the resume is complete."""
    try:
        parsed = Waitpoint.model_validate(waitpoint)
    except ValidationError:
        raise Rejection("spec.waitpointId", "the run has no waitpoint to resume", CONFLICT) from None
    errors = validate_resume(parsed, answers=answers, decisions=decisions)
    if errors:
        first = errors[0]
        raise Rejection(first.field, first.reason, first.status)

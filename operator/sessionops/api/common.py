"""Shared building blocks: the camelCase base model, conditions, references, enums."""

from __future__ import annotations

import enum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# Kubernetes object names used in references (DNS-1123 subdomain).
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


STATUS_KEPT = {"rule": "!has(oldSelf.status) || has(self.status)",
               "message": "status cannot be removed once written (it is the operator's record)",
               "fieldPath": ".status"}
"""A root rule: the status subresource's transition rules run only when a new status exists."""


class ApiModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields are errors.

    ``x_validations`` holds CEL rules (``x-kubernetes-validations``) that the CRD
    generator attaches to this object's schema: rules that need no lookup live in
    the CRD so that the API server itself enforces them.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", use_enum_values=True,
    )
    x_validations: ClassVar[list[dict[str, str]]] = []

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> Any:
        schema = handler(core_schema)
        if cls.x_validations:
            handler.resolve_ref_schema(schema)["x-kubernetes-validations"] = list(cls.x_validations)
        return schema

    def dump(self) -> dict[str, Any]:
        """The wire form: camelCase keys, unset optional fields omitted."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class ApprovalMode(enum.StrEnum):
    """Whether tools marked as needing approval pause the turn for a decision."""

    DEFAULT = "Default"
    ALWAYS_TRUST = "AlwaysTrust"


class ObjectRef(ApiModel):
    """A reference to an object in the same namespace."""

    name: str = Field(
        description="Name of the referenced object in the same namespace.",
        min_length=1, max_length=253, pattern=NAME_PATTERN,
    )


class Condition(ApiModel):
    """A Kubernetes-style condition (type/status/reason/message/lastTransitionTime)."""

    type: str = Field(description="Type of the condition, e.g. Ready, Accepted, CleanupFailed.")
    status: str = Field(description="True, False or Unknown.", pattern=r"^(True|False|Unknown)$")
    reason: str = Field(default="", description="Machine-readable CamelCase reason for the last transition.")
    message: str = Field(default="", description="Human-readable details of the last transition.")
    last_transition_time: str | None = Field(
        default=None, description="When the status last changed (RFC 3339).")
    observed_generation: int | None = Field(
        default=None, description="The .metadata.generation the condition was computed for.")


class ObjectMeta(BaseModel):
    """Only what the schema needs to mention; the API server owns the rest."""

    model_config = ConfigDict(extra="allow")
    name: str | None = None
    namespace: str | None = None

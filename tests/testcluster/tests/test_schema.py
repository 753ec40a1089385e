"""Pruning, defaulting and validation of custom objects, with the real API server's messages."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testcluster.schema import FieldError, admit_custom_object, go_float

BLOCKED = (
    "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)


def make_crd(spec_schema: dict, *, root_rules: list | None = None) -> dict:
    root: dict[str, Any] = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec_schema,
        },
    }
    if root_rules:
        root["x-kubernetes-validations"] = root_rules
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": root}}
            ],
        },
    }


def make_obj(spec: Any, name: str = "w1", **meta: Any) -> dict:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "default", **meta},
        "spec": spec,
    }


def obj_schema(props: dict, **extra: Any) -> dict:
    return {"type": "object", "properties": props, **extra}


def errors_of(exc: FieldError) -> list[str]:
    return [f"{c['field']}: {c['message']}" for c in exc.causes]


@dataclass
class Case:
    id: str
    schema: dict
    spec: Any
    old: Any = None  # old spec -> UPDATE
    mode: str = "Strict"
    expect: Any = None  # expected spec after admission
    errors: list[str] | None = None  # expected "field: body" causes (any order)
    warnings: list[str] = field(default_factory=list)
    root_rules: list | None = None


STR = {"type": "string"}
INT = {"type": "integer"}

CASES = [
    # ---------------------------------------------------------------- pruning
    Case(
        "Warn mode prunes an undeclared field and warns about it",
        obj_schema({"a": STR}),
        {"a": "x", "foo": 1},
        mode="Warn",
        expect={"a": "x"},
        warnings=['unknown field "spec.foo"'],
    ),
    Case(
        "Ignore mode prunes an undeclared field silently",
        obj_schema({"a": STR}),
        {"a": "x", "foo": 1},
        mode="Ignore",
        expect={"a": "x"},
    ),
    Case(
        "unknown fields inside array items are reported with their index",
        obj_schema({"items": {"type": "array", "items": obj_schema({"n": INT})}}),
        {"items": [{"n": 1}, {"n": 2, "x": True}]},
        mode="Warn",
        expect={"items": [{"n": 1}, {"n": 2}]},
        warnings=['unknown field "spec.items[1].x"'],
    ),
    Case(
        "preserve-unknown-fields keeps unknown fields but prunes inside declared children",
        obj_schema(
            {"known": obj_schema({"a": STR})},
            **{"x-kubernetes-preserve-unknown-fields": True},
        ),
        {"free": {"any": [1, 2]}, "known": {"a": "s", "b": 2}},
        mode="Warn",
        expect={"free": {"any": [1, 2]}, "known": {"a": "s"}},
        warnings=['unknown field "spec.known.b"'],
    ),
    Case(
        "an untyped preserve-unknown-fields property keeps any value",
        obj_schema({"tools": {"x-kubernetes-preserve-unknown-fields": True}}),
        {"tools": ["a", {"b": 1}]},
        expect={"tools": ["a", {"b": 1}]},
    ),
    Case(
        "additionalProperties values are pruned by their own schema",
        obj_schema({"labels": {"type": "object", "additionalProperties": obj_schema({"v": STR})}}),
        {"labels": {"a": {"v": "1", "w": 2}}},
        mode="Warn",
        expect={"labels": {"a": {"v": "1"}}},
        warnings=['unknown field "spec.labels.a.w"'],
    ),
    Case(
        "an embedded resource keeps apiVersion, kind and known metadata",
        obj_schema(
            {
                "template": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "properties": {"spec": obj_schema({"image": STR})},
                }
            }
        ),
        {
            "template": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "labels": {"a": "b"}, "bogus": 1},
                "spec": {"image": "x", "extra": 1},
            }
        },
        mode="Warn",
        expect={
            "template": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "labels": {"a": "b"}},
                "spec": {"image": "x"},
            }
        },
        warnings=['unknown field "spec.template.metadata.bogus"', 'unknown field "spec.template.spec.extra"'],
    ),
    Case(
        "an embedded resource must name its apiVersion and kind",
        obj_schema(
            {
                "template": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "x-kubernetes-preserve-unknown-fields": True,
                }
            }
        ),
        {"template": {"kind": ""}},
        errors=[
            "spec.template.apiVersion: Required value: must not be empty",
            'spec.template.kind: Invalid value: "": must not be empty',
            BLOCKED,
        ],
    ),
    Case(
        "a null non-nullable field without a default is dropped",
        obj_schema({"a": STR, "b": STR}),
        {"a": None, "b": "x"},
        expect={"b": "x"},
    ),
    Case(
        "a null nullable field is kept",
        obj_schema({"a": {"type": "string", "nullable": True}}),
        {"a": None},
        expect={"a": None},
    ),
    # ---------------------------------------------------------------- defaults
    Case(
        "a missing field gets its default",
        obj_schema({"mode": {"type": "string", "default": "Default"}}),
        {},
        expect={"mode": "Default"},
    ),
    Case(
        "nested defaults apply only when the parent object exists",
        obj_schema({"limits": obj_schema({"steps": {"type": "integer", "default": 50}})}),
        {},
        expect={},
    ),
    Case(
        "nested defaults apply inside an existing parent",
        obj_schema({"limits": obj_schema({"steps": {"type": "integer", "default": 50}})}),
        {"limits": {}},
        expect={"limits": {"steps": 50}},
    ),
    Case(
        "a defaulted object receives its own nested defaults",
        obj_schema({"limits": obj_schema({"steps": {"type": "integer", "default": 50}}, default={})}),
        {},
        expect={"limits": {"steps": 50}},
    ),
    Case(
        "defaults apply to every array item",
        obj_schema(
            {
                "items": {
                    "type": "array",
                    "items": obj_schema({"n": INT, "kind": {"type": "string", "default": "A"}}),
                }
            }
        ),
        {"items": [{"n": 1}, {"n": 2, "kind": "B"}]},
        expect={"items": [{"n": 1, "kind": "A"}, {"n": 2, "kind": "B"}]},
    ),
    Case(
        "defaults apply to additionalProperties values",
        obj_schema(
            {
                "m": {
                    "type": "object",
                    "additionalProperties": obj_schema({"on": {"type": "boolean", "default": True}}),
                }
            }
        ),
        {"m": {"x": {}, "y": {"on": False}}},
        expect={"m": {"x": {"on": True}, "y": {"on": False}}},
    ),
    Case(
        "a null non-nullable field with a default is defaulted",
        obj_schema({"mode": {"type": "string", "default": "Default"}}),
        {"mode": None},
        expect={"mode": "Default"},
    ),
    # ---------------------------------------------------------------- types
    Case(
        "a string where an integer is declared is a type error and blocks CEL rules",
        obj_schema({"replicas": INT}, **{"x-kubernetes-validations": [{"rule": "false"}]}),
        {"replicas": "3"},
        errors=[
            'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"',
            BLOCKED,
        ],
    ),
    Case(
        "an integral float is accepted as an integer",
        obj_schema({"replicas": INT}),
        {"replicas": 3.0},
        expect={"replicas": 3.0},
    ),
    Case(
        "an integer is accepted as a number",
        obj_schema({"ratio": {"type": "number"}}),
        {"ratio": 1},
        expect={"ratio": 1},
    ),
    Case(
        "a boolean is not an integer",
        obj_schema({"n": INT}),
        {"n": True},
        errors=[
            'spec.n: Invalid value: "boolean": spec.n in body must be of type integer: "boolean"',
            BLOCKED,
        ],
    ),
    Case(
        "a fractional number is not an integer",
        obj_schema({"n": INT}),
        {"n": 1.5},
        errors=['spec.n: Invalid value: "number": spec.n in body must be of type integer: "number"', BLOCKED],
    ),
    Case(
        "int-or-string accepts an integer and a string",
        obj_schema({"a": {"x-kubernetes-int-or-string": True}, "b": {"x-kubernetes-int-or-string": True}}),
        {"a": 80, "b": "50%"},
        expect={"a": 80, "b": "50%"},
    ),
    Case(
        "int-or-string rejects a boolean",
        obj_schema({"port": {"x-kubernetes-int-or-string": True}}),
        {"port": False},
        errors=[
            'spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean"',
            BLOCKED,
        ],
    ),
    Case(
        "a null list item is a type error unless items are nullable",
        obj_schema({"items": {"type": "array", "items": STR}}),
        {"items": [None]},
        errors=[
            'spec.items[0]: Invalid value: "null": spec.items[0] in body must be of type string: "null"',
            BLOCKED,
        ],
    ),
    # ---------------------------------------------------------------- keywords
    Case(
        "a missing required field is reported as Required value",
        obj_schema({"model": STR, "mode": STR}, required=["model", "mode"]),
        {},
        errors=["spec.model: Required value", "spec.mode: Required value", BLOCKED],
    ),
    Case(
        "a value outside the enum is an unsupported value",
        obj_schema({"mode": {"type": "string", "enum": ["Default", "AlwaysTrust"]}}),
        {"mode": "Sometimes"},
        errors=[
            'spec.mode: Unsupported value: "Sometimes": supported values: "Default", "AlwaysTrust"',
            BLOCKED,
        ],
    ),
    Case(
        "numbers below minimum and above maximum are invalid",
        obj_schema({"a": {"type": "integer", "minimum": 1}, "b": {"type": "integer", "maximum": 10}}),
        {"a": 0, "b": 11},
        errors=[
            "spec.a: Invalid value: 0: spec.a in body should be greater than or equal to 1",
            "spec.b: Invalid value: 11: spec.b in body should be less than or equal to 10",
        ],
    ),
    Case(
        "exclusive bounds exclude the limit itself",
        obj_schema(
            {
                "a": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
                "b": {"type": "number", "maximum": 1, "exclusiveMaximum": True},
            }
        ),
        {"a": 0, "b": 1.0},
        errors=[
            "spec.a: Invalid value: 0: spec.a in body should be greater than 0",
            "spec.b: Invalid value: 1: spec.b in body should be less than 1",
        ],
    ),
    Case(
        "float limits are printed like Go does",
        obj_schema({"x": {"type": "number", "maximum": 1000000.0}}),
        {"x": 2000000.5},
        errors=["spec.x: Invalid value: 2.0000005e+06: spec.x in body should be less than or equal to 1e+06"],
    ),
    Case(
        "a value that is not a multiple of multipleOf is invalid",
        obj_schema({"x": {"type": "integer", "multipleOf": 5}}),
        {"x": 12},
        errors=["spec.x: Invalid value: 12: spec.x in body should be a multiple of 5"],
    ),
    Case(
        "an empty string below minLength is invalid",
        obj_schema({"name": {"type": "string", "minLength": 1}}),
        {"name": ""},
        errors=['spec.name: Invalid value: "": spec.name in body should be at least 1 chars long'],
    ),
    Case(
        "maxLength counts unicode code points, not bytes",
        obj_schema({"name": {"type": "string", "maxLength": 5}}),
        {"name": "héllo"},
        expect={"name": "héllo"},
    ),
    Case(
        "a string above maxLength is too long",
        obj_schema({"name": {"type": "string", "maxLength": 5}}),
        {"name": "héllo!"},
        errors=["spec.name: Too long: may not be more than 5 bytes", BLOCKED],
    ),
    Case(
        "a string not matching the pattern is invalid",
        obj_schema({"name": {"type": "string", "pattern": "^[a-z]+$"}}),
        {"name": "Bad"},
        errors=["spec.name: Invalid value: \"Bad\": spec.name in body should match '^[a-z]+$'"],
    ),
    Case(
        "a malformed date-time is a type error and a valid one passes",
        obj_schema(
            {"at": {"type": "string", "format": "date-time"}, "ok": {"type": "string", "format": "date-time"}}
        ),
        {"at": "yesterday", "ok": "2024-05-01T10:00:00.5+02:00"},
        errors=[
            'spec.at: Invalid value: "yesterday": spec.at in body must be of type date-time: "yesterday"',
            BLOCKED,
        ],
    ),
    Case(
        "int32 and int64 formats are not checked, as Kubernetes strips them",
        obj_schema({"n": {"type": "integer", "format": "int32"}}),
        {"n": 2**40},
        expect={"n": 2**40},
    ),
    Case(
        "too few items is invalid",
        obj_schema({"tags": {"type": "array", "items": STR, "minItems": 1}}),
        {"tags": []},
        errors=["spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items"],
    ),
    Case(
        "too many items is reported as Too many",
        obj_schema({"tags": {"type": "array", "items": STR, "maxItems": 2}}),
        {"tags": ["a", "b", "c"]},
        errors=["spec.tags: Too many: 3: must have at most 2 items", BLOCKED],
    ),
    Case(
        "uniqueItems rejects duplicates",
        obj_schema({"tags": {"type": "array", "items": STR, "uniqueItems": True}}),
        {"tags": ["a", "a"]},
        errors=['spec.tags: Invalid value: "": spec.tags in body shouldn\'t contain duplicates'],
    ),
    Case(
        "minProperties and maxProperties bound the number of keys",
        obj_schema(
            {
                "few": {"type": "object", "additionalProperties": STR, "minProperties": 2},
                "many": {"type": "object", "additionalProperties": STR, "maxProperties": 1},
            }
        ),
        {"few": {"a": "1"}, "many": {"a": "1", "b": "2"}},
        errors=[
            "spec.few: Invalid value: 1: spec.few in body should have at least 2 properties",
            "spec.many: Too many: 2: must have at most 1 items",
            BLOCKED,
        ],
    ),
    Case(
        "errors inside additionalProperties values are named by key",
        obj_schema(
            {"labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 2}}}
        ),
        {"labels": {"ok": "ab", "bad": "abc"}},
        errors=["spec.labels.bad: Too long: may not be more than 2 bytes", BLOCKED],
    ),
    Case(
        "a list-type set rejects duplicate items",
        obj_schema({"tags": {"type": "array", "items": STR, "x-kubernetes-list-type": "set"}}),
        {"tags": ["a", "b", "a"]},
        errors=['spec.tags[2]: Duplicate value: "a"'],
    ),
    Case(
        "a list-type map rejects duplicate keys",
        obj_schema(
            {
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": obj_schema({"name": STR, "port": INT}, required=["name"]),
                }
            }
        ),
        {"ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}]},
        errors=['spec.ports[1]: Duplicate value: {"name":"http"}'],
    ),
    Case(
        "all errors are collected, not only the first",
        obj_schema(
            {
                "name": {"type": "string", "minLength": 1},
                "n": {"type": "integer", "minimum": 1},
                "tags": {"type": "array", "items": STR, "x-kubernetes-list-type": "set"},
            }
        ),
        {"name": "", "n": 0, "tags": ["a", "a"]},
        errors=[
            'spec.name: Invalid value: "": spec.name in body should be at least 1 chars long',
            "spec.n: Invalid value: 0: spec.n in body should be greater than or equal to 1",
            'spec.tags[1]: Duplicate value: "a"',
        ],
    ),
    # ---------------------------------------------------------------- CEL
    Case(
        "a failing rule on an object reports the object without its value",
        obj_schema(
            {"replicas": INT, "max": INT},
            **{
                "x-kubernetes-validations": [
                    {"rule": "self.replicas <= self.max", "message": "replicas must not exceed max"}
                ]
            },
        ),
        {"replicas": 3, "max": 2},
        errors=["spec: Invalid value: replicas must not exceed max"],
    ),
    Case(
        "a failing rule on a scalar shows the value",
        obj_schema(
            {
                "name": {
                    "type": "string",
                    "x-kubernetes-validations": [
                        {"rule": "self.lowerAscii() == self", "message": "name must be lowercase"}
                    ],
                }
            }
        ),
        {"name": "UPPER"},
        errors=['spec.name: Invalid value: "UPPER": name must be lowercase'],
    ),
    Case(
        "a rule without a message reports the failed rule",
        obj_schema({"n": {"type": "integer", "x-kubernetes-validations": [{"rule": "self % 2 == 0"}]}}),
        {"n": 3},
        errors=["spec.n: Invalid value: 3: failed rule: self % 2 == 0"],
    ),
    Case(
        "fieldPath moves the error to the named child and reason sets its type",
        obj_schema(
            {"model": STR, "kind": STR},
            **{
                "x-kubernetes-validations": [
                    {
                        "rule": "!has(self.model) || self.model.trim() != ''",
                        "fieldPath": ".model",
                        "message": "must not be blank",
                    },
                    {
                        "rule": "has(self.kind)",
                        "reason": "FieldValueRequired",
                        "fieldPath": ".kind",
                        "message": "kind is needed",
                    },
                    {
                        "rule": "!has(self.model) || self.model != 'x'",
                        "reason": "FieldValueForbidden",
                        "message": "no x",
                    },
                ]
            },
        ),
        {"model": " "},
        errors=[
            "spec.model: Invalid value: must not be blank",
            "spec.kind: Required value: kind is needed",
        ],
    ),
    Case(
        "a Forbidden reason renders as Forbidden",
        obj_schema(
            {"model": STR},
            **{
                "x-kubernetes-validations": [
                    {"rule": "self.model != 'x'", "reason": "FieldValueForbidden", "message": "no x"}
                ]
            },
        ),
        {"model": "x"},
        errors=["spec: Forbidden: no x"],
    ),
    Case(
        "messageExpression builds the message from self",
        obj_schema(
            {"n": INT},
            **{
                "x-kubernetes-validations": [
                    {
                        "rule": "self.n < 10",
                        "message": "too big",
                        "messageExpression": "'n is ' + string(self.n) + ', the limit is 9'",
                    }
                ]
            },
        ),
        {"n": 12},
        errors=["spec: Invalid value: n is 12, the limit is 9"],
    ),
    Case(
        "a messageExpression that fails falls back to message",
        obj_schema(
            {"n": INT},
            **{
                "x-kubernetes-validations": [
                    {"rule": "self.n < 10", "message": "too big", "messageExpression": "self.missing"}
                ]
            },
        ),
        {"n": 12},
        errors=["spec: Invalid value: too big"],
    ),
    Case(
        "rules on array items report the item path",
        obj_schema(
            {
                "items": {
                    "type": "array",
                    "items": obj_schema(
                        {"name": STR},
                        **{
                            "x-kubernetes-validations": [
                                {"rule": "self.name.size() > 1", "message": "short", "fieldPath": ".name"}
                            ]
                        },
                    ),
                }
            }
        ),
        {"items": [{"name": "ok"}, {"name": "x"}]},
        errors=["spec.items[1].name: Invalid value: short"],
    ),
    Case(
        "rules on additionalProperties values report bracketed keys",
        obj_schema(
            {
                "labels": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "string",
                        "x-kubernetes-validations": [{"rule": "self != ''", "message": "empty"}],
                    },
                }
            }
        ),
        {"labels": {"a": "1", "b": ""}},
        errors=['spec.labels[b]: Invalid value: "": empty'],
    ),
    Case(
        "a runtime error in a rule is reported as an evaluation error",
        obj_schema({"a": STR}, **{"x-kubernetes-validations": [{"rule": "self.a == 'x'"}]}),
        {},
        errors=["spec: Invalid value: \"object\": no such key: a evaluating rule: self.a == 'x'"],
    ),
    Case(
        "a root rule sees metadata.name and reports at the root",
        obj_schema({}),
        {},
        root_rules=[{"rule": "self.metadata.name.size() <= 1", "message": "name too long"}],
        errors=["<nil>: Invalid value: name too long"],
    ),
    # ---------------------------------------------------------------- transition rules and ratcheting
    Case(
        "an immutable field cannot change on UPDATE",
        obj_schema(
            {
                "ref": {
                    "type": "string",
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "ref is immutable"}],
                }
            }
        ),
        {"ref": "b"},
        old={"ref": "a"},
        errors=['spec.ref: Invalid value: "b": ref is immutable'],
    ),
    Case(
        "a transition rule is not evaluated on CREATE",
        obj_schema(
            {
                "ref": {
                    "type": "string",
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "ref is immutable"}],
                }
            }
        ),
        {"ref": "b"},
        expect={"ref": "b"},
    ),
    Case(
        "a transition rule is not evaluated when the field did not exist before",
        obj_schema(
            {
                "ref": {
                    "type": "string",
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}],
                }
            }
        ),
        {"ref": "b"},
        old={},
        expect={"ref": "b"},
    ),
    Case(
        "a flag may go from false to true",
        obj_schema(
            {
                "cancel": {
                    "type": "boolean",
                    "x-kubernetes-validations": [{"rule": "!oldSelf || self", "message": "cancel is final"}],
                }
            }
        ),
        {"cancel": True},
        old={"cancel": False},
        expect={"cancel": True},
    ),
    Case(
        "a flag may not go from true to false",
        obj_schema(
            {
                "cancel": {
                    "type": "boolean",
                    "x-kubernetes-validations": [{"rule": "!oldSelf || self", "message": "cancel is final"}],
                }
            }
        ),
        {"cancel": False},
        old={"cancel": True},
        errors=["spec.cancel: Invalid value: false: cancel is final"],
    ),
    Case(
        "an optionalOldSelf rule also runs on CREATE",
        obj_schema(
            {
                "n": {
                    "type": "integer",
                    "x-kubernetes-validations": [
                        {
                            "rule": "oldSelf.hasValue() || self == 0",
                            "optionalOldSelf": True,
                            "message": "must start at 0",
                        }
                    ],
                }
            }
        ),
        {"n": 5},
        errors=["spec.n: Invalid value: 5: must start at 0"],
    ),
    Case(
        "a transition rule inside a list-type map item correlates by key",
        obj_schema(
            {
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": obj_schema(
                        {"name": STR, "port": INT},
                        **{
                            "x-kubernetes-validations": [
                                {"rule": "self.port == oldSelf.port", "message": "port is immutable"}
                            ]
                        },
                    ),
                }
            }
        ),
        {"ports": [{"name": "new", "port": 1}, {"name": "http", "port": 81}]},
        old={"ports": [{"name": "http", "port": 80}]},
        errors=["spec.ports[1]: Invalid value: port is immutable"],
    ),
    Case(
        "ratcheting accepts an unchanged invalid field on UPDATE",
        obj_schema({"name": {"type": "string", "maxLength": 3}, "n": INT}),
        {"name": "toolong", "n": 2},
        old={"name": "toolong", "n": 1},
        expect={"name": "toolong", "n": 2},
    ),
    Case(
        "ratcheting does not hide errors in changed fields",
        obj_schema({"name": {"type": "string", "maxLength": 3}, "n": INT}),
        {"name": "toolonger", "n": 2},
        old={"name": "toolong", "n": 1},
        errors=["spec.name: Too long: may not be more than 3 bytes", BLOCKED],
    ),
    Case(
        "a CEL rule on an unchanged field is ratcheted: not evaluated, no error",
        obj_schema(
            {
                "name": {
                    "type": "string",
                    "x-kubernetes-validations": [
                        {"rule": "self.lowerAscii() == self", "message": "name must be lowercase"}
                    ],
                },
                "n": INT,
            }
        ),
        {"name": "UPPER", "n": 2},
        old={"name": "UPPER", "n": 1},
        expect={"name": "UPPER", "n": 2},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_admission_of_custom_objects(case: Case):
    crd = make_crd(case.schema, root_rules=case.root_rules)
    obj = make_obj(case.spec)
    old = make_obj(case.old) if case.old is not None else None
    if case.errors is not None:
        with pytest.raises(FieldError) as info:
            admit_custom_object(crd, "v1", obj, old, field_validation=case.mode)
        assert sorted(errors_of(info.value)) == sorted(case.errors)
        assert info.value.status == 422
        assert info.value.reason == "Invalid"
    else:
        result, warnings = admit_custom_object(crd, "v1", obj, old, field_validation=case.mode)
        assert result["spec"] == case.expect
        assert sorted(warnings) == sorted(case.warnings)


def test_strict_mode_rejects_unknown_fields_like_the_strict_decoder():
    crd = make_crd(obj_schema({"a": STR}))
    with pytest.raises(FieldError) as info:
        admit_custom_object(crd, "v1", make_obj({"a": "x", "foo": 1, "bar": {"x": 1}}, bogus="m"), None)
    err = info.value
    assert err.status == 400
    assert err.reason == "BadRequest"
    assert err.message == (
        'Widget in version "v1" cannot be handled as a Widget: strict decoding error: '
        'unknown field "metadata.bogus", unknown field "spec.bar", unknown field "spec.foo"'
    )
    assert "details" not in err.to_status()


def test_one_error_message_has_no_brackets_and_several_have():
    crd = make_crd(obj_schema({"a": STR, "b": STR}, required=["a"]))
    with pytest.raises(FieldError) as one:
        admit_custom_object(crd, "v1", make_obj({"b": "x"}), None)
    assert one.value.message == (
        'Widget.example.com "w1" is invalid: [spec.a: Required value, ' + BLOCKED + "]"
    )
    crd = make_crd(obj_schema({"a": {"type": "string", "minLength": 2}}))
    with pytest.raises(FieldError) as single:
        admit_custom_object(crd, "v1", make_obj({"a": "x"}), None)
    assert single.value.message == (
        'Widget.example.com "w1" is invalid: spec.a: Invalid value: "x": spec.a in body should be at least 2 chars long'
    )
    status = single.value.to_status()
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert status["details"] == {
        "name": "w1",
        "group": "example.com",
        "kind": "Widget",
        "causes": [
            {
                "reason": "FieldValueInvalid",
                "message": 'Invalid value: "x": spec.a in body should be at least 2 chars long',
                "field": "spec.a",
            }
        ],
    }


def test_inputs_are_never_mutated():
    schema = obj_schema(
        {
            "mode": {"type": "string", "default": "A"},
            "items": {"type": "array", "items": obj_schema({"k": {"type": "string", "default": "z"}})},
        }
    )
    crd = make_crd(schema)
    obj = make_obj({"items": [{}], "unknown": 1})
    old = make_obj({"items": []})
    snapshot = copy.deepcopy((crd, obj, old))
    result, _ = admit_custom_object(crd, "v1", obj, old, field_validation="Ignore")
    assert result["spec"] == {"mode": "A", "items": [{"k": "z"}]}
    assert (crd, obj, old) == snapshot


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (0.5, "0.5"),
        (100000.0, "100000"),
        (1000000.0, "1e+06"),
        (1.5e-05, "1.5e-05"),
        (-2.25, "-2.25"),
    ],
)
def test_floats_render_like_go(value, text):
    assert go_float(value) == text


# ------------------------------------------------------------------------------- property test

SMALL_SCHEMA = obj_schema(
    {
        "name": {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^[a-z]*$"},
        "count": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
        "ratio": {"type": "number", "nullable": True},
        "mode": {"type": "string", "enum": ["A", "B"]},
        "tags": {"type": "array", "maxItems": 3, "items": STR, "x-kubernetes-list-type": "set"},
        "ports": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": obj_schema(
                {"name": STR, "port": {"x-kubernetes-int-or-string": True}}, required=["name"]
            ),
        },
        "labels": {"type": "object", "additionalProperties": STR},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "nested": obj_schema(
            {"flag": {"type": "boolean", "default": False}},
            **{
                "x-kubernetes-validations": [{"rule": "!has(self.flag) || self.flag || true", "message": "x"}]
            },
        ),
    },
    required=["name"],
    **{
        "x-kubernetes-validations": [
            {"rule": "!has(self.count) || self.count < 9", "message": "count below 9", "fieldPath": ".count"},
            {"rule": "self.name == oldSelf.name", "message": "name is immutable"},
        ]
    },
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-20, 20)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
spec_values = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.text(alphabet="abcXYZ", max_size=10), json_values),
        "count": json_values,
        "ratio": json_values,
        "mode": st.sampled_from(["A", "B", "C"]) | json_values,
        "tags": st.lists(st.sampled_from(["a", "b", "c"]), max_size=5) | json_values,
        "ports": st.lists(
            st.fixed_dictionaries(
                {}, optional={"name": st.sampled_from(["x", "y"]) | json_values, "port": json_values}
            ),
            max_size=3,
        )
        | json_values,
        "labels": st.dictionaries(st.text(max_size=4), json_values, max_size=3) | json_values,
        "free": json_values,
        "nested": json_values,
        "junk": json_values,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=spec_values | json_values,
    old_spec=st.none() | spec_values,
    mode=st.sampled_from(["Strict", "Warn", "Ignore"]),
)
def test_random_json_only_ever_fails_with_field_error(spec, old_spec, mode):
    crd = make_crd(SMALL_SCHEMA)
    obj = make_obj(spec)
    old = make_obj(old_spec) if old_spec is not None else None
    try:
        result, warnings = admit_custom_object(crd, "v1", obj, old, field_validation=mode)
    except FieldError as exc:
        assert exc.causes
        assert exc.status in (400, 422)
        json.dumps(exc.to_status())
        return
    assert all(isinstance(w, str) for w in warnings)
    # an admitted object is stable: admitting it again changes nothing and raises nothing
    again, _ = admit_custom_object(crd, "v1", result, old, field_validation="Strict")
    assert again == result


# ------------------------------------------------------------------------------- CRD rule checks


def test_a_crd_whose_rule_selects_an_untyped_preserved_field_is_rejected():
    crd = make_crd(
        obj_schema(
            {"tools": {"x-kubernetes-preserve-unknown-fields": True}},
            **{"x-kubernetes-validations": [{"rule": "!has(self.tools) || self.tools == 'all'"}]},
        )
    )
    from testcluster.schema import check_crd_rules, crd_rule_problems

    (problem,) = crd_rule_problems(crd)
    assert (
        problem["field"]
        == "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    )
    assert problem["message"] == (
        "Invalid value: \"!has(self.tools) || self.tools == 'all'\": compilation failed: "
        "ERROR: <input>:1:11: undefined field 'tools'\nERROR: <input>:1:26: undefined field 'tools'"
    )
    with pytest.raises(FieldError) as info:
        check_crd_rules(crd)
    assert info.value.message.startswith(
        'CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid: '
    )


def test_a_crd_with_a_syntax_error_in_a_message_expression_is_rejected_and_good_rules_pass():
    from testcluster.schema import crd_rule_problems

    good = make_crd(
        obj_schema(
            {"n": INT},
            **{
                "x-kubernetes-validations": [
                    {"rule": "self.n > 0", "messageExpression": "'n=' + string(self.n)"}
                ]
            },
        )
    )
    assert crd_rule_problems(good) == []
    bad = make_crd(
        obj_schema(
            {"n": INT},
            **{"x-kubernetes-validations": [{"rule": "self.n > 0", "messageExpression": "'n=' +"}]},
        )
    )
    (problem,) = crd_rule_problems(bad)
    assert problem["field"].endswith("x-kubernetes-validations[0].messageExpression")
    assert "Syntax error" in problem["message"]

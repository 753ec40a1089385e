"""Kubernetes timestamps (RFC 3339, UTC, second precision): one place to write and read them.
A wire format of the API (what the API server writes in ``creationTimestamp`` and conditions),
so it lives with the API types, below everything that reads or writes one."""

from __future__ import annotations

import datetime


def iso(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(value: str | None) -> datetime.datetime | None:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None

"""Kubernetes timestamps (RFC 3339, UTC, second precision): one place to write and read them."""

from __future__ import annotations

import datetime


def iso(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(value: str | None) -> datetime.datetime | None:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None

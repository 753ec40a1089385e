"""Operator logs are JSON lines with the fields an aggregator indexes."""

from __future__ import annotations

import json
import logging

from sessionops.logs import JsonFormatter


def test_a_record_becomes_one_json_object() -> None:
    record = logging.LogRecord("sessionops.x", logging.WARNING, __file__, 1, "run %s is %s", ("r1", "Failed"), None)
    record.namespace = "team-a"
    line = JsonFormatter().format(record)
    entry = json.loads(line)
    assert entry["message"] == "run r1 is Failed" and entry["level"] == "WARNING"
    assert entry["namespace"] == "team-a" and "\n" not in line

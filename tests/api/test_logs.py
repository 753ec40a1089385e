"""Operator logs are JSON lines with the fields an aggregator indexes."""

from __future__ import annotations

import json
import logging

from sessionops.platform.logs import JsonFormatter, TextFormatter, ref


def test_a_record_becomes_one_json_object() -> None:
    record = logging.LogRecord("sessionops.x", logging.WARNING, __file__, 1, "run %s is %s", ("r1", "Failed"), None)
    record.namespace = "team-a"
    line = JsonFormatter().format(record)
    entry = json.loads(line)
    assert entry["message"] == "run r1 is Failed" and entry["level"] == "WARNING"
    assert entry["namespace"] == "team-a" and "\n" not in line


BODY = {"apiVersion": "sessionops.dev/v1alpha1", "kind": "AgentInput",
        "metadata": {"namespace": "team-a", "name": "in-1", "uid": "u-123"}}


def _kopf_failure_line(formatter: logging.Formatter) -> str:
    """kopf's own handler-failure line, logged the way kopf logs it (its object logger)."""
    import kopf
    from kopf._core.actions.loggers import LocalObjectLogger

    records: list[logging.LogRecord] = []
    capture = logging.Handler()
    capture.emit = records.append  # type: ignore[method-assign]
    kopf_logger = logging.getLogger("kopf.objects")
    kopf_logger.addHandler(capture)
    try:
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            LocalObjectLogger(body=kopf.Body(BODY), settings=kopf.OperatorSettings()).exception(
                "Handler 'input_changed' failed with an exception and will ignore it: boom")
    finally:
        kopf_logger.removeHandler(capture)
    [record] = records
    return formatter.format(record)


def test_a_kopf_handler_failure_names_the_object_kind_namespace_name_and_uid() -> None:
    entry = json.loads(_kopf_failure_line(JsonFormatter()))
    assert entry["object"] == {"apiVersion": "sessionops.dev/v1alpha1", "kind": "AgentInput", "namespace": "team-a",
                               "name": "in-1", "uid": "u-123"}
    assert (entry["namespace"], entry["name"]) == ("team-a", "in-1")
    assert "input_changed" in entry["message"] and "RuntimeError: boom" in entry["exception"]


def test_text_lines_are_prefixed_with_the_object() -> None:
    assert _kopf_failure_line(TextFormatter()).startswith("[AgentInput team-a/in-1 uid=u-123] ")


def test_our_own_lines_name_the_object_the_same_way() -> None:
    record = logging.LogRecord("sessionops.manager.scans", logging.ERROR, __file__, 1, "scan failed", (), None)
    for key, value in ref({**BODY, "kind": "AgentRun"}).items():
        setattr(record, key, value)
    assert json.loads(JsonFormatter().format(record))["object"]["kind"] == "AgentRun"

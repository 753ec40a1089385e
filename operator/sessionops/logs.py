"""Structured logs: one JSON object per line. Messages never carry snapshots or secrets
(handlers log names and phases only); this only shapes what is logged."""

from __future__ import annotations

import json
import logging
import os


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname,
                 "logger": record.name, "message": record.getMessage()}
        for key in ("namespace", "name", "run", "session"):
            if hasattr(record, key):
                entry[key] = getattr(record, key)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure(level: int = logging.INFO) -> None:
    """JSON lines unless ``SESSIONOPS_LOG_FORMAT=text`` (handy on a terminal)."""
    handler = logging.StreamHandler()
    if os.environ.get("SESSIONOPS_LOG_FORMAT", "json") == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)

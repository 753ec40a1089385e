"""Structured logs: one JSON object per line. Messages never carry snapshots or secrets
(handlers log names and phases only); this only shapes what is logged.

Every line about an object names it: kopf's own lines (a handler failed, will retry, ...)
come through its object logger, whose records carry ``k8s_ref`` (apiVersion, kind,
namespace, name, uid); our lines pass the same ``extra`` with ``ref(obj)``. The formatter
turns that into an ``object`` field (and a ``[kind namespace/name]`` prefix in text mode),
so a failure can be traced to its object without guessing from the message.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any

REF_KEYS = ("apiVersion", "kind", "namespace", "name", "uid")


def ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``extra`` for a log call about ``obj``: the same reference kopf's object logger adds."""
    meta = obj.get("metadata") or {}
    return {"k8s_ref": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                        "namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid")}}


def object_of(record: logging.LogRecord) -> dict[str, Any] | None:
    raw = getattr(record, "k8s_ref", None)
    if not isinstance(raw, Mapping):
        return None
    return {k: raw[k] for k in REF_KEYS if raw.get(k)}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname,
                                 "logger": record.name, "message": record.getMessage()}
        # Not "name": a LogRecord's name is its logger's (logging refuses it in extra).
        for key in ("namespace", "run", "session"):
            if hasattr(record, key):
                entry[key] = getattr(record, key)
        if obj := object_of(record):
            entry["object"] = obj
            entry.setdefault("namespace", obj.get("namespace"))
            entry.setdefault("name", obj.get("name"))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        if obj := object_of(record):
            where = "/".join(p for p in (obj.get("namespace"), obj.get("name")) if p)
            return f"[{obj.get('kind', '')} {where} uid={obj.get('uid', '')}] {line}"
        return line


def configure(level: int = logging.INFO) -> None:
    """JSON lines unless ``SESSIONOPS_LOG_FORMAT=text`` (handy on a terminal)."""
    handler = logging.StreamHandler()
    if os.environ.get("SESSIONOPS_LOG_FORMAT", "json") == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # kopf logs "Handler ... succeeded." at INFO for every handler of every event: about ten
    # lines per accepted input, a tenth of the operator's CPU at load, and nothing a user acts
    # on. Its warnings and errors (a failed handler, a retry) still come through.
    logging.getLogger("kopf.objects").setLevel(max(level, logging.WARNING))

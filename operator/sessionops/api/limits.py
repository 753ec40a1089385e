"""Size budgets: what one object may carry (docs/limits.md).

Every accepted object must stay manageable: labelled, annotated, its finalizers removed, updated
through its allowed fields and deleted. etcd refuses objects over 1.5 MiB, and annotations alone
may take 256 KiB (kubectl's last-applied-configuration counts), so the content an input carries,
plus the snapshot it copies, plus 256 KiB of annotations, plus bookkeeping stays under 1.5 MiB:
640 KiB + 320 KiB + 256 KiB + status and managedFields ~ 1.25 MiB.
"""

from __future__ import annotations

import json
from typing import Any

MESSAGES = 20
"""Messages of one Message input."""
MESSAGE_CHARS = 32_768
"""Characters of one message (as in the source)."""
INPUT_CONTENT_BYTES = 640 * 1024
"""Stored bytes of the text one input carries: its messages, or its answers and decision messages
together. 20 messages of 32,768 plain characters fit exactly; text that takes more bytes a character
(UTF-8 beyond ASCII, JSON escapes), fewer."""
ANSWER_CHARS = 32_768
"""Characters of one answer, or of one option of a multi-select answer."""
ANSWER_OPTIONS = 64
"""Options picked in one multi-select answer."""
CONTEXT_VALUE_CHARS = 32_768
"""Characters of one context value (a session's spec.context, an Agent's default or enum value)."""
CONTEXT_BYTES = 64 * 1024
"""Stored bytes of a resolved context (the session's values with the Agent's defaults)."""
SYSTEM_PROMPT_CHARS = 65_536
"""Characters of an Agent's system prompt."""
SYSTEM_PROMPT_BYTES = 128 * 1024
"""Stored bytes of an Agent's system prompt."""
AGENT_SPEC_BYTES = 512 * 1024
"""Stored bytes of an Agent's spec."""
SNAPSHOT_BYTES = 320 * 1024
"""Stored bytes of a resolved context snapshot (copied into the session, each input and each run)."""


def json_size(value: Any) -> int:
    """Bytes of ``value`` as kube-apiserver stores it: compact JSON from Go's encoder, which writes
    ``<``, ``>``, ``&`` as six-byte escapes and U+2028, U+2029 as six bytes instead of three."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    escaped = sum(text.count(c) for c in "<>&")
    separators = text.count("\u2028") + text.count("\u2029")
    return len(text.encode()) + 5 * escaped + 3 * separators


def text_size(texts: list[str]) -> int:
    """Stored bytes of the characters of ``texts`` (without JSON's quotes and separators)."""
    return sum(json_size(t) - 2 for t in texts)


def over_budget(what: str, size: int, limit: int) -> str:
    """The one wording of every size refusal."""
    return f"Too long: {size} bytes as stored ({what}), more than the {limit} allowed (docs/limits.md)"

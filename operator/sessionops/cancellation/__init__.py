"""Cancellation of a turn's checkpoint (ARCHITECTURE.md section 5, step 3).

What belongs here: the phase decision of a cancelling run (``flow.py``), the three
guarded commits that leave a cancelled thread consistent (``cleanup.py``) and the
checkpoint-only graph they run through (``checkpoint_graph.py``). Only the LangGraph state API is used: no model and no tool
ever runs, and stored checkpoints are never edited directly. No Kubernetes I/O here:
the operator stops the worker and holds the session before calling in.
"""

from sessionops.cancellation.checkpoint_graph import CheckpointOnlyError, checkpoint_graph
from sessionops.cancellation.cleanup import (
    CANCEL_CONTENT,
    STEPS,
    CleanupError,
    CleanupReport,
    Commit,
    acleanup_thread,
    cancel_message_id,
    cleanup_thread,
    missing_results,
    pairing_errors,
    plan,
)

__all__ = [
    "CANCEL_CONTENT",
    "STEPS",
    "CheckpointOnlyError",
    "CleanupError",
    "CleanupReport",
    "Commit",
    "acleanup_thread",
    "cancel_message_id",
    "checkpoint_graph",
    "cleanup_thread",
    "missing_results",
    "pairing_errors",
    "plan",
]

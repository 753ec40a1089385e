"""Cancellation of a turn (ARCHITECTURE.md section 5).

``flow`` decides the phases of a cancelling run (pure); ``reconcile`` is its adapter: it
observes the writers (Job, pods, the session Lease), stops them, and only then runs the
three guarded checkpoint commits of ``cleanup`` through the checkpoint-only graph of
``checkpoint_graph``; ``transcript`` records the cancelled calls. The checkpoint steps use only
the LangGraph state API and never Kubernetes (an import contract): no model or tool ever runs
and stored checkpoints are never edited directly.
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

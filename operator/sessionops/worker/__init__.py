"""The worker: ``python -m sessionops.worker``, one process per execution segment (Job).

What belongs here: reading the segment's environment (``env``), the session Lease
(``lease``), execution-time authorization with SubjectAccessReviews (``access``), the chat
model (``model``), the checkpointer and thread housekeeping (``thread``), steer delivery
(``steers``), MCP servers (``mcp``, reached through ``egress``), delegation (``delegation``),
the transcript (``transcript``, written by ``publish``), the pure turn decisions (``plan``:
what to run; ``outcome``: what to report) and the orchestration (``segment``, which ``startup``
imports without what a segment never uses). Its Kubernetes adapter is
``sessionops.platform.worker_kube``; workspace and shell tools run in the tools process
(``sessionops.toolbox``), not here.

The agent graph itself is built by ``sessionops.agent`` from the run's frozen
``spec.contextSnapshot``. Never log the snapshot, inputs' text or secrets: names only.
"""

"""The worker: ``python -m sessionops.worker``, one process per execution segment (Job).

What belongs here: reading the segment's environment (``env``), the worker's own
Kubernetes adapter (``k8s``), the session Lease (``lease``), execution-time
authorization with SubjectAccessReviews (``access``), the chat model (``model``), the
checkpointer and thread housekeeping (``thread``), steer delivery (``steers``), the
pure turn decisions (``plan``: what to run; ``outcome``: what to report) and the
orchestration (``segment``).

The agent graph itself is built by ``sessionops.agent`` from the run's frozen
``spec.contextSnapshot``. Never log the snapshot, inputs' text or secrets: names only.
"""

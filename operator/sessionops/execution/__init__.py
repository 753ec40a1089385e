"""Execution: the run controller. ``segments`` decides (pure), ``jobs`` builds worker Jobs
(pure), ``reconcile`` applies; before a Job, ``authorship`` re-checks the Agent author's rights
and ``credentials`` provides the namespace's database Secret. The worker process itself lives in
``sessionops.worker``.
"""

"""Execution: the run controller. ``segments`` decides (pure), ``jobs`` builds worker Jobs
(pure), ``reconcile`` applies. The worker process itself lives in ``sessionops.worker``."""

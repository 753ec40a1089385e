"""The pod runner: plays the kubelet and the Job controller for the test cluster, running
each Job's container as a real subprocess on this machine.

``runner`` (the ``PodRunner`` and its ``Execution`` records), ``envresolve`` (a
container's environment as the kubelet resolves it), ``threaded`` (the test cluster on
its own thread, for synchronous callers), ``kube`` (its API client), ``__main__`` (the CLI).
"""

from testcluster.podrunner.runner import Execution, PodRunner

__all__ = ["Execution", "PodRunner"]

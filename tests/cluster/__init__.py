"""A faithful in-memory Kubernetes API server for tests (placeholder docstring, completed below)."""

from .server import FaithfulCluster, running_cluster

__all__ = ['FaithfulCluster', 'running_cluster']

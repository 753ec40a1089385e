"""FaithfulCluster: an in-memory Kubernetes API server for tests, served over HTTPS on 127.0.0.1.

Built on kmock 0.8's ``KubernetesEmulator`` (kmock's DSL reactions still take precedence, for fault injection:
``cluster['patch', kmock.resource('batch', 'v1', 'jobs')] << 500``), with its own store and API-server semantics:
uid/resourceVersion/generation/creationTimestamp/generateName; 404/409/410/415/422 ``Status`` bodies as
kube-apiserver writes them; PUT, JSON patch, merge patch, strategic merge patch (built-ins), server-side apply with
managedFields; status subresources; finalizers, deletionTimestamp, propagation policies, preconditions, collection
deletes; synchronous garbage collection by ownerReference uid; namespaces (and their deletion), default
ServiceAccount and kube-root-ca.crt per namespace; label/field selectors; list pagination; watches (resume, 410,
bookmarks, timeouts, initial events); discovery; OpenAPI v2/v3 (real v1.31 schemas for built-ins from
``kubernetes-validate``, CRD schemas for custom resources); server-side tables for ``kubectl get``; protobuf
request bodies (client-go typed clients: ``kubectl create ...``, Helm's release Secrets), decoded with the schema
read from the local kubectl binary's Go type metadata. Schema/CEL validation, admission webhooks and access reviews
are delegated to ``schema.py``, ``admission.py``, ``authz.py`` through ``hooks.py``; authentication is ``authn.py``,
authorization ``rbac.py``.

Start it with ``running_cluster()``, or from a shell with ``python -m testcluster serve --kubeconfig PATH [--port N]``.
The pod runner (``testcluster.podrunner``) plays the kubelet and the Job controller.

What it does NOT emulate, or simplifies, is listed in the package's ``README.md``: read it before trusting a test.
"""

from .server import FaithfulCluster, running_cluster

__version__ = '0.1.0'
"""Equal to the distribution's version in ``pyproject.toml`` (a test holds them together)."""

__all__ = ['FaithfulCluster', '__version__', 'running_cluster']

"""FaithfulCluster: an in-memory Kubernetes API server for tests, served over HTTP on 127.0.0.1.

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

Start it with ``running_cluster()`` (or the ``cluster`` pytest fixture in ``tests/conftest.py``), or from a shell
with ``python -m tests.cluster serve --kubeconfig PATH [--port N]``.

What is NOT emulated (or simplified):

* Authentication and authorization (see ``README.md``): HTTPS only (a throw-away CA; kubeconfigs carry it), bearer
  tokens (the admin's, people's from ``cluster.add_user``, ServiceAccount tokens from TokenRequests, optionally
  bound to a Pod), impersonation with the ``impersonate`` verb, and RBAC (``rbac.py``) for every request and
  every SubjectAccessReview; ``system:masters`` may do everything. No client certificates, no webhook/ABAC/Node
  authorizers.
* No controllers except the garbage collector, the namespace lifecycle (deletion, default ServiceAccount,
  kube-root-ca.crt) and the CRD lifecycle (Established/NamesAccepted, cleanup on deletion): no scheduler, no
  kubelet (pods stay Pending; ``pods/log`` is empty), no Deployment/ReplicaSet/Job/CronJob controllers, no
  endpoints, no service-account tokens. Pods are deleted immediately (no graceful termination).
* Admission order: the CR schema (pruning/defaulting/validation) runs, then ``run_admission`` (mutating, then
  validating webhooks in one call), then the CR schema again on the mutated object (pruning of webhook-added fields
  silently), then built-in validation. So a validating webhook may see an object that the final schema validation
  rejects; the real server validates between the two webhook phases. Controller writes (GC, namespace/CRD cleanup,
  defaults for new namespaces) skip admission.
* Built-in kinds: only the defaults and validations listed in ``builtin.py``; ``fieldValidation`` is ignored for
  them (unknown fields are kept). No conversion between versions of a CRD (objects are stored once and served
  under every version with only ``apiVersion`` rewritten). ``/scale``, ``pods/exec|attach|portforward|eviction``
  are not served. Core ``events`` and ``events.k8s.io`` events are separate stores.
* Strategic merge patch: list merge keys and strategies come from the real schemas (``x-kubernetes-patch-*``);
  ``$patch: delete|replace|merge``, ``$retainKeys`` and ``$deleteFromPrimitiveList`` are honoured,
  ``$setElementOrder`` is ignored (merged items keep their existing order; new ones are appended).
* Server-side apply: field sets are tracked per manager/operation/subresource in ``managedFields`` (FieldsV1).
  Re-applying the same configuration is a no-op, fields dropped from a manager's configuration are removed unless
  another manager owns them, conflicts (409) are value-based against all other managers and ``force=true``
  transfers ownership. Simplified: the applied configuration is not defaulted before diffing (only a missing
  ``protocol`` in list-map keys defaults to TCP); Update ownership is computed by diffing old/new objects;
  incoming ``managedFields`` in requests are ignored.
* Size limits as kube-apiserver with etcd's defaults: request bodies over 3 MiB get 413, objects whose stored JSON
  exceeds 1.5 MiB get etcd's 500 ``etcdserver: request is too large``, annotations over 256 KiB in total get 422.
* Lists: ``continue`` tokens resume after the last key on the current state (not a snapshot of the first page's
  resourceVersion); ``resourceVersion``/``resourceVersionMatch`` on lists are accepted and ignored.
* Watches: one global event history of ``history_size`` (10k) events; older resourceVersions (or anything before
  ``cluster.compact()``) get an ``ERROR`` event with a 410 ``Expired`` Status. Bookmarks every
  ``bookmark_interval`` seconds.
* Protobuf: request bodies only (responses are always JSON, which client-go accepts), and only where a client-go
  binary (``.tools/bin/kubectl``, or ``$FAITHFUL_CLUSTER_GO_BINARY``) can be read; otherwise 415.
* No aggregated discovery (clients fall back to the legacy documents), no CBOR, no HTTP/2.
* kmock's own ``objects`` view is not kept in sync; use ``cluster.get_object()``/``list_objects()`` or HTTP.
"""

from .server import FaithfulCluster, running_cluster

__all__ = ['FaithfulCluster', 'running_cluster']

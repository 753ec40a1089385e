"""The platform: everything that touches the world outside a decision, kept below the controllers.

- ``kube``: the operator's Kubernetes adapter (async: its hot path on the event loop through
  ``http``, the rest in a thread pool under kopf's loop);
  ``worker_kube``: the worker's (synchronous, compare-and-swap writes). These two and the
  kubectl plugin's ``cli.client`` are the only modules that call the API server.
- ``checkpoints`` and ``checkpoint_scope``: PostgreSQL (the LangGraph saver, per-namespace
  schemas and roles).
- ``store``: watch-fed slim copies of the objects the reconciles decide on, with the operator's
  own writes (``Kube.cached_get``/``cached_list`` read it); ``cache``: a few facts per object
  for the safety scans.
- ``locks``, ``logs``, ``metrics``, ``memprofile``, ``certificates``, ``webhook``: process plumbing;
  ``errors``: what the API server's answers mean.
- ``settings`` (environment) and ``configuration`` (the operator ConfigMap).

Nothing here decides what to do with a session, an input or a run: it imports only the API
types (``sessionops.api``) and reads objects through ``sessionops.views``, never a controller.
"""

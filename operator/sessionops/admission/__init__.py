"""Admission: where "frozen at receipt" is enforced (ARCHITECTURE section 2).

Pure decisions (objects in, a decision or a ``Rejection`` out): ``snapshot`` (resolution of
the frozen configuration), ``sessions``, ``inputs``, ``resume``, ``agents``, ``delegated``,
``namespaces`` and ``status`` (who may write status); ``errors`` shapes rejections.
Adapters that read what those decide on: ``authority`` (the Agent author's rights, as
SubjectAccessReviews), ``receipt`` (an input's sequence, allocated with a
compare-and-swap on its session), ``delegated_receipt`` (a delegated child session or input)
and ``worker_pods`` (the worker pods the status webhook looks up). The kopf webhooks that call
them are ``sessionops.manager.handlers.admission``.
"""

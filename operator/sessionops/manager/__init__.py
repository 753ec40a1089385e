"""The operator process (``python -m sessionops.manager``).

- ``main``: wires kopf's settings, the webhook server, the database and shared state;
- ``handlers/``: kopf registrations, each a few lines calling the controllers;
- ``runtime``: what every handler shares; ``scans``: the recovery scan over the cache;
  ``config_watch``: the operator ConfigMap as the watch delivers it; ``phases``: phase
  changes as Events and metrics.
"""

"""Which namespaces the operator serves (pure): sessions and inputs elsewhere are refused at
receipt, instead of being accepted and then waiting forever for a worker that cannot run there
(no worker ServiceAccount, Role or database Secret)."""

from __future__ import annotations

from sessionops.admission.errors import FORBIDDEN, Rejection
from sessionops.api.config import OperatorConfig


def check_served(namespace: str, config: OperatorConfig, operator_namespace: str) -> None:
    served = config.worker_namespaces
    if served is None:
        if namespace == operator_namespace:
            raise Rejection("metadata.namespace", f"sessionops does not run agents in its own namespace "
                                                  f"{operator_namespace!r}; use another namespace", FORBIDDEN)
        return
    if namespace not in served:
        listed = ", ".join(served) if served else "none"
        raise Rejection("metadata.namespace", f"sessionops does not serve namespace {namespace!r}; served "
                                              f"namespaces: {listed} (chart value workerNamespaces)", FORBIDDEN)

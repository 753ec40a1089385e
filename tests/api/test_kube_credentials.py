"""The client's credential hook runs at most every REFRESH_SECONDS, not before every request."""

from __future__ import annotations

import kubernetes

from sessionops.platform.kube import REFRESH_SECONDS, throttle_credential_refresh


def test_the_credential_hook_is_throttled_not_dropped() -> None:
    now = [100.0]
    calls: list[float] = []
    configuration = kubernetes.client.Configuration()

    def hook(config: kubernetes.client.Configuration) -> None:
        calls.append(now[0])
        config.refresh_api_key_hook = hook  # as the kubeconfig loader's does on every run

    configuration.refresh_api_key_hook = hook
    throttle_credential_refresh(configuration, clock=lambda: now[0])
    for _ in range(50):  # a burst of requests
        configuration.refresh_api_key_hook(configuration)
    assert calls == [100.0]
    now[0] += REFRESH_SECONDS
    configuration.refresh_api_key_hook(configuration)
    assert calls == [100.0, 100.0 + REFRESH_SECONDS]  # an expired token is still re-read


def test_a_configuration_without_a_hook_stays_without() -> None:
    configuration = kubernetes.client.Configuration()
    configuration.refresh_api_key_hook = None
    throttle_credential_refresh(configuration)
    assert configuration.refresh_api_key_hook is None

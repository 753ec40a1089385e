"""MCP egress at connection time: every resolved address checked, the checked address connected.

The resolver and the underlying network backend are fakes here (no socket is opened); the
loader's real HTTP path through the guard is in ``test_mcp.py``.
"""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

import pytest

from sessionops.api.config import McpEgress
from sessionops.policy.egress import Address, Policy
from sessionops.worker.egress import EgressRefused, GuardedBackend
from sessionops.worker.mcp import describe

METADATA = ipaddress.ip_address("169.254.169.254")
PUBLIC = ipaddress.ip_address("93.184.215.14")


class Inner:
    """Records where the guard connects instead of connecting."""

    def __init__(self) -> None:
        self.connected: list[tuple[str, int]] = []

    async def connect_tcp(self, host: str, port: int, **_: Any) -> Any:
        self.connected.append((host, port))
        return object()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class Dns:
    """Answers from a table; each lookup is counted (rebinding: a later lookup answers differently)."""

    def __init__(self, *answers: list[Address]) -> None:
        self.answers = list(answers)
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> list[Address]:
        self.lookups.append(host)
        return self.answers[min(len(self.lookups), len(self.answers)) - 1]


def _connect(policy: Policy, dns: Dns, host: str, port: int = 443) -> tuple[Inner, BaseException | None]:
    inner = Inner()
    backend = GuardedBackend(policy, resolver=dns, inner=inner)  # type: ignore[arg-type]
    try:
        asyncio.run(backend.connect_tcp(host, port))
    except EgressRefused as e:
        return inner, e
    return inner, None


def test_a_name_that_resolves_to_the_metadata_endpoint_is_refused_before_any_connection() -> None:
    inner, error = _connect(Policy(), Dns([METADATA]), "innocent.example")
    assert inner.connected == []
    assert str(error) == ("MCP server host innocent.example refused: innocent.example resolves to "
                          "169.254.169.254 is a link-local address (cloud metadata endpoints live here)")


def test_one_refused_address_among_public_ones_refuses_the_name() -> None:
    inner, error = _connect(Policy(), Dns([PUBLIC, ipaddress.ip_address("fd00:ec2::254")]), "mixed.example")
    assert inner.connected == [] and "AWS metadata endpoint" in str(error)


def test_the_checked_address_is_connected_never_the_name_again() -> None:
    """DNS rebinding: the second answer (metadata) is never used for this connection; the next
    connection resolves again and is checked again."""
    dns = Dns([PUBLIC], [METADATA])
    policy = Policy()
    inner = Inner()
    backend = GuardedBackend(policy, resolver=dns, inner=inner)  # type: ignore[arg-type]
    asyncio.run(backend.connect_tcp("rebind.example", 443))
    assert inner.connected == [(str(PUBLIC), 443)] and dns.lookups == ["rebind.example"]
    with pytest.raises(EgressRefused, match="resolves to 169.254.169.254"):
        asyncio.run(backend.connect_tcp("rebind.example", 443))
    assert inner.connected == [(str(PUBLIC), 443)]


def test_ip_literals_are_checked_without_dns() -> None:
    dns = Dns([PUBLIC])
    inner, error = _connect(Policy(), dns, "169.254.169.254", 80)
    assert error is not None and dns.lookups == [] and inner.connected == []
    inner, error = _connect(Policy(), dns, "93.184.215.14", 80)
    assert error is None and inner.connected == [("93.184.215.14", 80)] and dns.lookups == []


def test_the_api_server_is_refused_by_its_service_address_and_names() -> None:
    policy = Policy.of(McpEgress(), {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"})
    _, error = _connect(policy, Dns([ipaddress.ip_address("10.96.0.1")]), "api-alias.example")
    assert "is the cluster's API server" in str(error)
    _, error = _connect(policy, Dns([PUBLIC]), "kubernetes.default.svc")
    assert "kubernetes.default.svc is the cluster's API server" in str(error)
    # Another port of the same address is another server (what a local test cluster looks like).
    inner, error = _connect(policy, Dns([ipaddress.ip_address("10.96.0.1")]), "other.example", 8080)
    assert error is None and inner.connected == [("10.96.0.1", 8080)]


def test_the_allow_list_widens_by_network_and_by_host() -> None:
    by_network = Policy.of(McpEgress(allowed_cidrs=["169.254.169.0/24"]), {})
    inner, error = _connect(by_network, Dns([METADATA]), "tools.local")
    assert error is None and inner.connected == [("169.254.169.254", 443)]
    by_host = Policy.of(McpEgress(allowed_hosts=["Tools.Local."]), {})
    inner, error = _connect(by_host, Dns([METADATA]), "tools.local")
    assert error is None and inner.connected == [("169.254.169.254", 443)]
    _, error = _connect(by_host, Dns([METADATA]), "other.local")
    assert error is not None


def test_refusals_keep_their_reason_in_what_the_model_and_logs_see() -> None:
    """Other transport errors are reduced to their type (they may carry URLs or headers)."""
    import httpx

    try:
        try:
            raise EgressRefused("MCP server host x refused: x resolves to 169.254.169.254 is a link-local address")
        except EgressRefused as e:
            raise httpx.ConnectError(str(e)) from e
    except httpx.ConnectError as wrapped:
        assert describe(wrapped) == ("ConnectError: MCP server host x refused: x resolves to 169.254.169.254 "
                                     "is a link-local address")
    assert describe(httpx.ConnectError("https://user:secret@host")) == "ConnectError"

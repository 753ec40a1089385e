"""MCP connections that reach only allowed addresses (``sessionops.policy.egress``), checked after DNS.

Every TCP connection of an MCP client (the first one, reconnects, redirects) goes through
``GuardedBackend.connect_tcp``: it resolves the host once, refuses the connection when *any*
address is refused (a name with one metadata answer among public ones is not a server to talk
to), and connects to an address it checked. The name is never resolved a second time, so a
DNS answer that changes between check and connect (rebinding) is never used. TLS still
verifies the certificate against the host name: httpcore starts TLS with the origin's name.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpcore
import httpx

from sessionops.policy.egress import Address, Policy, literal_address

Resolver = Callable[[str, int], Awaitable[list[Address]]]


class EgressRefused(httpcore.ConnectError):
    """A connection the egress policy refuses; the message names the host and the reason."""


async def resolve(host: str, port: int) -> list[Address]:
    """Every address of ``host`` (A and AAAA), in the resolver's order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: dict[Address, None] = {}
    for *_, sockaddr in infos:
        seen.setdefault(ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]), None)
    return list(seen)


class GuardedBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, policy: Policy, *, resolver: Resolver = resolve,
                 inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.policy = policy
        self.resolver = resolver
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        literal = literal_address(host)
        addresses = [literal] if literal is not None else await self.resolver(host, port)
        if not addresses:
            raise EgressRefused(f"MCP server host {host} resolves to no address")
        if (problem := self.policy.resolved_problem(host, port, addresses)) is not None:
            raise EgressRefused(f"MCP server host {host} refused: {problem}")
        # The checked address, never the name: a second lookup could answer differently.
        return await self.inner.connect_tcp(str(addresses[0]), port, timeout=timeout, local_address=local_address,
                                            socket_options=socket_options)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        raise EgressRefused("MCP servers are reached over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with its connection pool on a ``GuardedBackend``; no proxy from the
    environment (a proxy would make the checked address the proxy's, not the server's)."""

    def __init__(self, backend: GuardedBackend) -> None:
        super().__init__(trust_env=False)
        # httpx offers no network-backend option; its pool is the one thing to replace.
        self._pool = httpcore.AsyncConnectionPool(ssl_context=httpx.create_ssl_context(), network_backend=backend)


def client_factory(policy: Policy, *, resolver: Resolver = resolve) -> Callable[..., httpx.AsyncClient]:
    """An ``httpx_client_factory`` for langchain-mcp-adapters' connections (the MCP SDK's
    defaults: no redirect following by httpx, the caller's timeout)."""

    def factory(headers: dict[str, str] | None = None, timeout: httpx.Timeout | None = None,
                auth: httpx.Auth | None = None) -> httpx.AsyncClient:
        kwargs: dict[str, Any] = {"timeout": timeout or httpx.Timeout(30.0, read=300.0),
                                  "transport": GuardedTransport(GuardedBackend(policy, resolver=resolver)),
                                  "trust_env": False}
        if headers is not None:
            kwargs["headers"] = headers
        if auth is not None:
            kwargs["auth"] = auth
        return httpx.AsyncClient(**kwargs)

    return factory

"""Where MCP servers may be reached (pure): not link-local or cloud metadata addresses, not the
cluster's API server, unless the operator config's ``mcpEgress`` allows it.

A worker pod's network identity is worth more than its tools: the cloud metadata endpoint hands
out node credentials, and the API server trusts whatever token a request carries. An Agent
author who names such a URL would have the worker (which holds a ServiceAccount token and the
model key) call it and hand the answer to the model. Two places enforce this:

- Agent admission: ``url_problem`` on the URL as written (IP literals in every form
  ``getaddrinfo`` accepts, well-known metadata and API server names), without DNS: the
  webhook's resolver is not the pod's, and a name can change its answer later anyway.
- The worker, at connection time: ``address_problem`` on every address the name resolves to,
  and the connection goes to an address that was checked (``sessionops.worker.egress``), so a
  second, different DNS answer (rebinding) is never used.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from sessionops.api.config import McpEgress

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

REFUSED_NETWORKS: tuple[tuple[Network, str], ...] = (
    (ipaddress.ip_network("169.254.0.0/16"), "a link-local address (cloud metadata endpoints live here)"),
    (ipaddress.ip_network("fe80::/10"), "a link-local address"),
    (ipaddress.ip_network("fd00:ec2::254/128"), "the AWS metadata endpoint (IPv6)"),
    (ipaddress.ip_network("100.100.100.200/32"), "the Alibaba Cloud metadata endpoint"),
)
METADATA_HOSTS = frozenset({"metadata", "metadata.google.internal", "metadata.goog", "instance-data",
                            "instance-data.ec2.internal"})
"""Names that cloud images resolve to a metadata endpoint."""
API_SERVER_HOSTS = frozenset({"kubernetes", "kubernetes.default", "kubernetes.default.svc"})
"""The API server's in-cluster names (and ``kubernetes.default.svc.<cluster domain>``)."""


@dataclasses.dataclass(frozen=True)
class Policy:
    """The refusal rules plus the config's allow-list; ``api_server`` is (address, port) of the
    cluster's API server Service as a pod sees it (``KUBERNETES_SERVICE_HOST``/``_PORT``)."""

    allowed_networks: tuple[Network, ...] = ()
    allowed_hosts: frozenset[str] = frozenset()
    api_server: tuple[Address, int | None] | None = None

    @classmethod
    def of(cls, egress: McpEgress, environ: Mapping[str, str]) -> Policy:
        return cls(allowed_networks=tuple(ipaddress.ip_network(c, strict=False) for c in egress.allowed_cidrs),
                   allowed_hosts=frozenset(h.lower().rstrip(".") for h in egress.allowed_hosts),
                   api_server=api_server_of(environ))

    def host_allowed(self, host: str) -> bool:
        return _normal_host(host) in self.allowed_hosts

    def address_problem(self, address: Address, port: int | None) -> str | None:
        """Why a connection to ``address:port`` is refused; None when it is allowed."""
        address = _unmapped(address)
        if any(address in net for net in self.allowed_networks):
            return None
        for net, why in REFUSED_NETWORKS:
            if address in net:
                return f"{address} is {why}"
        if self.api_server is not None:
            server, server_port = self.api_server
            if address == server and (server_port is None or port is None or port == server_port):
                return f"{address} is the cluster's API server"
        return None

    def url_problem(self, url: str) -> str | None:
        """Why ``url`` is refused as written (no DNS); None when only connection time can tell."""
        parts = urlsplit(url)
        host = _normal_host(parts.hostname or "")
        if not host:
            return "the URL has no host"
        if host in self.allowed_hosts:
            return None
        try:
            port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
        except ValueError:
            return "the URL's port is not a number"
        address = literal_address(host)
        if address is not None:
            return self.address_problem(address, port)
        if host in METADATA_HOSTS:
            return f"{host} is a cloud metadata endpoint"
        if host in API_SERVER_HOSTS or host.startswith("kubernetes.default.svc."):
            return f"{host} is the cluster's API server"
        return None

    def resolved_problem(self, host: str, port: int | None, addresses: Iterable[Address]) -> str | None:
        """Connection time: every address ``host`` resolved to must be allowed."""
        if self.host_allowed(host):
            return None
        if (problem := self.url_problem(f"http://{_bracketed(host)}:{port or 80}/")) is not None:
            return problem
        for address in addresses:
            if (problem := self.address_problem(address, port)) is not None:
                return f"{host} resolves to {problem}" if literal_address(host) is None else problem
        return None


def api_server_of(environ: Mapping[str, str]) -> tuple[Address, int | None] | None:
    host = environ.get("KUBERNETES_SERVICE_HOST", "").strip()
    address = literal_address(host) if host else None
    if address is None:
        return None
    port = environ.get("KUBERNETES_SERVICE_PORT", "").strip()
    return address, int(port) if port.isdigit() else None


def literal_address(host: str) -> Address | None:
    """``host`` as an address when it is one, in any form the C resolver accepts (``2852039166``,
    ``0xa9.0xfe.0xa9.0xfe``, ``169.254.43518``, ``[fe80::1%eth0]``): those never reach DNS."""
    host = host.strip("[]").split("%", 1)[0]
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def _unmapped(address: Address) -> Address:
    """``::ffff:169.254.169.254`` is 169.254.169.254 to the kernel."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _normal_host(host: str) -> str:
    return host.strip().lower().rstrip(".")


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host

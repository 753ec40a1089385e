"""Throw-away X.509 material for HTTPS in tests: a CA and a server certificate signed by it.

Built with ``cryptography`` only (oscrypto/certbuilder do not work with this machine's
OpenSSL 3). Keys are ECDSA P-256 (fast to generate; accepted by Go's and Python's TLS).

    bundle = make_ca_and_server_cert(["webhook.example-system.svc"], ["127.0.0.1"])
    server_ctx = bundle.server_ssl_context()          # for aiohttp/kopf's webhook server
    ca_bundle = bundle.ca_bundle_b64                  # for a webhook clientConfig.caBundle
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertBundle", "make_ca_and_server_cert"]


@dataclass(frozen=True)
class CertBundle:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    cert_path: str
    key_path: str
    ca_path: str = ""

    @property
    def ca_bundle_b64(self) -> str:
        """The CA as a ``caBundle`` value (base64 of the PEM)."""
        return base64.b64encode(self.ca_pem).decode("ascii")

    def server_ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_path, self.key_path)
        return context

    def client_ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.ca_pem.decode("ascii"))


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_ca_and_server_cert(
    hostnames: Sequence[str],
    ips: Sequence[str] = (),
    *,
    directory: str | None = None,
    ca_name: str = "testcluster CA",
    valid_for: datetime.timedelta = datetime.timedelta(days=1),
) -> CertBundle:
    """Create a CA and a server certificate for ``hostnames`` (DNS SANs) and ``ips`` (IP SANs).

    The PEM files are written to ``directory`` (a new temporary directory by default):
    ``ca.crt``, ``tls.crt``, ``tls.key``.
    """
    now = datetime.datetime.now(datetime.UTC)
    not_before = now - datetime.timedelta(minutes=5)
    not_after = now + valid_for

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(ca_name))
        .issuer_name(_name(ca_name))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(h) for h in hostnames]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    common_name = hostnames[0] if hostnames else (ips[0] if ips else "server")
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    target = directory or tempfile.mkdtemp(prefix="testcluster-certs-")
    os.makedirs(target, exist_ok=True)
    paths = {}
    for filename, data in (("ca.crt", ca_pem), ("tls.crt", cert_pem), ("tls.key", key_pem)):
        path = os.path.join(target, filename)
        with open(path, "wb") as handle:
            handle.write(data)
        if filename == "tls.key":
            os.chmod(path, 0o600)
        paths[filename] = path
    return CertBundle(
        ca_pem=ca_pem,
        cert_pem=cert_pem,
        key_pem=key_pem,
        cert_path=paths["tls.crt"],
        key_path=paths["tls.key"],
        ca_path=paths["ca.crt"],
    )

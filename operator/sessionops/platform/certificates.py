"""Self-signed serving certificates built with ``cryptography``.

kopf's own self-signed path uses oscrypto, which cannot load OpenSSL 3's libcrypto
("Error detecting the version of libcrypto"); this replaces exactly that step.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Collection

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def self_signed(hostnames: Collection[str], days: int = 365) -> tuple[bytes, bytes]:
    """(cert PEM, key PEM) of a self-signed CA-capable certificate with the given SANs."""
    names, ips = [], []
    for host in hostnames:
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            names.append(host)
            continue
        if not ip.is_unspecified:
            ips.append(ip)
    key = ec.generate_private_key(ec.SECP256R1())
    common = names[0] if names else str(ips[0])
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])
    now = datetime.datetime.now(datetime.UTC)
    sans = [x509.DNSName(n) for n in dict.fromkeys(names)] + [x509.IPAddress(i) for i in dict.fromkeys(ips)]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


"""A local certificate authority for ``dev up --secure`` and the tests: PEM files made
with the ``cryptography`` package.

``make_ca(dir)`` writes ``ca.pem`` / ``ca-key.pem`` (a self-signed CA, valid for a
year); ``issue(ca, dir, name, hosts=...)`` writes ``<name>.pem`` / ``<name>-key.pem``, a
certificate signed by it whose subject is ``CN=<name>,O=minibroker`` and whose
subjectAltNames are ``hosts`` (DNS names or IP addresses), usable for TLS servers and
clients alike. Keys are EC P-256: fast handshakes, small files. Private keys are
written 0600 and unencrypted: this is for a cluster on one machine, not production.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)
"""How long the certificates are valid: a dev cluster lives far shorter."""

ORGANIZATION = "minibroker"


@dataclass(frozen=True, slots=True)
class Issued:
    """A certificate and its key, as PEM files."""

    certificate: Path
    key: Path


@dataclass(frozen=True, slots=True)
class LocalCa:
    certificate: Path
    key: Path

    def load(self) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        cert = x509.load_pem_x509_certificate(self.certificate.read_bytes())
        key = serialization.load_pem_private_key(self.key.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return cert, key


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def make_ca(directory: Path, name: str = "minibroker-dev-ca") -> LocalCa:
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    ca = LocalCa(directory / "ca.pem", directory / "ca-key.pem")
    ca.certificate.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(ca.key, key)
    return ca


def issue(
    ca: LocalCa,
    directory: Path,
    name: str,
    *,
    hosts: Sequence[str] = ("localhost", "127.0.0.1"),
) -> Issued:
    """A certificate for ``name`` signed by ``ca``, for servers and clients."""
    ca_cert, ca_key = ca.load()
    key = ec.generate_private_key(ec.SECP256R1())
    alt_names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    directory.mkdir(parents=True, exist_ok=True)
    issued = Issued(directory / f"{name}.pem", directory / f"{name}-key.pem")
    issued.certificate.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(issued.key, key)
    return issued

"""Certificates made in the test: a CA, and leaf certificates it signs (server or client)."""

import datetime
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_PEM = serialization.Encoding.PEM


@dataclass
class Pair:
    cert: Path
    key: Path


class Authority:
    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.name = name
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.subject = subject
        self.cert = (
            _builder(subject, subject, self.key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.path = directory / f"{name}-ca.pem"
        self.path.write_bytes(self.cert.public_bytes(_PEM))

    def issue(
        self, name: str, *, server: bool, client: bool = False, hosts: tuple[str, ...] = ("127.0.0.1",)
    ) -> Pair:
        """A server's certificate (with `client` too: a cluster node's, which also dials its
        peers), or a client's."""
        key = ec.generate_private_key(ec.SECP256R1())
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
        usages += [ExtendedKeyUsageOID.CLIENT_AUTH] if client or not server else []
        builder = _builder(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]), self.subject, key.public_key()
        ).add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        if server:
            names: list[x509.GeneralName] = [x509.DNSName("localhost")]
            names += [x509.IPAddress(IPv4Address(h)) for h in hosts]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        pair = Pair(self.directory / f"{name}.pem", self.directory / f"{name}.key")
        pair.cert.write_bytes(cert.public_bytes(_PEM))
        pair.key.write_bytes(
            key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )
        return pair


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )

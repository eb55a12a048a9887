"""A certificate authority made for one session, held in memory only.

The session's clients trust it through a bundle file (system roots + this CA's
certificate: public, so a file is fine); its private key never touches a disk. The
proxy mints one leaf per bound host, on first use, and keeps its server
``ssl.SSLContext``. The standard ``ssl`` module loads certificates and keys only from
paths, so a leaf and its key go through a ``memfd`` (anonymous memory, closed at once).

The CA carries X.509 name constraints limited to the hosts it may mint for when they are
known up front (``permitted``), so a stolen CA would not vouch for other names in clients
that honour the extension.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Leaves and the CA live a day: a session that runs longer gets fresh leaves from a
#: new proxy; clients check validity against their clock, so skew gets an hour.
VALIDITY = datetime.timedelta(days=1)
SKEW = datetime.timedelta(hours=1)
#: Server contexts kept per CA (one per host seen); past this the cache starts again.
MAX_CACHED_LEAVES = 256


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "PaddedCell"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def pem_to_memory_path(data: bytes) -> tuple[int, str]:
    """An anonymous in-memory file holding ``data`` and a path that opens it."""
    fd = os.memfd_create("paddedcell-leaf", os.MFD_CLOEXEC)
    os.write(fd, data)
    return fd, f"/proc/self/fd/{fd}"


def load_chain_from_memory(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """``context.load_cert_chain`` from bytes, through memfds closed right after."""
    cert_fd, cert_path = pem_to_memory_path(cert_pem)
    key_fd, key_path = pem_to_memory_path(key_pem)
    try:
        context.load_cert_chain(cert_path, key_path)
    finally:
        os.close(cert_fd)
        os.close(key_fd)


@dataclass
class CertificateAuthority:
    """A CA key and certificate (ECDSA P-256), minting server leaves for host names."""

    common_name: str = "PaddedCell session CA"
    permitted: tuple[str, ...] = ()
    _key: ec.EllipticCurvePrivateKey = field(init=False, repr=False)
    _leaf_key: ec.EllipticCurvePrivateKey | None = field(init=False, repr=False, default=None)
    certificate: x509.Certificate = field(init=False, repr=False)
    _contexts: dict[str, ssl.SSLContext] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (x509.CertificateBuilder()
                   .subject_name(_name(self.common_name)).issuer_name(_name(self.common_name))
                   .public_key(self._key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - SKEW).not_valid_after(now + VALIDITY)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .add_extension(x509.KeyUsage(
                       digital_signature=True, key_cert_sign=True, crl_sign=True,
                       content_commitment=False, key_encipherment=False,
                       data_encipherment=False, key_agreement=False, encipher_only=False,
                       decipher_only=False), critical=True)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(
                       self._key.public_key()), critical=False))
        if self.permitted:
            builder = builder.add_extension(x509.NameConstraints(
                permitted_subtrees=[_constraint(h) for h in self.permitted],
                excluded_subtrees=None), critical=True)
        self.certificate = builder.sign(self._key, hashes.SHA256())

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def issue(self, host: str) -> tuple[bytes, bytes]:
        """A leaf certificate for ``host`` and its key, both PEM (the key unencrypted:
        callers keep it in memory)."""
        if self._leaf_key is None:  # one key for all leaves, made at the first
            self._leaf_key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        leaf = (x509.CertificateBuilder()
                .subject_name(_name(host)).issuer_name(self.certificate.subject)
                .public_key(self._leaf_key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - SKEW).not_valid_after(now + VALIDITY)
                .add_extension(x509.SubjectAlternativeName([_san(host)]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                               critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                    self._key.public_key()), critical=False)
                .sign(self._key, hashes.SHA256()))
        key_pem = self._leaf_key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption())
        return leaf.public_bytes(serialization.Encoding.PEM), key_pem

    def server_context(self, host: str) -> ssl.SSLContext:
        """The TLS server context presenting a leaf for ``host`` (minted once), HTTP/1.1
        by ALPN only, refusing a handshake whose SNI names another host."""
        context = self._contexts.get(host)
        if context is None:
            if len(self._contexts) >= MAX_CACHED_LEAVES:  # a session touring many hosts
                self._contexts.clear()
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            cert_pem, key_pem = self.issue(host)
            load_chain_from_memory(context, cert_pem, key_pem)
            context.set_alpn_protocols(["http/1.1"])
            context.sni_callback = _sni_must_be(host)
            self._contexts[host] = context
        return context


def _constraint(host: str) -> x509.GeneralName:
    try:
        network = ipaddress.ip_network(host)
        return x509.IPAddress(network)
    except ValueError:
        return x509.DNSName(host[2:] if host.startswith("*.") else host)


def _sni_must_be(host: str):
    """An ``sni_callback`` that aborts the handshake unless SNI is ``host`` (an address
    target gets no SNI from clients, so none is accepted then)."""
    try:
        ipaddress.ip_address(host)
        literal = True
    except ValueError:
        literal = False

    def check(sslobj, server_name, context):  # noqa: ARG001 - ssl's signature
        name = (server_name or "").rstrip(".").lower()
        if (not name and literal) or name == host:
            return None
        return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME

    return check


_SYSTEM_CACHE: dict[str, tuple[tuple[int, int], bytes]] = {}


def bundle_text(ca_pem: bytes, system_bundle: str | None = None) -> bytes:
    """System trust followed by ``ca_pem``: what the session's clients are told to trust.
    The system file (~200 KB) is read once per process while its size and mtime hold."""
    path = system_bundle or default_system_bundle()
    system = b""
    if path:
        st = os.stat(path)
        stamp = (st.st_size, st.st_mtime_ns)
        cached = _SYSTEM_CACHE.get(path)
        if cached is None or cached[0] != stamp:
            with open(path, "rb") as handle:
                cached = (stamp, handle.read())
            _SYSTEM_CACHE[path] = cached
        system = cached[1]
    if system and not system.endswith(b"\n"):
        system += b"\n"
    return system + ca_pem


def default_system_bundle() -> str | None:
    """The system's CA bundle file (OpenSSL's default, else the usual Linux places)."""
    paths = ssl.get_default_verify_paths()
    candidates = [paths.cafile, paths.openssl_cafile, "/etc/ssl/certs/ca-certificates.crt",
                  "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"]
    return next((c for c in candidates if c and os.path.isfile(c)), None)

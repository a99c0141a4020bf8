"""How a client reaches a server safely: TLS (with a CA, and a client certificate for mTLS) and
a token, each from the client's arguments or the environment:

- PYQUEUE_TLS=1: use TLS with the system's trusted CAs;
- PYQUEUE_TLS_CA=FILE: use TLS and trust this CA (PEM);
- PYQUEUE_TLS_CERT=FILE, PYQUEUE_TLS_KEY=FILE: the client certificate and key, for mTLS;
- PYQUEUE_TOKEN=TOKEN: sent as `authorization: Bearer TOKEN` on every call.

Every channel a client opens (the public address, and each shard it routes to) is made here.
"""

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio

Options = list[tuple[str, Any]]

if TYPE_CHECKING:  # generic in the stubs only
    _SyncUnary = grpc.UnaryUnaryClientInterceptor[Any, Any]
    _SyncStream = grpc.StreamStreamClientInterceptor[Any, Any]
    _AioUnary = grpc.aio.UnaryUnaryClientInterceptor[Any, Any]
    _AioStream = grpc.aio.StreamStreamClientInterceptor[Any, Any]
else:
    _SyncUnary = grpc.UnaryUnaryClientInterceptor
    _SyncStream = grpc.StreamStreamClientInterceptor
    _AioUnary = grpc.aio.UnaryUnaryClientInterceptor
    _AioStream = grpc.aio.StreamStreamClientInterceptor


@dataclass(frozen=True)
class Security:
    tls: bool = False
    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None
    token: str | None = None

    @classmethod
    def resolve(
        cls,
        tls: bool | None = None,
        ca: str | Path | None = None,
        cert: str | Path | None = None,
        key: str | Path | None = None,
        token: str | None = None,
    ) -> "Security":
        """Arguments first, then the environment (PYQUEUE_TLS, _TLS_CA, _TLS_CERT, _TLS_KEY,
        _TOKEN). `tls=False` ignores the TLS variables; `token=""` sends no token."""
        if tls is False and (ca or cert or key):
            raise ValueError("tls=False with a CA or a client certificate: give tls=True or drop them")
        env = os.environ.get if tls is not False else (lambda name, default=None: default)
        ca = ca or env("PYQUEUE_TLS_CA") or None
        cert = cert or env("PYQUEUE_TLS_CERT") or None
        key = key or env("PYQUEUE_TLS_KEY") or None
        if (cert is None) != (key is None):
            raise ValueError("a client certificate needs its key, and a key its certificate")
        if tls is None:
            tls = bool(ca or cert or os.environ.get("PYQUEUE_TLS", "") not in ("", "0", "false", "no"))
        return cls(
            tls=tls,
            ca=_read(ca),
            cert=_read(cert),
            key=_read(key),
            token=(token if token is not None else os.environ.get("PYQUEUE_TOKEN")) or None,
        )

    def _credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(self.ca, self.key, self.cert)

    def _tls_options(self, address: str, options: Options) -> Options:
        """Over TLS, a channel to several nodes would check each node's certificate against the
        whole list of addresses, which no certificate names: it checks the first node's host
        instead, so every node's certificate must name that host too (a name they share)."""
        if not self.tls or not _several(address):
            return options
        first = address.split(",", 1)[0].strip().rpartition(":")[0].strip("[]")
        return [*options, ("grpc.ssl_target_name_override", first)]

    def channel(self, address: str, options: Options) -> grpc.Channel:
        options = self._tls_options(address, options)
        address = target(address)
        channel = (
            grpc.secure_channel(address, self._credentials(), options=options)
            if self.tls
            else grpc.insecure_channel(address, options=options)
        )
        return grpc.intercept_channel(channel, _SyncToken(self.token)) if self.token else channel

    def aio_channel(self, address: str, options: Options) -> grpc.aio.Channel:
        options = self._tls_options(address, options)
        address = target(address)
        interceptors: list[Any] | None = (
            [_AioUnaryToken(self.token), _AioStreamToken(self.token)] if self.token else None
        )
        if self.tls:
            return grpc.aio.secure_channel(
                address, self._credentials(), options=options, interceptors=interceptors
            )
        return grpc.aio.insecure_channel(address, options=options, interceptors=interceptors)

    def metadata(self) -> list[tuple[str, str]]:
        return [("authorization", f"Bearer {self.token}")] if self.token else []


def target(address: str) -> str:
    """The gRPC target for an address: several nodes of a cluster, comma-separated ("h1:7070,
    h2:7070"), become one channel that uses the first that answers and moves on when it dies
    (gRPC's pick_first over their IP addresses, names resolved here)."""
    if not _several(address):
        return address
    resolved: list[str] = []
    for part in (p.strip() for p in address.split(",") if p.strip()):
        host, _, port = part.rpartition(":")
        try:
            infos = socket.getaddrinfo(host.strip("[]"), int(port), socket.AF_INET, socket.SOCK_STREAM)
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot resolve {part!r} of the address {address!r}: {exc}") from None
        resolved += [f"{info[4][0]}:{port}" for info in infos[:1]]
    return "ipv4:" + ",".join(resolved)


def _several(address: str) -> bool:
    """Several nodes as a user gives them ("h1:7070,h2:7070"), not one address or a gRPC target."""
    return "," in address and not address.startswith(("ipv4:", "ipv6:", "dns:", "unix:"))


def _read(path: str | Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from None


class _Details(grpc.ClientCallDetails):
    pass


class _SyncToken(_SyncUnary, _SyncStream):
    """Adds the token to every call of a sync channel."""

    def __init__(self, token: str) -> None:
        self.header = ("authorization", f"Bearer {token}")

    def _details(self, details: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        call = _Details()
        call.method = details.method
        call.timeout = details.timeout
        call.metadata = (*(details.metadata or ()), self.header)
        call.credentials = details.credentials
        call.wait_for_ready = getattr(details, "wait_for_ready", None)
        call.compression = getattr(details, "compression", None)
        return call

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_stream(self, continuation: Callable[..., Any], details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)


def _aio_details(details: grpc.aio.ClientCallDetails, header: tuple[str, str]) -> grpc.aio.ClientCallDetails:
    metadata = grpc.aio.Metadata(*(details.metadata or ()))
    metadata.add(*header)
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )


class _AioUnaryToken(_AioUnary):
    def __init__(self, token: str) -> None:
        self.header = ("authorization", f"Bearer {token}")

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return await continuation(_aio_details(details, self.header), request)


class _AioStreamToken(_AioStream):
    def __init__(self, token: str) -> None:
        self.header = ("authorization", f"Bearer {token}")

    async def intercept_stream_stream(
        self, continuation: Callable[..., Any], details: Any, requests: Any
    ) -> Any:
        return await continuation(_aio_details(details, self.header), requests)

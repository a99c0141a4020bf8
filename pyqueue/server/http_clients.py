"""The HTTP port's way into the gRPC service: a client of the server's own address per caller's
token, so the gRPC server checks the caller's rights exactly as for any other client."""

import threading
from collections.abc import Callable

from pyqueue.client import Client

MAX_CLIENTS = 32  # one client per token seen lately


class TokenClients:
    def __init__(self, address: Callable[[], str]) -> None:
        self._address = address
        self._clients: dict[str | None, Client] = {}
        self._lock = threading.Lock()
        self._local = threading.local()

    def serve(self, authorization: str | None) -> None:
        """This thread now serves a request with this Authorization header (Bearer TOKEN)."""
        scheme, _, token = (authorization or "").partition(" ")
        self._local.token = token.strip() if scheme.lower() == "bearer" and token.strip() else None

    @property
    def client(self) -> Client:
        """The client of the request this thread serves (its caller's token)."""
        token: str | None = getattr(self._local, "token", None)
        with self._lock:
            client = self._clients.pop(token, None)
            if client is None:
                # Plaintext on loopback (the internal address of a TLS server), the caller's token,
                # every call through that address: the shards' own addresses are the public ones,
                # which speak TLS when the server does.
                client = Client(self._address(), timeout=10, tls=False, token=token or "", routing=False)
                if len(self._clients) >= MAX_CLIENTS:
                    self._clients.pop(next(iter(self._clients))).close()
            self._clients[token] = client  # the most recent last
            return client

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()

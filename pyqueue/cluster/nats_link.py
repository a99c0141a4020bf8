"""One NATS connection on a thread of its own, and the names a cluster uses in JetStream.

The connection has its own event loop, so the writer thread can append to the changelog and wait
(`call`), and the lease is renewed however busy the server's own loop is. Every call is bounded
by a timeout; a NATS that answers nothing is a clear error, never a hang.
"""

import asyncio
import logging
import ssl
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger("pyqueue.cluster")
T = TypeVar("T")


class ClusterError(Exception):
    """The cluster cannot be joined as asked; the message says what to change."""


@dataclass(frozen=True)
class ClusterConfig:
    urls: tuple[str, ...]
    node: str
    name: str = "pyqueue"
    lease_s: float = 5.0  # an owner silent this long loses its shards to a standby
    replicas: int = 3  # copies JetStream keeps of the changelog and the leases
    connect_timeout_s: float = 10.0
    snapshot_bytes: int = 256 << 20  # an owner snapshots its store and trims its changelog past this
    # TLS to NATS, when its servers require it (a tls:// URL, or tls in their config): the CA
    # that issued their certificates (None: the system's), and the certificate shown to servers
    # that ask for one (verify: true). A node shows its own --tls-cert.
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None

    def ssl_context(self) -> ssl.SSLContext | None:
        if self.ca is None and self.cert is None:
            return None  # nats-py's own default: the system's CAs
        context = ssl.create_default_context(cafile=self.ca)
        if self.cert is not None:
            context.load_cert_chain(self.cert, self.key)
        return context

    def stream(self, shard: int) -> str:
        return f"PYQUEUE_{self.name}_{shard}"

    def subject(self, shard: int) -> str:
        return f"pyqueue.{self.name}.changelog.{shard}"

    @property
    def bucket(self) -> str:
        return f"PYQUEUE_{self.name}"

    def args(self) -> list[str]:
        """The flags that give a shard process this config."""
        return [
            "--cluster", ",".join(self.urls), "--node", self.node, "--cluster-name", self.name,
            "--lease", str(self.lease_s), "--replicas", str(self.replicas),
            "--snapshot-bytes", str(self.snapshot_bytes),
            *(["--cluster-ca", str(self.ca)] if self.ca else []),
        ]  # fmt: skip


class _TlsEofNoise(logging.Filter):
    """nats-py's protocol answers True to eof_received(), which asyncio ignores over TLS and warns
    about at every close of a TLS connection to NATS: a warning at each stop that means nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "eof_received() has no effect when using ssl" not in record.getMessage()


class NatsLink:
    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="pyqueue-nats", daemon=True)
        self.nc: Any = None
        self.js: Any = None
        self.kv: Any = None
        self._last_error: Exception | None = None  # the last connection error nats-py reported

    def start(self) -> "NatsLink":
        asyncio_log = logging.getLogger("asyncio")
        if not any(isinstance(f, _TlsEofNoise) for f in asyncio_log.filters):
            asyncio_log.addFilter(_TlsEofNoise())
        self._thread.start()
        try:
            self.call(self._connect, self.config.connect_timeout_s + 5)
        except TimeoutError:
            # nats-py's own retries may swallow the cancel of the bounded connect (Python 3.11's
            # wait_for can lose a cancellation): the caller's bound holds, with the same message.
            raise self._unanswered(self._last_error) from None
        return self

    def _unanswered(self, exc: BaseException | None) -> "ClusterError":
        why = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
        return ClusterError(
            f"no NATS server answered at {', '.join(self.config.urls)} within "
            f"{self.config.connect_timeout_s:g}s{why}; check --cluster (nats://HOST:PORT, "
            "comma-separated), that the servers run with JetStream, and with TLS --cluster-ca "
            "and --tls-cert"
        )

    async def _connect(self) -> None:
        import nats

        async def quiet(exc: Exception) -> None:
            self._last_error = exc
            log.debug("nats: %s", exc)

        try:
            self.nc = await asyncio.wait_for(
                nats.connect(
                    servers=list(self.config.urls),
                    connect_timeout=2,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=0.2,
                    allow_reconnect=True,
                    error_cb=quiet,
                    name=f"pyqueue {self.config.node}",
                    tls=self.config.ssl_context(),
                ),
                self.config.connect_timeout_s,
            )
        except Exception as exc:
            raise self._unanswered(self._last_error or exc) from None
        self.js = self.nc.jetstream(timeout=5)

    async def settled(self, make: Callable[[], Awaitable[T]], what: str) -> T:
        """`make()`, tried again while JetStream is still settling (a stream just created has no
        leader yet, a server just started answers nothing) for at most connect_timeout_s."""
        from nats.errors import NoRespondersError
        from nats.errors import TimeoutError as NatsTimeout
        from nats.js.errors import NoStreamResponseError, ServiceUnavailableError

        deadline = asyncio.get_running_loop().time() + self.config.connect_timeout_s
        while True:
            try:
                return await make()
            except (NoStreamResponseError, ServiceUnavailableError, NoRespondersError, NatsTimeout) as exc:
                if asyncio.get_running_loop().time() > deadline:
                    raise ClusterError(
                        f"JetStream did not answer while {what} ({type(exc).__name__}); check that "
                        f"the NATS servers at {', '.join(self.config.urls)} run with JetStream and "
                        f"that at least {self.config.replicas // 2 + 1} of them are up"
                    ) from None
                await asyncio.sleep(0.2)

    async def open_bucket(self) -> None:
        """The cluster's key-value bucket (created by the first node): the shard count, the nodes
        and the shards' owners."""
        from nats.js.api import KeyValueConfig
        from nats.js.errors import BucketNotFoundError

        async def open() -> Any:
            try:
                return await self.js.key_value(self.config.bucket)
            except BucketNotFoundError:
                return await self.js.create_key_value(
                    KeyValueConfig(bucket=self.config.bucket, history=1, replicas=self.config.replicas)
                )

        self.kv = await self.settled(open, f"opening the bucket {self.config.bucket}")

    async def open_stream(self, shard: int) -> None:
        from nats.js.api import StorageType, StreamConfig
        from nats.js.errors import NotFoundError

        name = self.config.stream(shard)

        async def open() -> None:
            try:
                await self.js.stream_info(name)
            except NotFoundError:
                await self.js.add_stream(
                    StreamConfig(
                        name=name,
                        subjects=[self.config.subject(shard)],
                        num_replicas=self.config.replicas,
                        storage=StorageType.FILE,
                        duplicate_window=120,
                    )
                )

        await self.settled(open, f"opening the stream {name}")

    def call(self, make: Callable[[], Awaitable[T]], timeout: float) -> T:
        """Run `make()` on the NATS loop from another thread and wait at most `timeout` seconds."""
        future = asyncio.run_coroutine_threadsafe(_awaited(make), self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def run(self, make: Callable[[], Awaitable[T]]) -> "asyncio.Future[T]":
        """Run `make()` on the NATS loop, awaited from another event loop."""
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_awaited(make), self.loop))

    def close(self) -> None:
        if self.nc is not None:
            try:
                self.call(self.nc.close, 5)
            except Exception as exc:  # closing is best effort: the process is ending
                log.debug("closing the NATS connection: %s", exc)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    return await make()

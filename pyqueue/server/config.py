"""Everything `pyqueue serve` can be told, with its defaults."""

import ssl
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from pyqueue import defaults
from pyqueue.cluster.nats_link import ClusterConfig
from pyqueue.engine.limits import Limits
from pyqueue.engine.retry import RetryPolicy
from pyqueue.server.http_limits import HttpLimits
from pyqueue.server.http_origin import HostRule

DEFAULT_LISTEN = defaults.ADDRESS
DEFAULT_DATA_DIR = defaults.DATA_DIR


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the server's certificate chain and key, the CA whose client certificates it
    requires (None: no client certificate asked), and on a cluster's node the CA of the other
    nodes' certificates (None: the system's trusted CAs)."""

    cert: Path
    key: Path
    client_ca: Path | None = None
    peer_ca: Path | None = None

    def ssl_context(self) -> ssl.SSLContext:
        """The same certificates for the HTTP port."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        if self.client_ca is not None:
            context.load_verify_locations(self.client_ca)
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    def peer_credentials(self) -> grpc.ChannelCredentials:
        """How a node dials another node: trusting the peers' CA, and showing its own certificate
        for the peers that require one (--tls-client-ca), so it needs the clientAuth usage too."""
        return grpc.ssl_channel_credentials(
            self.peer_ca.read_bytes() if self.peer_ca else None, self.key.read_bytes(), self.cert.read_bytes()
        )

    def credentials(self) -> grpc.ServerCredentials:
        pair = [(self.key.read_bytes(), self.cert.read_bytes())]
        if self.client_ca is None:
            return grpc.ssl_server_credentials(pair)
        return grpc.ssl_server_credentials(
            pair, root_certificates=self.client_ca.read_bytes(), require_client_auth=True
        )


@dataclass(frozen=True)
class ServerConfig:
    data_dir: Path = Path(DEFAULT_DATA_DIR)
    # Create the store if the data dir holds none. Without it a store is created only when this
    # start creates the directory itself: an existing empty dir is a volume that did not mount.
    init: bool = False
    listen: str = DEFAULT_LISTEN
    commit_mode: str = "fsync"  # or "buffered": answered once written to the OS, not synced
    heartbeat_s: float = 3.0
    worker_timeout_s: float = 15.0  # a silent worker host is declared gone within this
    shutdown_grace_s: float = 10.0
    summary_s: float = 60.0  # one INFO summary line this often (0: never)
    http_listen: str = ""  # HOST:PORT for /metrics and /healthz ('': none; the CLI defaults it)
    max_message_bytes: int = 64 << 20
    # The native front for enqueues (server/front.py): on its own port (0: any free one) on the
    # listen host; never with TLS or in a cluster.
    native_front: bool = True
    enqueue_port: int = 0
    max_connections: int = 10_000  # past it grpc refuses new connections before any handshake
    min_free_bytes: int = 128 << 20
    shard_index: int = 0
    shard_count: int = 1
    topology_file: Path | None = None  # written by the supervisor: every shard's address
    auth_file: Path | None = None  # tokens with rights (server/auth.py); None: no tokens asked
    tls: "TlsFiles | None" = None  # None: plaintext
    advertise: str = ""  # the host clients are told to dial ('': the listen host)
    http_allow_hosts: tuple[str, ...] = ()  # more names the HTTP port answers to (a proxy's)
    http: HttpLimits = field(default_factory=HttpLimits)  # what one client may cost the HTTP port
    read_share: float = defaults.READ_SHARE  # of the loop, for reads, while work comes in (read_share.py)
    unique_per_queue: bool = True  # every unique key holds within its queue (False: across queues)
    limits: Limits = field(default_factory=Limits)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    cluster: ClusterConfig | None = None  # a node of a cluster on NATS JetStream (docs/cluster.md)
    relay_secret: str | None = field(
        default=None, repr=False
    )  # a shard's, from its supervisor (relay_secret.py)

    def host_rule(self) -> HostRule:
        """The names the HTTP port answers to (server/http_origin.py)."""
        return HostRule([self.http_listen.rpartition(":")[0], self.advertise, *self.http_allow_hosts])

    @property
    def durable(self) -> bool:
        return self.commit_mode == "fsync"

    def grpc_options(self) -> list[tuple[str, int]]:
        # HTTP/2 keepalive pings detect a vanished worker host; grpc core also sets
        # TCP_USER_TIMEOUT from the ping timeout, so unacknowledged data cannot hang for ~15 min.
        # keepalive_timeout_ms alone does not close the transport on an unanswered ping in this
        # grpc core: the ping-ack timeout (default 60 s) does, so it is set to the same budget
        # (tests/server/test_keepalive.py fails without it).
        ping_every_ms = int(self.worker_timeout_s * 1000 / 3)
        ping_timeout_ms = int(self.worker_timeout_s * 1000) - ping_every_ms
        return [
            ("grpc.keepalive_time_ms", ping_every_ms),
            ("grpc.keepalive_timeout_ms", ping_timeout_ms),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.ping_timeout_ms", ping_timeout_ms),
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", 1000),
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.max_send_message_length", self.max_message_bytes),
            ("grpc.max_allowed_incoming_connections", self.max_connections),
        ]

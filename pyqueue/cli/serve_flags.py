"""`pyqueue serve`'s flags as one typed value, and what each part of the server is configured
with from them. The flags' defaults are the options' own (cli/serve.py); nothing here imports
the server until a config is built."""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pyqueue.cli.serve_security import advertised_host

if TYPE_CHECKING:
    from pyqueue.cluster.nats_link import ClusterConfig
    from pyqueue.engine.limits import Limits
    from pyqueue.engine.retry import RetryPolicy
    from pyqueue.server import ServerConfig
    from pyqueue.server.http_limits import HttpLimits


@dataclass(frozen=True)
class ServeFlags:
    data_dir: Path
    init: bool
    listen: str
    commit_mode: str
    heartbeat_s: float
    worker_timeout_s: float
    max_payload_bytes: int
    max_jobs_per_enqueue: int
    max_workflow_jobs: int
    max_batch_jobs: int
    max_name_length: int
    max_prefetch: int
    max_streams: int
    max_streams_per_connection: int
    native_front: bool
    enqueue_port: int
    max_connections: int | None
    max_stream_bytes: int
    max_http_connections: int | None
    max_http_body_bytes: int
    read_share: float
    http_read_timeout: float
    max_retries: int
    backoff: tuple[float, float, float]
    max_worker_losses: int
    max_unknown_handbacks: int
    keep_completed: float
    keep_dead: float
    min_free_bytes: int
    shards: int
    cluster_urls: str
    node: str
    cluster_name: str
    lease_s: float
    replicas: int
    snapshot_bytes: int
    shard_index: int
    shard_count: int
    topology_file: Path | None
    summary_every: float
    http_listen: str
    tls_cert: Path | None
    tls_key: Path | None
    tls_client_ca: Path | None
    cluster_ca: Path | None
    auth_file: Path | None
    advertise: str | None
    unique_across_queues: bool
    unique_per_queue: bool
    http_allow_hosts: tuple[str, ...]
    insecure: bool
    log_level: str
    log_format: str

    def limits(self) -> "Limits":
        from pyqueue.engine.limits import Limits

        return Limits(
            max_payload_bytes=self.max_payload_bytes,
            max_jobs_per_enqueue=self.max_jobs_per_enqueue,
            max_workflow_jobs=self.max_workflow_jobs,
            max_batch_jobs=self.max_batch_jobs,
            max_name_length=self.max_name_length,
            max_prefetch=self.max_prefetch,
            max_streams=self.max_streams,
            max_streams_per_connection=self.max_streams_per_connection,
            max_stream_bytes=self.max_stream_bytes,
        )

    def retry(self) -> "RetryPolicy":
        from pyqueue.engine.retry import RetryPolicy

        base_s, exponent, jitter_s = self.backoff
        return RetryPolicy(
            max_retries=self.max_retries,
            base_s=base_s,
            exponent=exponent,
            jitter_s=jitter_s,
            max_worker_losses=self.max_worker_losses,
            max_unknown_handbacks=self.max_unknown_handbacks,
            keep_completed_ms=int(self.keep_completed * 1000),
            keep_dead_ms=int(self.keep_dead * 1000),
        )

    def http_limits(self, open_files: int) -> "HttpLimits":
        """`open_files`: the process's open-file limit, which the connection caps are a share of."""
        from pyqueue.server.descriptors import http_connection_cap
        from pyqueue.server.http_limits import HttpLimits

        return HttpLimits(
            max_connections=self.max_http_connections or http_connection_cap(open_files),
            max_body_bytes=self.max_http_body_bytes,
            read_timeout_s=self.http_read_timeout,
            max_jobs=self.max_jobs_per_enqueue,
            max_workflow_jobs=self.max_workflow_jobs,
        )

    def cluster(self) -> "ClusterConfig | None":
        import socket

        from pyqueue.cluster.nats_link import ClusterConfig

        if not self.cluster_urls:
            if self.cluster_ca is not None:
                raise click.UsageError("--cluster-ca is for a cluster's nodes: give --cluster too")
            return None
        urls = tuple(u.strip() for u in self.cluster_urls.split(",") if u.strip())
        node = self.node or socket.gethostname().split(".")[0]
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", node):
            raise click.UsageError(
                f"--node {node!r}: a node's name is 1 to 64 letters, digits, '-' or '_' (it names keys in NATS)"
            )
        return ClusterConfig(
            urls=urls,
            node=node,
            name=self.cluster_name,
            lease_s=self.lease_s,
            replicas=self.replicas,
            snapshot_bytes=self.snapshot_bytes,
            ca=self.cluster_ca,
            cert=self.tls_cert,
            key=self.tls_key,
        )

    def server_config(self, open_files: int) -> "ServerConfig":
        """One shard's config (a sharded server's supervisor reads the parts it needs of it)."""
        from pyqueue.server import ServerConfig
        from pyqueue.server.config import TlsFiles
        from pyqueue.server.descriptors import connection_cap
        from pyqueue.server.relay_secret import take_from_environment

        return ServerConfig(
            data_dir=self.data_dir,
            init=self.init,
            listen=self.listen,
            commit_mode=self.commit_mode,
            heartbeat_s=self.heartbeat_s,
            worker_timeout_s=self.worker_timeout_s,
            max_connections=self.max_connections or connection_cap(open_files),
            native_front=self.native_front,
            enqueue_port=self.enqueue_port,
            http=self.http_limits(open_files),
            limits=self.limits(),
            min_free_bytes=self.min_free_bytes,
            shard_index=self.shard_index,
            shard_count=self.shard_count,
            topology_file=self.topology_file,
            summary_s=self.summary_every,
            http_listen=self.http_listen,
            auth_file=self.auth_file,
            tls=TlsFiles(self.tls_cert, self.tls_key, self.tls_client_ca, self.cluster_ca)
            if self.tls_cert and self.tls_key
            else None,
            advertise=advertised_host(self.listen, self.advertise),
            http_allow_hosts=self.http_allow_hosts,
            unique_per_queue=not self.unique_across_queues,
            read_share=self.read_share,
            retry=self.retry(),
            cluster=self.cluster(),
            relay_secret=take_from_environment(),
        )

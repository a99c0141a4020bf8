"""`pyqueue serve`."""

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pyqueue import defaults
from pyqueue.cli.logs import log_options, setup_logging
from pyqueue.cli.serve_flags import ServeFlags
from pyqueue.cli.serve_security import (
    check_exposure,
    check_tls_files,
    security_options,
)

if TYPE_CHECKING:
    from pyqueue.server import ServerConfig

DEFAULT_HTTP_LISTEN = defaults.HTTP_LISTEN
SERVER_MODULES = ("rocksdict", "croniter", "grpc_health", "grpc_reflection")


def check_server_installed() -> None:
    """`pip install pyqueue` is the client and worker; the server needs the `server` extra."""
    import importlib.util

    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise click.ClickException(
            f"pyqueue serve needs the server's dependencies ({', '.join(missing)} missing): "
            "pip install 'pyqueue[server]'"
        )


@click.command()
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=defaults.DATA_DIR,
    show_default=True,
    help="Where the RocksDB store lives.",
)
@click.option(
    "--init",
    is_flag=True,
    help="Create the store if the data dir holds none. Without it a store is created only when "
    "the data dir does not exist yet: an existing empty dir is refused (a volume that did not "
    "mount must not start empty).",
)
@click.option(
    "--listen", default=defaults.ADDRESS, show_default=True, help="HOST:PORT to listen on (port 0: any)."
)
@click.option(
    "--commit-mode",
    type=click.Choice(["fsync", "buffered"]),
    default="fsync",
    show_default=True,
    help="fsync: answer once on disk. buffered: once written to the OS.",
)
@click.option(
    "--heartbeat",
    "heartbeat_s",
    type=float,
    default=3.0,
    show_default=True,
    help="Seconds of silence on a Take stream before the server sends a heartbeat.",
)
@click.option(
    "--worker-timeout",
    "worker_timeout_s",
    type=float,
    default=15.0,
    show_default=True,
    help="Seconds after which a silent worker host is declared gone (keepalive, TCP_USER_TIMEOUT).",
)
@click.option("--max-payload-bytes", type=int, default=1 << 20, show_default=True)
@click.option("--max-jobs-per-enqueue", type=int, default=1000, show_default=True)
@click.option(
    "--max-workflow-jobs",
    type=click.IntRange(1),
    default=10_000,
    show_default=True,
    help="Jobs one workflow call (a batch, a chain and its callbacks) may create.",
)
@click.option(
    "--max-batch-jobs",
    type=click.IntRange(1),
    default=100_000,
    show_default=True,
    help="Jobs one batch may hold, with every AddToBatch to it.",
)
@click.option("--max-name-length", type=int, default=128, show_default=True)
@click.option("--max-prefetch", type=int, default=10_000, show_default=True)
@click.option(
    "--max-streams",
    type=int,
    default=10_000,
    show_default=True,
    help="Worker streams open at once; past it a new one is refused with RESOURCE_EXHAUSTED.",
)
@click.option(
    "--max-streams-per-connection",
    type=click.IntRange(1, 1_000_000),
    default=100,
    show_default=True,
    help="Worker streams one client connection may hold (the client's own address through the "
    "public address); past it a new one is refused with RESOURCE_EXHAUSTED, so one client cannot "
    "take every --max-streams slot.",
)
@click.option(
    "--read-share",
    type=click.FloatRange(0.001, 1.0),
    default=defaults.READ_SHARE,
    show_default=True,
    help="The share of a shard's loop that reads (listings, counts, history, the dashboard) may take "
    "while work comes in; callers that read back to back wait for their turn. 1: reads never wait.",
)
@click.option(
    "--native-front/--no-native-front",
    default=True,
    show_default=True,
    help="Serve enqueues on a port of their own, natively (no grpcio on the hot call); the "
    "official client finds it by itself. Never with TLS or in a cluster.",
)
@click.option(
    "--enqueue-port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default="any free port",
    help="The native front's port on the --listen host (shard i of --shards N: this port + i). "
    "Fix it where a firewall must let it through; a client that cannot reach it stays on the main port.",
)
@click.option(
    "--max-connections",
    type=int,
    default=None,
    show_default="what the open-file limit leaves after RocksDB's share, at most 10,000",
    help="Client connections open at once; past it new ones are closed before any handshake.",
)
@click.option(
    "--max-stream-bytes",
    type=int,
    default=16 << 20,
    show_default=True,
    help="Payload bytes delivered to one worker stream and not yet answered; past it the stream "
    "waits, whatever its prefetch.",
)
@click.option(
    "--max-http-connections",
    type=click.IntRange(1, 10_000),
    default=None,
    show_default="an eighth of what the open-file limit leaves after RocksDB's share, 8 to 256",
    help="HTTP connections served at once (a thread each); more are closed as they come.",
)
@click.option(
    "--max-http-body-bytes",
    type=click.IntRange(1, 1 << 30),
    default=16 << 20,
    show_default=True,
    help="The largest HTTP request body (POST /v1/jobs); a larger one is refused before it is read.",
)
@click.option(
    "--http-read-timeout",
    type=click.FloatRange(0.1, 3600),
    default=30.0,
    show_default=True,
    help="Seconds an HTTP connection may sit silent, and a request body may take to arrive.",
)
@click.option(
    "--max-retries", type=int, default=25, show_default=True, help="Default retries before a job is dead."
)
@click.option(
    "--backoff",
    nargs=3,
    type=float,
    default=(15.0, 4.0, 10.0),
    show_default=True,
    metavar="BASE EXPONENT JITTER",
    help="Default retry delay in seconds: attempt^EXPONENT + BASE + random * JITTER * (attempt + 1).",
)
@click.option(
    "--max-worker-losses",
    type=int,
    default=3,
    show_default=True,
    help="A job whose workers were lost this many times is dead.",
)
@click.option(
    "--max-unknown-handbacks",
    type=click.IntRange(1, 1_000_000),
    default=20,
    show_default=True,
    help="A job handed back this many times by workers without a function for its type is dead "
    "(they hand such jobs back every 30 s).",
)
@click.option(
    "--keep-completed",
    type=float,
    default=0.0,
    show_default=True,
    help="Seconds to keep completed jobs (0: delete at the ack).",
)
@click.option(
    "--keep-dead",
    type=float,
    default=7 * 24 * 3600.0,
    show_default=True,
    help="Seconds to keep dead jobs and their error history.",
)
@click.option(
    "--min-free-bytes",
    type=int,
    default=128 << 20,
    show_default=True,
    help="Refuse enqueues while the data directory's disk has less free space than this.",
)
@click.option(
    "--shards",
    type=int,
    default=lambda: os.cpu_count() or 1,
    show_default="the number of CPUs",
    help="Shard processes under one supervisor and one address (queues spread by a hash of their name).",
)
@click.option(
    "--cluster",
    "cluster_urls",
    default="",
    metavar="NATS_URLS",
    help="Join a cluster on NATS JetStream: nats://HOST:PORT of its servers, comma-separated "
    "(docs/cluster.md). Without it the server is one machine on its embedded store.",
)
@click.option("--node", default="", help="This node's name in the cluster (unique; default: the host name).")
@click.option(
    "--cluster-ca",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The PEM CA that issued the other nodes' certificates (checked when a node with "
    "--tls-cert forwards a call to another) and the NATS servers' (when they require TLS); "
    "default: the system's trusted CAs. A node shows NATS its --tls-cert if asked.",
)
@click.option(
    "--cluster-name",
    default="pyqueue",
    show_default=True,
    help="Names the cluster's streams and bucket in NATS.",
)
@click.option(
    "--lease",
    "lease_s",
    type=click.FloatRange(1.0, 600.0),
    default=5.0,
    show_default=True,
    help="Seconds an owner may stay silent before a standby takes its shards: shorter fails over "
    "sooner, and makes a long pause (GC, a slow disk) cost the shard.",
)
@click.option(
    "--replicas",
    type=click.IntRange(1, 5),
    default=3,
    show_default=True,
    help="Copies JetStream keeps of each changelog (needs as many NATS servers).",
)
@click.option(
    "--snapshot-bytes",
    type=click.IntRange(1 << 10, 1 << 40),
    default=256 << 20,
    show_default=True,
    help="Once a shard's changelog holds this many bytes, its owner snapshots its store into NATS and "
    "trims the changelog (a new node restores the snapshot, then applies what follows).",
)
@click.option("--shard-index", type=int, default=0, hidden=True)
@click.option("--shard-count", type=int, default=1, hidden=True)
@click.option("--topology-file", type=click.Path(path_type=Path), default=None, hidden=True)
@click.option(
    "--summary-every",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds between summary lines (enqueued, completed, failed, ready, in flight, workers, fsyncs/s; 0: none).",
)
@click.option(
    "--http-listen",
    default=DEFAULT_HTTP_LISTEN,
    show_default=True,
    help="HOST:PORT for the HTTP port: Prometheus /metrics and /healthz ('' turns it off).",
)
@security_options
@log_options
def serve(**flags: Any) -> None:
    """Run the server on an embedded store in DATA_DIR."""
    run(ServeFlags(**flags))


def run(f: ServeFlags) -> None:
    check_server_installed()
    check_tls_files(f.tls_cert, f.tls_key, f.tls_client_ca)
    check_exposure(f.listen, f.http_listen, f.tls_cert is not None, f.auth_file, f.insecure)
    from pyqueue.server import serve as run_server
    from pyqueue.server.auth import Authority
    from pyqueue.server.descriptors import raise_limit
    from pyqueue.tokens import AuthFileError

    setup_logging(f.log_level, f.log_format)
    if f.auth_file is not None:
        try:
            Authority.load(f.auth_file)  # say what is wrong with it now, not in every shard
        except AuthFileError as exc:
            raise click.UsageError(str(exc)) from None
    if f.unique_across_queues and max(f.shards if f.shard_count == 1 else 1, f.shard_count) > 1:
        raise click.UsageError(
            "--unique-across-queues needs --shards 1: each shard keeps the keys of its own queues, "
            "so a key cannot hold across queues on several shards"
        )
    config = f.server_config(raise_limit())
    if config.cluster is not None and f.topology_file is None:
        _supervise(f.data_dir, f.listen, f.shards, shard_args(sys.argv), config)
        return
    if f.shards > 1 and f.shard_count == 1 and f.topology_file is None:
        _supervise(f.data_dir, f.listen, f.shards, shard_args(sys.argv), config)
        return
    _refuse_a_sharded_store(f.data_dir, f.shard_count)
    run_server(config)


def _refuse_a_sharded_store(data_dir: Path, shard_count: int) -> None:
    if shard_count == 1 and (data_dir / "cluster.json").exists():
        from pyqueue.server.supervisor import read_cluster
        from pyqueue.store.json_files import MetadataError

        try:
            count = read_cluster(data_dir)["shards"]
        except MetadataError as exc:
            raise SystemExit(str(exc)) from None
        raise SystemExit(f"{data_dir} holds {count} shards; start it with --shards {count}")


_OWN = {"--data-dir", "--listen", "--shards", "--http-listen", "--advertise"}
# A cluster node's supervisor gives its shards these as it resolved them (ClusterConfig.args).
_OWN |= {"--cluster", "--node", "--cluster-name", "--lease", "--replicas", "--snapshot-bytes", "--cluster-ca"}
_OWN_FLAGS = {"--init"}  # the supervisor decides which shard may create its store


def shard_args(argv: list[str]) -> list[str]:
    """The serve flags every shard gets: all but the supervisor's own."""
    args = argv[argv.index("serve") + 1 :]
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if arg in _OWN_FLAGS:
            continue
        if name in _OWN:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out


def _supervise(data_dir: Path, listen: str, shards: int, args: list[str], config: "ServerConfig") -> None:
    import asyncio

    from pyqueue.server.supervisor import supervise
    from pyqueue.store.json_files import MetadataError

    try:
        asyncio.run(supervise(data_dir, listen, shards, args, 10.0, config))
    except MetadataError as exc:
        raise SystemExit(f"pyqueue serve: {exc}") from None

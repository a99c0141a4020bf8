"""`pyqueue serve`: one process, one store, one gRPC server on an event loop.

Start-up: open the store, recover (in flight back to ready) before listening, then listen while
the in-memory sets rebuild. SIGTERM/SIGINT: stop taking new calls, end the Take streams (their
jobs go back to ready), answer what is in hand, drain the writer, close the store.
"""

import asyncio
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import grpc.aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from pyqueue.cluster.topology import slot_of
from pyqueue.engine import Engine, EngineConfig
from pyqueue.server.auth import Authority
from pyqueue.server.config import ServerConfig, TlsFiles
from pyqueue.server.descriptors import raise_limit, rocksdb_share
from pyqueue.server.front import EnqueueFront
from pyqueue.server.handlers import SERVICE, add_queue_service
from pyqueue.server.http import HttpEndpoint
from pyqueue.server.rights import Guard
from pyqueue.server.service import QueueService
from pyqueue.server.shutdown import CallsInHand, stop_server
from pyqueue.server.summary import Summaries, SummaryConfig
from pyqueue.store import RocksStore, StoreDamagedError
from pyqueue.store.contract import Store
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc

log = logging.getLogger("pyqueue.server")


def _exit_with_supervisor() -> None:
    """A shard's stdin is its supervisor's pipe: when it closes, the supervisor is gone, and so are we."""

    def watch() -> None:
        sys.stdin.read()
        logging.getLogger("pyqueue.server").critical("the supervisor is gone; exiting")
        logging.shutdown()
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="pyqueue-supervisor-watch").start()


async def start_grpc(
    servicer: pb_grpc.QueueServicer,
    listen: str,
    options: list[tuple[str, int]],
    guard: Guard | None = None,
    tls: TlsFiles | None = None,
    internal: bool = False,
    calls: CallsInHand | None = None,
) -> tuple[grpc.aio.Server, Any, str, str]:
    """A gRPC server with the Queue service, health and reflection, listening; (server, health,
    address, internal address). With `internal`, a TLS server also listens in plaintext on a
    loopback port, for its supervisor's router (tokens are checked there all the same)."""
    server = grpc.aio.server(options=options)
    add_queue_service(servicer, server, guard, calls, getattr(servicer, "reads", None))
    health_service = health.aio.HealthServicer()  # type: ignore[attr-defined]
    health_pb2_grpc.add_HealthServicer_to_server(health_service, server)
    names = (pb.DESCRIPTOR.services_by_name["Queue"].full_name, health.SERVICE_NAME, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    port = server.add_secure_port(listen, tls.credentials()) if tls else server.add_insecure_port(listen)
    if port == 0:
        raise SystemExit(f"cannot listen on {listen}")
    inside = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}" if tls and internal else ""
    address = f"{listen.rsplit(':', 1)[0]}:{port}"
    await server.start()
    await health_service.set("", health_pb2.HealthCheckResponse.SERVING)
    await health_service.set(SERVICE.full_name, health_pb2.HealthCheckResponse.SERVING)
    return server, health_service, address, inside


async def run(config: ServerConfig, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    if config.shard_count > 1 or config.cluster is not None:
        _exit_with_supervisor()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if config.cluster is not None:
        from pyqueue.cluster.shard_node import run_shard

        async def serve_replicated(store: Store, **hooks: Any) -> None:
            await serve_store(config, store, stop, **hooks)

        await run_shard(config, config.cluster, stop, serve_replicated)
        return
    await serve_store(config, open_store(config), stop)


def open_store(config: ServerConfig) -> RocksStore:
    create = config.init or not config.data_dir.exists()
    new = not (config.data_dir / "CURRENT").exists()
    try:
        store = RocksStore(config.data_dir, max_open_files=rocksdb_share(raise_limit()), create=create)
    except StoreDamagedError as exc:
        log.critical("%s", exc)
        raise SystemExit(f"pyqueue serve: {exc}") from None
    lost = store.lost_commits()
    if lost:
        store.close()
        log.critical("%s", lost)
        raise SystemExit(f"pyqueue serve: {lost}")
    if new:
        log.warning("created a new, empty store in %s", config.data_dir)
    return store


async def serve_store(
    config: ServerConfig,
    store: Store,
    stop: asyncio.Event,
    *,
    on_listening: Callable[[str], Awaitable[None]] | None = None,
    on_stopped: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Serve `store` until `stop`: a cluster's owner is told its address once it listens
    (`on_listening`) and when everything is answered and written (`on_stopped`)."""
    loop = asyncio.get_running_loop()
    engine = Engine(
        store,
        EngineConfig(
            # A cluster's answers wait for the changelog's quorum instead of a local fsync: a
            # copy that loses its unsynced tail reads it again from the changelog (replica.py).
            durable=config.durable and config.cluster is None,
            limits=config.limits,
            retry=config.retry,
            min_free_bytes=config.min_free_bytes,
            unique_per_queue=config.unique_per_queue,
            shard=config.shard_index,
            queue_shard=lambda queue: slot_of(queue) % config.shard_count,
            # A cluster's writes wait for the changelog's quorum: never on the event loop.
            inline_commits=config.cluster is None,
        ),
    )
    await engine.start()

    service = QueueService(engine, config)
    authority = Authority.load(config.auth_file) if config.auth_file else None
    guard = Guard(
        authority,
        engine.job_queues,
        engine.cron_queue,
        relay_secret=config.relay_secret,
        batch_queues=engine.workflows.batch_queues,
    )
    calls = CallsInHand()
    server, health_service, address, internal = await start_grpc(
        service, config.listen, config.grpc_options(), guard, config.tls, internal=True, calls=calls
    )
    service.address = advertised(address, config.advertise)
    front = None
    if config.native_front and config.tls is None and config.cluster is None and EnqueueFront.available():
        front = EnqueueFront(service, guard, calls, service.reads, config)
        port = config.enqueue_port + config.shard_index if config.enqueue_port else 0
        service.front_port = front.start(address.rsplit(":", 1)[0], port)
        service.front_requests = lambda: front.requests if front is not None else 0
        log.info("native front for enqueues on port %d", service.front_port)
    if internal:
        log.info("internal address %s (plaintext, loopback: for the router and the dashboard)", internal)
    if on_listening is not None:
        await on_listening(service.address)
    log.info(
        "pyqueue listening on %s (data %s, commit mode %s)", address, config.data_dir, config.commit_mode
    )
    shard = f"shard {config.shard_index}: " if config.shard_count > 1 else ""
    summaries = Summaries(engine, lambda: len(service.streams), SummaryConfig(config.summary_s), shard)
    summaries.start()
    http = None

    async def unhealthy() -> str:  # answered by this loop: a stuck server does not answer at all
        return "stopping" if stop.is_set() else ""

    if config.http_listen:
        inside = internal or dialable(address)
        http = HttpEndpoint(
            config.http_listen,
            loop,
            service.metrics_text,
            unhealthy,
            lambda: inside,
            authority,
            config.tls,
            config.http,
            config.host_rule(),
            reads=service.reads,
        )
        http.start()

    await stop.wait()
    if http is not None:
        http.stop()
    await summaries.stop()
    log.info("shutting down: finishing calls in hand")
    await health_service.enter_graceful_shutdown()
    if front is not None:
        front.close()
    await stop_server(server, calls, config.shutdown_grace_s, service.end_streams)
    if front is not None:
        await front.stop()
    await engine.stop()
    if on_stopped is not None:
        await on_stopped()
    store.close()
    stats = " ".join(f"{k}={v}" for k, v in sorted(engine.stats.items()))
    log.info("stats: %s commits=%d syncs=%d", stats, engine.committer.commits, engine.committer.syncs)
    log.info("stopped cleanly")


def dialable(address: str) -> str:
    """A bound address as this machine dials it (every address: loopback)."""
    host, port = address.rsplit(":", 1)
    return f"127.0.0.1:{port}" if host in ("0.0.0.0", "", "[::]", "::") else address


def advertised(address: str, host: str) -> str:
    """`address` (host:port as bound) with the host clients are told to dial ('': as bound)."""
    if not host:
        return address
    port = address.rsplit(":", 1)[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def serve(config: ServerConfig) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux and macOS
        asyncio.run(run(config))
    else:
        uvloop.run(run(config))

"""`pyqueue serve --shards N`: a supervisor, N shard processes, one public address.

Shards are started as fresh interpreters (subprocess, the equivalent of the spawn start method):
no native state, thread, RocksDB handle or gRPC channel crosses a fork, because there is no fork.
Each shard owns the slots s with s % N == its index, and its own RocksDB directory under the data
dir. The shard count of a data dir is fixed when it is created (cluster.json); starting it with
another count is refused, so no job is ever hidden behind a slot that moved.

A shard that dies is restarted on the same port and recovers its own jobs while the others keep
serving. A shard exits when its supervisor's pipe closes, so a supervisor that is SIGKILLed leaves
no orphans. SIGTERM (or SIGINT) stops the public address, then every shard, cleanly.
"""

import asyncio
import fcntl
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pyqueue.children import child_environment, pyqueue_command
from pyqueue.cluster import SLOTS, Topology
from pyqueue.cluster.fail_stop import HANDED_OVER, LOST_SHARD
from pyqueue.server.app import advertised, dialable, start_grpc
from pyqueue.server.auth import Authority
from pyqueue.server.config import ServerConfig, TlsFiles
from pyqueue.server.http import HttpEndpoint
from pyqueue.server.relay import start_relays, stop_relays
from pyqueue.server.relay_secret import RELAY_ENV, new_secret
from pyqueue.server.rights import Guard
from pyqueue.server.router import Router
from pyqueue.server.shutdown import CallsInHand, stop_server
from pyqueue.store.json_files import MetadataError, read_json, write_json
from pyqueue.store.rocks import missing_store

if TYPE_CHECKING:
    from pyqueue.cluster.node_map import NodeMap

MetricsText = Callable[[tuple[tuple[str, str], ...]], Coroutine[Any, Any, bytes]]

log = logging.getLogger("pyqueue.supervisor")
_LISTENING = re.compile(r"listening on (\S+:\d+)")
_INTERNAL = re.compile(r"internal address (\S+:\d+)")
_STANDING_BY = re.compile(r"standing by for shard")  # a cluster's shard: it listens once it owns


class _Listening(threading.Event):
    """Set when a shard process says where it listens (`address`, and `internal` if it has a
    plaintext loopback port besides its TLS one), or when its output ends."""

    address = ""
    internal = ""
    standing_by = False


class ShardProcess:
    def __init__(
        self,
        index: int,
        count: int,
        data_dir: Path,
        topology_file: Path,
        args: list[str],
        host: str = "127.0.0.1",
    ) -> None:
        self.index = index
        self.count = count
        self.data_dir = data_dir / f"shard-{index}"
        self.topology_file = topology_file
        self.args = args
        self.host = host  # shards listen on the public listen host: clients dial them directly
        self.address = f"{host}:0"
        self.internal = ""  # where the router dials it, when not its public address (TLS)
        self.proc: subprocess.Popen[str] | None = None
        self.relay_secret = ""  # the server's (relay_secret.py): in the environment, never in args
        self.init = False  # pass --init on the next start (then not again)

    @property
    def dial(self) -> str:
        """Where the router reaches this shard: its plaintext loopback port, else its address."""
        return self.internal or dialable(self.address)

    def start(self) -> str:
        try:
            return self._start()
        except SystemExit:
            if self.address.endswith(":0"):
                raise
            log.warning(
                "shard %d could not listen on %s again; taking any free port", self.index, self.address
            )
            self.address = f"{self.host}:0"
            return self._start()

    def _start(self) -> str:
        # One event per process: the relay of a process that died must not report the next one
        # as listening (it did, and a restarted shard was "back" before it listened).
        listening = _Listening()
        self.proc = subprocess.Popen(
            pyqueue_command(
                "serve",
                "--data-dir",
                str(self.data_dir),
                "--listen",
                self.address,
                "--shard-index",
                str(self.index),
                "--shard-count",
                str(self.count),
                "--topology-file",
                str(self.topology_file),
                "--http-listen",
                "",  # the supervisor serves HTTP for the whole server
                *(("--init",) if self.init else ()),
                *self.args,
            ),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**child_environment(), RELAY_ENV: self.relay_secret},
        )
        self.init = False
        threading.Thread(target=self._relay, args=(self.proc, listening), daemon=True).start()
        if not listening.wait(60) or not (listening.address or listening.standing_by):
            raise SystemExit(f"shard {self.index} did not start")
        if listening.address:
            self.address = listening.address
            self.internal = listening.internal
        return self.address

    def _relay(self, proc: "subprocess.Popen[str]", listening: "_Listening") -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            internal = _INTERNAL.search(line)
            if internal and not listening.is_set():
                listening.internal = internal.group(1)  # said before "listening on"
            if _STANDING_BY.search(line) and not listening.is_set():
                listening.standing_by = True
                listening.set()
            match = _LISTENING.search(line)
            if match and not listening.is_set():
                listening.address = match.group(1)
                listening.set()
            sys.stderr.write(f"[shard {self.index}] {line}")
        listening.set()  # it ended: without an address, the starter knows it never listened

    def stop(self, timeout: float) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def own(data_dir: Path) -> TextIO:
    """Hold the data dir for this supervisor's life: a second one on it is refused, by name."""
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = open(data_dir / "supervisor.lock", "a+")  # noqa: SIM115 - held open on purpose
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        pid = lock.read().strip() or "unknown"
        lock.close()
        raise MetadataError(
            f"{data_dir} is served by another pyqueue serve (pid {pid}); stop it first, or give "
            "another --data-dir"
        ) from None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def _check_layout(data_dir: Path, shards: int, may_create: bool) -> None:
    """Refuse a layout that does not match, or stores that are missing from it: a store is created
    only when this start created the data dir, or with --init (`may_create`)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    layout = data_dir / "cluster.json"
    if layout.exists():
        existing = read_cluster(data_dir)
        if existing["shards"] != shards:
            raise SystemExit(
                f"{data_dir} holds {existing['shards']} shards; start it with --shards {existing['shards']} "
                "(changing the shard count of a data dir is not supported: its slots would move away from their jobs)"
            )
        missing = [i for i in range(shards) if not (data_dir / f"shard-{i}" / "CURRENT").exists()]
        if missing and not may_create:
            names = ", ".join(f"shard-{i}" for i in missing)
            raise SystemExit(
                f"{data_dir} holds a {shards}-shard layout, but {names} holds no store: restore it from "
                "a backup (or mount its volume); to start it new and empty (its jobs are gone), start "
                "once with --init"
            )
    elif (data_dir / "CURRENT").exists() or any(data_dir.glob("*.sst")) or any(data_dir.glob("MANIFEST-*")):
        raise SystemExit(f"{data_dir} holds a single-process store; start it with --shards 1")
    elif not may_create:
        raise SystemExit(missing_store(data_dir))
    else:
        write_json(layout, {"shards": shards, "slots": SLOTS})


def read_cluster(data_dir: Path) -> dict[str, int]:
    """cluster.json: the shard count a data dir was made with."""
    found = len(list(data_dir.glob("shard-*")))
    remedy = (
        f'it records the shard count of this data dir: write {{"shards": {found}, "slots": {SLOTS}}} '
        f"into it ({found} shard directories are there), then start again"
    )
    value = read_json(data_dir / "cluster.json", ("shards",), remedy)
    if not isinstance(value["shards"], int) or value["shards"] < 1:
        raise MetadataError(
            f"{data_dir / 'cluster.json'} is damaged (shards is {value['shards']!r}); {remedy}"
        )
    return value


def _last_addresses(topology_file: Path) -> list[str]:
    """The shards' addresses last time; only a hint, so a damaged file is ignored (and said)."""
    if not topology_file.exists():
        return []
    try:
        return list(read_json(topology_file, ("addresses",), "")["addresses"])
    except MetadataError:
        log.warning("%s is damaged; the shards take new ports", topology_file)
        return []


def _step_aside(
    nodes: "NodeMap | None", public: list[Any], router: Router, reopen: Callable[[], Coroutine[Any, Any, Any]]
) -> "asyncio.Future[None]":
    """On a cluster node, close the public address while the node is cut off from NATS."""
    if nodes is None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done
    return asyncio.ensure_future(_step_aside_while_cut_off(nodes, public, reopen, router))


async def _step_aside_while_cut_off(
    nodes: "NodeMap", public: list[Any], reopen: Callable[[], Coroutine[Any, Any, Any]], router: Router
) -> None:
    """A node cut off from NATS knows nothing current of the owners: it closes its public address,
    so that clients given every node move on to another, and opens it again once NATS answers."""
    closed = False
    while True:
        await asyncio.sleep(0.2)
        if nodes.cut_off() and not closed:
            log.warning(
                "no NATS server has answered for a lease: closing the public address until one does "
                "(clients move to the other nodes)"
            )
            router.end_streams()
            await public[0].stop(1.0)
            closed = True
        elif closed and not nodes.cut_off():
            try:
                public[0] = (await reopen())[0]
            except SystemExit:  # the port is not free yet: try again at the next look
                continue
            router.enqueue_streams.open_again()
            closed = False
            log.info("NATS answers again: the public address is open again")


def _with_node(shards: "MetricsText", nodes: "NodeMap | None") -> "MetricsText":
    """The shards' metrics, and a cluster node's own after them."""
    if nodes is None:
        return shards

    async def both(metadata: tuple[tuple[str, str], ...]) -> bytes:
        from pyqueue.server import metrics

        text: bytes = await shards(metadata)
        return text + metrics.render(nodes.families())

    return both


def _say_exited(process: ShardProcess, code: int, nodes: "NodeMap | None") -> None:
    if nodes is not None and code in (LOST_SHARD, HANDED_OVER):
        nodes.exits["lost" if code == LOST_SHARD else "handed_over"] += 1
    if code == HANDED_OVER:
        log.info("shard %d handed its lease over; it stands by again", process.index)
    else:
        log.error("shard %d exited with code %d; restarting it on %s", process.index, code, process.address)


async def _join_cluster(config: ServerConfig, processes: list[ShardProcess], host: str) -> "NodeMap":
    """A cluster node: hold the node's name, and start every shard as a standby of the cluster."""
    from pyqueue.cluster.nats_link import ClusterError
    from pyqueue.cluster.node_map import NodeMap

    assert config.cluster is not None
    nodes = NodeMap(config.cluster, len(processes))
    try:
        await nodes.join()
    except ClusterError as exc:
        raise SystemExit(f"pyqueue serve: {exc}") from None
    for process in processes:
        process.args = [*process.args, *config.cluster.args()]
        process.address = f"{host}:0"  # an owner's address is in the cluster's bucket
    return nodes


async def _follow_owners(nodes: "NodeMap", router: Router, tls: TlsFiles | None) -> "asyncio.Task[None]":
    """Forward to each shard's owner wherever it serves (over TLS when the nodes serve it); wait
    (a while) for every shard to have one."""
    credentials = tls.peer_credentials() if tls is not None else None
    checks: set[asyncio.Task[None]] = set()

    async def check(shard: int, address: str) -> None:
        refusal = await router.tls_refusal(shard)
        if refusal and tls is not None:
            trusted = f"--cluster-ca {tls.peer_ca}" if tls.peer_ca else "the system's CAs (no --cluster-ca)"
            log.warning(
                "this node cannot forward to shard %d's owner at %s over TLS: %s; it checks the other "
                "nodes' certificates against %s, and shows its own --tls-cert to them",
                shard, address, refusal, trusted,
            )  # fmt: skip

    async def moved(shard: int, address: str) -> None:
        await router.moved(shard, address, dialable(address), credentials)
        if credentials is not None:  # checked aside: following the owners must not wait on it
            task = asyncio.create_task(check(shard, address))
            checks.add(task)
            task.add_done_callback(checks.discard)

    following = asyncio.create_task(nodes.follow(moved))
    if not await nodes.all_owned(2 * nodes.config.lease_s + 30):
        log.warning("not every shard has an owner yet; serving those that have")
    return following


def _hand_relay_secret(processes: list[ShardProcess], nodes: "NodeMap | None") -> str:
    """The secret of the relay's calls (relay_secret.py): made now, or the cluster's."""
    secret = nodes.relay_secret if nodes is not None else new_secret()
    for process in processes:
        process.relay_secret = secret
    return secret


async def supervise(
    data_dir: Path, listen: str, shards: int, args: list[str], grace_s: float, config: ServerConfig
) -> None:
    """Start the shards, then the public address (the router) and the HTTP port; run until
    SIGTERM or SIGINT. Shards listen on the listen host; clients are told the advertised host."""
    may_create = config.init or not data_dir.exists()
    lock = own(data_dir)
    _check_layout(data_dir, shards, may_create)
    grpc_options = config.grpc_options()
    topology_file = data_dir / "topology.json"
    host = listen.rsplit(":", 1)[0]
    processes = [ShardProcess(i, shards, data_dir, topology_file, args, host) for i in range(shards)]
    for process in processes:
        process.init = may_create  # on its first start only: a restart never makes an empty store
    for process, last in zip(processes, _last_addresses(topology_file), strict=False):
        # The same ports as last time, so clients that knew them still do.
        process.address = f"{host}:{last.rsplit(':', 1)[1]}"
    loop = asyncio.get_running_loop()
    nodes = await _join_cluster(config, processes, host) if config.cluster is not None else None
    relay_secret = _hand_relay_secret(processes, nodes)
    await asyncio.gather(*(loop.run_in_executor(None, p.start) for p in processes))

    def published() -> list[str]:
        return [advertised(p.address, config.advertise) for p in processes]

    addresses = published()
    write_json(topology_file, {"addresses": addresses})
    topology = Topology(tuple(addresses))

    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    router = Router(topology, [p.dial for p in processes], config.max_message_bytes, config.read_share)
    following = await _follow_owners(nodes, router, config.tls) if nodes is not None else None
    carriers = start_relays(shards, lambda shard: router.stubs[shard], relay_secret)
    authority = Authority.load(config.auth_file) if config.auth_file else None
    calls = CallsInHand()
    server, _, address, internal = await start_grpc(
        router, listen, grpc_options, Guard(authority, audits=False), config.tls, internal=True, calls=calls
    )
    log.info("pyqueue listening on %s (%d shards: %s)", address, shards, ", ".join(addresses))
    public = [server]  # a cluster node closes and opens it again while it is cut off from NATS

    aside = _step_aside(
        nodes,
        public,
        router,
        lambda: start_grpc(
            router, address, grpc_options, Guard(authority, audits=False), config.tls, calls=calls
        ),
    )
    http_listen = config.http_listen

    async def unhealthy() -> str:
        """Health is every shard answering a call, not its process existing: a shard restarting
        (its port refusing) or hung makes the whole server unhealthy until it answers."""
        if stop.is_set():
            return "stopping"
        return await router.unhealthy_shards()

    http = (
        HttpEndpoint(
            http_listen,
            loop,
            _with_node(router.metrics_text, nodes),
            unhealthy,
            lambda: internal or dialable(address),
            authority,
            config.tls,
            config.http,
            config.host_rule(),
            nodes.view if nodes is not None else None,
            router.reads,
        )
        if http_listen
        else None
    )
    if http is not None:
        http.start()

    def watch(process: ShardProcess) -> None:
        while not stop.is_set():
            assert process.proc is not None
            code = process.proc.wait()
            if stop.is_set():
                return
            _say_exited(process, code, nodes)
            before = (process.address, process.dial)
            process.start()
            if nodes is None and (process.address, process.dial) != before:
                write_json(topology_file, {"addresses": published()})
                moved = router.moved(process.index, published()[process.index], process.dial)
                asyncio.run_coroutine_threadsafe(moved, loop).result(30)
            log.info("shard %d is back on %s", process.index, process.address)

    for process in processes:
        threading.Thread(
            target=watch, args=(process,), daemon=True, name=f"watch-shard-{process.index}"
        ).start()

    await stop.wait()
    if http is not None:
        http.stop()
    log.info("shutting down: stopping the public address, then every shard")
    aside.cancel()
    await stop_server(public[0], calls, grace_s, router.end_streams)
    await stop_relays(carriers)
    await router.close()
    await asyncio.gather(*(loop.run_in_executor(None, p.stop, grace_s + 5) for p in processes))
    if nodes is not None and following is not None:
        following.cancel()
        await nodes.leave()
    log.info("stopped cleanly")
    lock.close()

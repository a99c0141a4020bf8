"""The pyqueue nodes of a test cluster: each a supervisor with its shard processes, on loopback,
joined to real NATS servers (nats_servers.py)."""

import contextlib
import itertools
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from harness import ServerProcess, children
from nats_servers import NatsCluster

_names = itertools.count()


class Node(ServerProcess):
    """A pyqueue node: its supervisor and shard processes, killed together like a host dying."""

    def __init__(
        self, root: Path, name: str, nats: str, cluster: str, shards: int, lease_s: float, *extra: str
    ) -> None:
        super().__init__(
            root / f"node-{name}",
            "--shards", str(shards), "--cluster", nats, "--node", name,
            "--cluster-name", cluster, "--lease", str(lease_s), *extra,
        )  # fmt: skip
        self.name = name

    def kill(self) -> None:
        """SIGKILL the supervisor and every shard process at once (a host that dies)."""
        assert self.proc is not None
        pids = [self.proc.pid, *children(self.proc.pid)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(10)

    def shard_pid(self, shard: int) -> int:
        """The process of this node's shard `shard` (the supervisor starts them in order)."""
        assert self.proc is not None
        for pid in children(self.proc.pid):
            if f"--shard-index\x00{shard}\x00" in Path(f"/proc/{pid}/cmdline").read_text():
                return pid
        raise AssertionError(f"node {self.name} runs no process for shard {shard}")


class Cluster:
    def __init__(
        self, root: Path, nats: NatsCluster, shards: int = 2, lease_s: float = 2.0, *extra: str
    ) -> None:
        self.name = f"t{os.getpid()}x{next(_names)}"
        self.nats = nats
        self.root, self.shards, self.lease_s, self.extra = root, shards, lease_s, extra
        self.nodes = [Node(root, n, nats.urls, self.name, shards, lease_s, *extra) for n in "abc"]

    def add_node(self, name: str) -> Node:
        """Another node with this cluster's flags and an empty data dir."""
        node = Node(self.root, name, self.nats.urls, self.name, self.shards, self.lease_s, *self.extra)
        self.nodes.append(node)
        node.start(timeout=120)
        return node

    def start(self) -> "Cluster":
        errors: list[BaseException] = []

        def start(node: Node) -> None:
            try:
                node.start(timeout=90)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=start, args=(n,)) for n in self.nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return self

    @property
    def addresses(self) -> str:
        """Every node, as a client is given them: it uses the first that answers."""
        return ",".join(n.address for n in self.nodes if n.proc is not None and n.proc.poll() is None)

    def owner_address(self, shard: int) -> str:
        """Where shard `shard` is served now, as the cluster tells clients."""
        import pyqueue

        with pyqueue.Client(self.addresses, timeout=10) as client:
            topology = client.topology()
            assert topology is not None
            return topology.addresses[shard]

    def owner(self, shard: int) -> Node:
        """The node whose shard process serves `shard` now."""
        address = self.owner_address(shard)
        for node in self.nodes:
            if (
                node.proc is not None
                and node.proc.poll() is None
                and any(
                    line.startswith(f"[shard {shard}]") and f"listening on {address}" in line
                    for line in node.lines
                )
            ):
                return node
        raise AssertionError(f"no live node serves shard {shard} at {address}")

    def close(self) -> None:
        for node in self.nodes:
            node.close()
            # Shown by pytest only when the test failed: what each node said last.
            print(f"--- node {node.name} ---\n{''.join(node.lines[-120:])}")


def wait_until(condition: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout}s")

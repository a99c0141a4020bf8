"""A partition: the owner of a shard is cut off from every NATS server while it keeps running and
its clients can still reach it (its processes are put in a cgroup whose packets to the NATS ports
iptables drops). It cannot renew its lease or append, so it stops answering; a standby on the other
side takes the shard; nothing acknowledged is lost, and an enqueue sent to the cut-off owner is
never acknowledged once its lease is gone."""

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "durability"))

from cluster_nodes import Cluster, Node, wait_until
from harness import children
from history import History, Load

import pyqueue

CGROUP2 = Path("/sys/fs/cgroup/unified")
needs_cgroup_firewall = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("iptables") or not (CGROUP2 / "cgroup.procs").exists(),
    reason="needs root, iptables and a cgroup2 hierarchy at /sys/fs/cgroup/unified",
)


def connections_to(pids: list[int], ports: list[int]) -> list[int]:
    """The local ports of the TCP connections these processes hold to any of `ports`."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    local = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[9] in inodes and int(fields[2].split(":")[1], 16) in ports:
            local.append(int(fields[1].split(":")[1], 16))
    return local


@contextmanager
def cut_off_from_nats(node: Node, nats_ports: list[int]) -> Iterator[None]:
    """Drop every packet between the node's processes and the NATS servers until the block ends:
    the connections they hold, by port, and any new one, by their cgroup (a socket keeps the cgroup
    it was made in, so the cgroup alone would spare the connections already open)."""
    assert node.proc is not None
    group = CGROUP2 / f"pyqueue-partition-{os.getpid()}"
    group.mkdir(exist_ok=True)
    pids = [node.proc.pid, *children(node.proc.pid)]
    for pid in pids:  # their later children inherit it
        (group / "cgroup.procs").write_text(str(pid))
    rules = [
        ["OUTPUT", "-m", "cgroup", "--path", group.name, "-p", "tcp", "--dport", str(p), "-j", "DROP"]
        for p in nats_ports
    ]
    for port in connections_to(pids, nats_ports):
        rules += [
            ["OUTPUT", "-p", "tcp", "--sport", str(port), "-j", "DROP"],
            ["OUTPUT", "-p", "tcp", "--dport", str(port), "-j", "DROP"],
        ]
    for rule in rules:
        subprocess.run(["iptables", "-I", *rule], check=True)
    try:
        yield
    finally:
        for rule in rules:
            subprocess.run(["iptables", "-D", *rule], check=True)
        for pid in (group / "cgroup.procs").read_text().split():  # back to the root, to remove it
            (CGROUP2 / "cgroup.procs").write_text(pid)
        group.rmdir()


@needs_cgroup_firewall
@pytest.mark.timeout(240)
def test_a_partitioned_owner_that_keeps_running_loses_nothing_and_acknowledges_nothing(
    cluster: Cluster,
) -> None:
    history = History()
    load = Load(history, cluster.addresses, producers=2, queues=("q0", "q1", "q2", "q3"))
    load.start()
    wait_until(lambda: len(history.ack_confirmed) >= 200, 60, "200 jobs completed before the partition")
    victim = cluster.owner(0)
    old_address = cluster.owner_address(0)
    others = [n for n in cluster.nodes if n is not victim]
    nats_ports = [s.port for s in cluster.nats.servers]
    started = time.monotonic()
    with cut_off_from_nats(victim, nats_ports):
        wait_until(
            lambda: any("[shard 0]" in line and "owner from" in line for n in others for line in n.lines),
            60,
            "a node on the other side took shard 0",
        )
        # The cut-off owner's clients can still reach it: nothing it answers now is acknowledged.
        try:
            with pyqueue.Client(old_address, timeout=10, routing=False, failover_s=0) as direct:
                late = direct.enqueue("t", "late", queue="q0")
        except pyqueue.PyQueueError:
            late = None
        assert late is None, f"the cut-off owner acknowledged job {late.id}"
        done = len(history.ack_confirmed)
        wait_until(
            lambda: len(history.ack_confirmed) >= done + 200,
            90,
            "200 more jobs completed across the partition",
        )
    history.crashes.append((started, time.monotonic()))
    victim.output.wait_lines("lost the shard", timeout=30)  # type: ignore[union-attr]
    load.drain(90)
    verdict = history.verdict()
    assert verdict["lost"] == 0, verdict
    assert verdict["delivered_after_ack"] == 0, verdict
    assert verdict["unexplained_duplicates"] == 0, verdict

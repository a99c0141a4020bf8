"""Reads yield to writes (server/read_share.py) and a shared read is built once for many callers
(server/fresh.py): driven by an injected clock, then on a real server."""

import asyncio
import threading
from pathlib import Path

from harness import ServerProcess, serve_once

import pyqueue
from pyqueue.server.fresh import Fresh
from pyqueue.server.read_share import ReadShare, ReadShareConfig


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_quiet_server_answers_reads_back_to_back() -> None:
    clock = Clock()
    share = ReadShare(ReadShareConfig(share=0.25, call_cost_s=0.0), clock)
    for _ in range(3):
        async with share.read():
            clock.now += 0.01  # each read takes 10 ms
    assert share.paused_s == 0.0


async def test_while_work_comes_in_reads_keep_to_their_share() -> None:
    clock = Clock()
    share = ReadShare(ReadShareConfig(share=0.25, busy_s=1.0, call_cost_s=0.0), clock)
    share.note_write()
    async with share.read():
        clock.now += 0.01
    async with share.read():  # waits 10 ms * 3: reads had a quarter of that stretch
        pass
    assert abs(share.paused_s - 0.03) < 1e-9
    clock.now += 5  # no write for a while: quiet again, no pause
    async with share.read():
        pass
    assert abs(share.paused_s - 0.03) < 1e-9
    assert share.pause_for(0.01) == 0.0
    share.note_write()
    assert abs(share.pause_for(0.01) - 0.03) < 1e-9


async def test_one_pause_is_at_most_max_pause_s() -> None:
    """A read of megabytes is followed by at most `max_pause_s`, so the next caller's deadline
    is not spent waiting (at a fiftieth, 10 s of reading would pause the next read 490 s)."""
    clock = Clock()
    config = ReadShareConfig(share=0.02, busy_s=100.0, call_cost_s=0.0, max_pause_s=0.05)
    share = ReadShare(config, clock)
    share.note_write()
    async with share.read():
        clock.now += 10.0
    async with share.read():
        pass
    assert abs(share.paused_s - 0.05) < 1e-9
    assert share.pause_for(10.0) == 0.05


async def test_reads_go_one_at_a_time() -> None:
    share = ReadShare()
    inside, most = 0, 0

    async def read() -> None:
        nonlocal inside, most
        async with share.read():
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0)
            inside -= 1

    await asyncio.gather(*(read() for _ in range(5)))
    assert most == 1


async def test_callers_within_a_second_share_one_build() -> None:
    clock = Clock()
    started = asyncio.Event()
    release = asyncio.Event()

    async def build() -> int:
        started.set()
        await release.wait()
        return fresh.builds + 1

    fresh: Fresh[int] = Fresh(build, max_age_s=1.0, clock=clock)
    waiting = [asyncio.ensure_future(fresh.get()) for _ in range(4)]
    await started.wait()
    release.set()
    assert await asyncio.gather(*waiting) == [1, 1, 1, 1]  # four callers during one build
    clock.now += 0.5
    assert await fresh.get() == 1 and fresh.builds == 1
    clock.now += 0.6  # past the second: built again
    assert await fresh.get() == 2 and fresh.builds == 2


def paused_seconds(client: pyqueue.Client) -> float:
    line = next(
        x for x in client.metrics().splitlines() if x.startswith("pyqueue_reads_paused_seconds_total")
    )
    return float(line.split()[-1])


def list_back_to_back(address: str, seconds: float) -> int:
    """4 callers listing a page of jobs back to back for `seconds`: how many lists they made."""
    done = [0] * 4

    def caller(n: int) -> None:
        with pyqueue.Client(address) as client:
            end = threading.Event()
            threading.Timer(seconds, end.set).start()
            while not end.is_set():
                client.list_page(limit=100)
                done[n] += 1

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done)


def list_beside_a_producer(address: str, seconds: float) -> int:
    stop = threading.Event()
    enqueued = [0]

    def produce() -> None:
        with pyqueue.Client(address) as client:
            while not stop.is_set():
                client.enqueue("t", queue="busy")
                enqueued[0] += 1

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        lists = list_back_to_back(address, seconds)
    finally:
        stop.set()
        producer.join(30)
    assert enqueued[0] > 0 and lists > 0
    return lists


def test_a_flood_of_reads_is_held_back_while_a_producer_enqueues(tmp_path: Path) -> None:
    """With a producer enqueueing, 4 callers listing jobs back to back are held to their share
    (the server says how long, in /metrics); alone, they are not held at all."""
    server = ServerProcess(tmp_path / "data").start()
    try:
        assert list_back_to_back(server.address, 1.5) > 0
        with pyqueue.Client(server.address) as client:
            assert paused_seconds(client) == 0.0
        list_beside_a_producer(server.address, 1.5)
        with pyqueue.Client(server.address) as client:
            assert paused_seconds(client) > 0.1  # held back while work came in
    finally:
        server.close()


def test_read_share_1_never_holds_reads_back(tmp_path: Path) -> None:
    """`--read-share 1` gives reads the whole loop: beside a producer they are never held."""
    server = ServerProcess(tmp_path / "data", "--read-share", "1").start()
    try:
        list_beside_a_producer(server.address, 1.0)
        with pyqueue.Client(server.address) as client:
            assert paused_seconds(client) == 0.0
    finally:
        server.close()


def test_a_read_share_out_of_range_is_refused(tmp_path: Path) -> None:
    for bad in ("0", "1.5", "-0.1"):
        done = serve_once(tmp_path / "data", "--read-share", bad)
        assert done.returncode == 2, done
        assert "--read-share" in done.stderr, done.stderr

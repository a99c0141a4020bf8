"""The committer on real RocksDB: inline commits on the loop while the writer is idle, and nothing
ever overtaking what the writer already has."""

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from pyqueue.engine.committer import Committer
from pyqueue.engine.errors import Unavailable
from pyqueue.engine.requests.base import Request
from pyqueue.engine.view import BatchView
from pyqueue.store import RocksStore
from pyqueue.store.contract import Family

WAIT_S = 30.0


class Put(Request):
    """Writes one key; records which thread applied it, in which commit, and in what order."""

    needs_sync = True

    def __init__(
        self, name: str, log: list[tuple[str, int, int]], committer: "Committer | None" = None
    ) -> None:
        super().__init__()
        self.name = name
        self.log = log
        self.committer = committer
        self.hold: threading.Event | None = None  # apply waits for it (holds the writer)
        self.applying = threading.Event()

    def apply(self, view: BatchView) -> None:
        self.applying.set()
        if self.hold is not None:
            assert self.hold.wait(WAIT_S)
        commit = self.committer.commits if self.committer else 0
        self.log.append((self.name, threading.get_ident(), commit))
        view.batch.put(Family.DATA, b"test/" + self.name.encode(), b"1")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RocksStore]:
    store = RocksStore(tmp_path / "db")
    yield store
    store.close()


@pytest.fixture
async def committer(store: RocksStore) -> AsyncIterator[Committer]:
    loop = asyncio.get_running_loop()
    fatal: list[BaseException] = []
    committer = Committer(
        store,
        lambda: 0,
        durable=True,
        post=loop.call_soon_threadsafe,
        post_here=loop.call_soon,
        on_fatal=fatal.append,
    )
    committer.start()
    committer.fatal = fatal  # type: ignore[attr-defined]
    yield committer
    committer.hand_over()
    await asyncio.to_thread(committer.stop)


async def test_what_the_loop_submits_in_one_turn_is_committed_there_as_one_batch(
    committer: Committer, store: RocksStore
) -> None:
    log: list[tuple[str, int, int]] = []
    requests = [Put(f"r{i}", log, committer) for i in range(3)]
    for request in requests:
        committer.submit(request)
    async with asyncio.timeout(WAIT_S):
        await asyncio.gather(*(r.future for r in requests))
    loop_thread = threading.get_ident()
    assert [name for name, _, _ in log] == ["r0", "r1", "r2"]
    assert {thread for _, thread, _ in log} == {loop_thread}, "applied on the loop, not the writer"
    assert len({commit for _, _, commit in log}) == 1, "one batch"
    assert committer.syncs >= 1  # answered only after an fsync
    assert store.get(Family.DATA, b"test/r2") == b"1"


async def test_nothing_overtakes_what_the_writer_already_has(committer: Committer) -> None:
    log: list[tuple[str, int, int]] = []
    first = Put("first", log)
    first.hold = threading.Event()
    # From another thread, as a thread of the server would: it goes to the writer, which holds it.
    await asyncio.to_thread(committer.submit, first)
    assert await asyncio.to_thread(first.applying.wait, WAIT_S)
    later = [Put(f"later{i}", log) for i in range(2)]
    for request in later:
        committer.submit(request)  # on the loop, while the writer is busy
    await asyncio.sleep(0)  # the loop's turn ends: the gathered requests must wait their turn
    assert [name for name, _, _ in log] == []
    first.hold.set()
    async with asyncio.timeout(WAIT_S):
        await asyncio.gather(first.future, *(r.future for r in later))
    assert [name for name, _, _ in log] == ["first", "later0", "later1"]
    writer = {thread for name, thread, _ in log if name == "first"}
    assert writer != {threading.get_ident()}, "the held request ran on the writer thread"


async def test_a_failed_inline_write_is_fatal_and_answers_nothing(
    committer: Committer, store: RocksStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(batch: object) -> None:
        raise OSError("injected: the disk went away")

    monkeypatch.setattr(store, "write", broken)
    request = Put("lost", [])
    committer.submit(request)
    fatal: list[BaseException] = committer.fatal  # type: ignore[attr-defined]
    async with asyncio.timeout(WAIT_S):
        while not fatal:
            await asyncio.sleep(0.01)
    assert isinstance(fatal[0], OSError)
    await asyncio.sleep(0)
    assert not request.future.done(), "a request whose write failed is never answered"


async def test_a_request_gathered_as_the_committer_stops_is_refused_not_fatal(committer: Committer) -> None:
    request = Put("late", [])
    committer.submit(request)  # gathered for the end of this turn
    committer.stop()  # the server stops before the turn ends (its writer and syncer are gone)
    async with asyncio.timeout(WAIT_S):
        with pytest.raises(Unavailable, match="shutting down"):
            await request.future
    assert committer.fatal == []  # type: ignore[attr-defined]

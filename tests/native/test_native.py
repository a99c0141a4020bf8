"""The Python face of pyqueue._native (the Rust core has its own cargo tests)."""

import threading

import pytest

from pyqueue import _native


def test_ready_index_orders_by_priority_then_id_across_queues() -> None:
    ready = _native.ReadyIndex()
    ready.insert("a", 5, 10)
    ready.insert_many("b", [(1, 30), (5, 5)])
    ready.insert("a", 1, 20)
    selection = ready.select(["a", "b"])
    assert selection.claim(10) == [20, 30, 5, 10]
    assert selection.claim(10) == []
    assert not selection.has_ready()


def test_pause_and_counts() -> None:
    ready = _native.ReadyIndex()
    ready.insert_many("q", [(0, 1), (0, 2)])
    ready.set_paused("q", True)
    assert ready.select(["q"]).claim(5) == []
    assert ready.count("q") == 2 and ready.total() == 2 and ready.is_paused("q")
    ready.set_paused("q", False)
    assert ready.remove("q", 0, 1) and not ready.remove("q", 0, 1)
    assert ready.select(["q"]).claim(5) == [2]
    assert ready.queues() == ["q"]


def test_timer_set_pops_only_what_is_due() -> None:
    timers = _native.TimerSet()
    timers.insert_many([(300, 1), (100, 2)])
    timers.insert(100, 1)
    assert timers.next_due() == 100
    assert timers.pop_due(150, 10) == [(100, 1), (100, 2)]
    assert len(timers) == 1 and timers.remove(300, 1) and timers.next_due() is None


def test_claim_token_has_one_winner() -> None:
    token = _native.ClaimToken()
    assert token.try_claim() and token.claimed and not token.try_claim()


def test_coalescer_batches_and_releases_the_gil_while_waiting() -> None:
    inbox = _native.Coalescer()
    got: list[list[object]] = []
    consumer = threading.Thread(target=lambda: got.append(inbox.take_batch(10)))
    consumer.start()
    # The consumer is blocked in native code; this thread still runs Python (the GIL is free).
    inbox.push("a")
    consumer.join(10)
    assert got == [["a"]]
    for item in range(5):
        inbox.push(item)
    assert inbox.take_batch(3) == [0, 1, 2]
    assert len(inbox) == 2
    assert inbox.take_batch(10, timeout=0.01) == [3, 4]
    assert inbox.take_batch(10, timeout=0.01) == []
    inbox.close()
    assert inbox.closed
    with pytest.raises(_native.CoalescerClosed):
        inbox.push(1)

"""HandlerThreads: the threads `pyqueue worker` runs sync handlers in."""

import asyncio
import threading
import time

import pytest

from pyqueue.worker.threads import HandlerThreads

WAIT_S = 30  # generous: these only wait on events a loaded machine may be slow to deliver


def wait_until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.01)


async def test_a_call_gives_back_what_the_function_returned_or_raised() -> None:
    threads = HandlerThreads(4)
    loop = asyncio.get_running_loop()
    assert await threads.call(loop, lambda: threading.current_thread().name) == "pyqueue-job-1"
    with pytest.raises(KeyError, match="nope"):
        await threads.call(loop, lambda: dict[str, int]()["nope"])
    threads.shutdown()


async def test_calls_one_after_another_reuse_one_thread() -> None:
    threads = HandlerThreads(4)
    loop = asyncio.get_running_loop()
    names = {await threads.call(loop, lambda: threading.current_thread().name) for _ in range(20)}
    assert names == {"pyqueue-job-1"} and threads.threads == 1
    threads.shutdown()


async def test_a_call_given_up_on_keeps_its_thread_and_the_next_call_gets_another() -> None:
    """A handler past its time limit: the waiter stops waiting, the thread runs on (abandoned)."""
    threads = HandlerThreads(4)
    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: errors.append(context))
    release, finished = threading.Event(), threading.Event()

    def stuck() -> str:
        release.wait(WAIT_S)
        finished.set()
        return "too late"

    abandoned = threads.call(loop, stuck)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(abandoned, 0.05)
    assert abandoned.cancelled()
    assert await threads.call(loop, lambda: "next") == "next"  # while the first still runs
    assert threads.threads == 2
    release.set()
    assert finished.wait(WAIT_S)
    assert await threads.call(loop, lambda: "after") == "after"
    assert errors == []  # its late result was dropped, not set on the cancelled future
    threads.shutdown()


async def test_no_more_threads_than_the_cap_the_extra_call_waits_its_turn() -> None:
    threads = HandlerThreads(2)
    loop = asyncio.get_running_loop()
    release = threading.Event()
    busy = [threads.call(loop, lambda: release.wait(WAIT_S)) for _ in range(2)]
    third = threads.call(loop, lambda: "third")
    assert threads.threads == 2  # a thread is started (counted) by the call that needs it
    await asyncio.sleep(0)
    assert not third.done()
    release.set()
    assert await asyncio.wait_for(third, WAIT_S) == "third"
    assert all(await asyncio.gather(*busy))
    threads.shutdown()


async def test_stop_iteration_from_a_handler_arrives_as_an_error() -> None:
    """An asyncio future refuses StopIteration; it must not leave the caller waiting forever."""
    threads = HandlerThreads(1)
    loop = asyncio.get_running_loop()
    with pytest.raises(RuntimeError, match="StopIteration"):
        await asyncio.wait_for(threads.call(loop, lambda: next(iter([]))), WAIT_S)
    threads.shutdown()


async def test_it_serves_run_in_executor_as_a_concurrent_futures_executor() -> None:
    threads = HandlerThreads(2)
    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(threads, lambda a, b: a + b, 2, 3) == 5
    with pytest.raises(ZeroDivisionError):
        await loop.run_in_executor(threads, lambda: 1 / 0)
    threads.shutdown()


def test_shutdown_ends_the_idle_threads_and_refuses_new_calls() -> None:
    threads = HandlerThreads(4)
    assert threads.submit(lambda: 1).result(WAIT_S) == 1
    threads.shutdown()
    wait_until(lambda: threads.threads == 0, "the idle thread to end")
    with pytest.raises(RuntimeError, match="shut down"):
        threads.submit(lambda: 2)


def test_a_result_for_a_loop_that_closed_meanwhile_is_dropped_and_the_thread_lives_on() -> None:
    threads = HandlerThreads(1)
    release, finished = threading.Event(), threading.Event()

    def slow() -> None:
        release.wait(WAIT_S)
        finished.set()

    async def give_up() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(threads.call(asyncio.get_running_loop(), slow), 0.05)

    asyncio.run(give_up())  # its loop is closed now
    release.set()
    assert finished.wait(WAIT_S)
    assert threads.submit(lambda: "alive").result(WAIT_S) == "alive"
    assert threads.threads == 1
    threads.shutdown()


def test_a_cap_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        HandlerThreads(0)


async def test_a_thread_that_cannot_start_fails_the_call_and_counts_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    threads = HandlerThreads(4)
    loop = asyncio.get_running_loop()

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    with monkeypatch.context() as patched:
        patched.setattr(threading.Thread, "start", refuse)
        with pytest.raises(RuntimeError, match="can't start new thread"):
            threads.call(loop, lambda: "never")
    assert threads.threads == 0
    assert await threads.call(loop, lambda: "now") == "now"  # nothing left queued ahead of it
    threads.shutdown()


def test_shutdown_with_wait_returns_once_every_thread_has_ended() -> None:
    finished = threading.Event()

    def busy() -> None:
        time.sleep(0.2)
        finished.set()

    with HandlerThreads(2) as threads:  # leaving it is shutdown(wait=True)
        threads.submit(busy)
        threads.submit(lambda: None).result(WAIT_S)  # a second thread, idle by now
    assert finished.is_set() and threads.threads == 0


def test_a_submitted_call_cancelled_while_it_waits_never_runs() -> None:
    threads = HandlerThreads(1)
    release = threading.Event()
    ran: list[str] = []
    busy = threads.submit(release.wait, WAIT_S)  # the one thread is taken
    waiting = threads.submit(ran.append, "ran")
    assert waiting.cancel()
    release.set()
    assert busy.result(WAIT_S) is True
    assert threads.submit(lambda: "after").result(WAIT_S) == "after"  # it came after the cancelled one
    assert ran == [] and waiting.cancelled()
    threads.shutdown()

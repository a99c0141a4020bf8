"""The threads `pyqueue worker` runs sync handlers in.

`loop.run_in_executor` on a ThreadPoolExecutor cost about 38 µs of CPU per call here: a
concurrent.futures.Future with its condition, the work item, the pool's bookkeeping, and asyncio
chaining one future to another. A no-op job's whole worker-side cost was about 110 µs. Handing
the function to a thread over a SimpleQueue and the result back with `call_soon_threadsafe`
costs about 18 µs (bench/handler_threads.py).

- A call that finds no idle thread starts one, up to `max_threads`. A handler past its time limit
  keeps its thread (abandoned, it runs on), and the next call gets another thread.
- The threads are daemons, named pyqueue-job-N: an abandoned handler holds up no interpreter's
  exit (and `run_worker` exits past the ones still running on purpose, by that name).
- It is a concurrent.futures.Executor too (`submit`), for `JobFunction.run` and anything else
  given the app's executor.
"""

import asyncio
import contextlib
import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

_CANCELLED = object()  # what a submitted call cancelled before it ran gives its settle

Settle = Callable[[bool, Any], None]
"""Told what the function did: (True, its result) or (False, the exception it raised)."""


class HandlerThreads(Executor):
    def __init__(self, max_threads: int, name: str = "pyqueue-job") -> None:
        if max_threads < 1:
            raise ValueError(f"max_threads must be at least 1, not {max_threads}")
        self._max = max_threads
        self._name = name
        self._work: queue.SimpleQueue[tuple[Callable[[], Any], Settle] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0  # threads waiting for work
        self._backlog = 0  # calls queued and not taken by a thread yet
        self._shut = False
        self._numbers = itertools.count(1)  # thread names: pyqueue-job-1, -2, ...
        self._started: list[threading.Thread] = []  # for shutdown(wait=True)

    def call(self, loop: asyncio.AbstractEventLoop, fn: Callable[[], Any]) -> "asyncio.Future[Any]":
        """Run `fn()` in a thread; the future (of `loop`) gets what it returned or raised. Cancel
        the future to stop waiting: the thread runs on, and what it returns is dropped."""
        future = loop.create_future()

        def settle(ok: bool, value: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting any more
                loop.call_soon_threadsafe(_settle, future, ok, value)

        self._put(fn, settle)
        return future

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> "Future[Any]":
        future: Future[Any] = Future()

        def run() -> Any:
            if not future.set_running_or_notify_cancel():
                return _CANCELLED  # cancelled while it waited: it never runs
            return fn(*args, **kwargs)

        def settle(ok: bool, value: Any) -> None:
            if value is _CANCELLED:
                return
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

        self._put(run, settle)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Idle threads end; busy ones end after their call, and calls already queued still run.
        With `wait`, return once every thread has ended (an abandoned handler included)."""
        with self._lock:
            self._shut = True
            threads = self._threads
            started, self._started = self._started, []
        for _ in range(threads):
            self._work.put(None)
        if wait:
            for thread in started:
                thread.join()

    @property
    def threads(self) -> int:
        """Threads started and not ended (busy, abandoned or idle)."""
        return self._threads

    def _put(self, fn: Callable[[], Any], settle: Settle) -> None:
        with self._lock:
            if self._shut:
                raise RuntimeError("the handler threads are shut down")
            self._backlog += 1
            start = self._backlog > self._idle and self._threads < self._max
            if start:
                self._threads += 1
                name = f"{self._name}-{next(self._numbers)}"
        if start:
            thread = threading.Thread(target=self._run, name=name, daemon=True)
            try:
                thread.start()
            except BaseException:  # no thread to be had (a process limit): this call fails, not hangs
                with self._lock:
                    self._threads -= 1
                    self._backlog -= 1
                raise
            with self._lock:
                self._started.append(thread)  # threads end only at shutdown: at most max_threads
        self._work.put((fn, settle))

    def _run(self) -> None:
        take, lock = self._work.get, self._lock
        with lock:
            self._idle += 1
        try:
            while True:
                item = take()
                with lock:
                    self._idle -= 1
                    if item is not None:
                        self._backlog -= 1
                if item is None:
                    return
                fn, settle = item
                del item
                try:
                    value, ok = fn(), True
                except BaseException as exc:  # the handler's, for its caller: never this thread's end
                    value, ok = exc, False
                with lock:  # idle before the answer: the caller's next call finds this thread
                    self._idle += 1
                settle(ok, value)
                del fn, settle, value  # let go of the call before waiting for the next
        finally:
            with lock:
                self._threads -= 1


def _settle(future: "asyncio.Future[Any]", ok: bool, value: Any) -> None:
    if future.done():  # cancelled: the caller stopped waiting (a time limit)
        return
    if ok:
        future.set_result(value)
    elif isinstance(value, StopIteration):  # a future refuses it: it would end a generator instead
        future.set_exception(RuntimeError(f"the handler raised StopIteration: {value!r}"))
    else:
        future.set_exception(value)

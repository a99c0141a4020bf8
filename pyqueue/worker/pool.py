"""`pyqueue worker --pool process`: each job runs in a child process, so a job past its time limit
can really be stopped (the child is killed and replaced), like Celery's hard time limit.

Children are started with the spawn method (nothing crosses a fork) and import the app themselves
from its MODULE:APP name. One job at a time per child; the parent waits on the child's pipe from
the event loop, without a thread per job.

In a child, `current_job()` is the job (without its stream: it is answered by the parent). A
cancel reaches the child as SIGUSR1, which sets `current_job().cancelled`: a handler that looks
returns early within CANCEL_GRACE_S, and one that does not is killed then, as past its time limit.
"""

import asyncio
import dataclasses
import multiprocessing
import os
import signal
import traceback
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any

from pyqueue.app import Kill, Retry
from pyqueue.client.job import Job
from pyqueue.context import _CURRENT, CurrentJob
from pyqueue.worker.execute import RemoteError, arguments
from pyqueue.worker.loading import load_app

CANCEL_GRACE_S = 2.0  # a cancelled handler that does not return by then is killed


def _child(target: str, conn: Connection) -> None:
    """A child's life: run each job the parent sends, answer with what became of it."""
    app: Any = load_app(target)
    running: list[CurrentJob] = []

    def cancelled(signum: int, frame: FrameType | None) -> None:
        for current in running:
            current.cancelled = True

    signal.signal(signal.SIGUSR1, cancelled)
    while True:
        try:
            name, payload, job = conn.recv()
        except EOFError:
            return
        function = app.resolve(name)
        args, kwargs = arguments(payload)
        current = CurrentJob(job)
        running[:] = [current]
        token = _CURRENT.set(current)
        try:
            if function.is_async:
                asyncio.run(function.fn(*args, **kwargs))
            else:
                function.fn(*args, **kwargs)
        except Retry as retry:
            conn.send(("retry", str(retry), retry.delay, retry.run_at))
        except Kill as kill:
            conn.send(("kill", str(kill)))
        except Exception as exc:
            conn.send(("error", str(exc) or repr(exc), type(exc).__qualname__, traceback.format_exc()))
        else:
            conn.send(("ok",))
        finally:
            _CURRENT.reset(token)
            running.clear()


class _Child:
    def __init__(self, target: str) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child_end = context.Pipe()
        self.process: BaseProcess = context.Process(
            target=_child, args=(target, child_end), name="pyqueue-job", daemon=True
        )
        self.process.start()
        child_end.close()

    def kill(self) -> None:
        self.process.kill()
        self.process.join()
        self.conn.close()


class ProcessPool:
    def __init__(self, target: str, size: int) -> None:
        self.target = target
        self.size = size
        self.killed = 0
        self._free: asyncio.Queue[_Child] = asyncio.Queue()

    def start(self) -> None:
        for _ in range(self.size):
            self._free.put_nowait(_Child(self.target))

    def stop(self) -> None:
        while not self._free.empty():
            self._free.get_nowait().kill()

    async def call(self, name: str, payload: Any, job: Job | None = None) -> None:
        """Run one job in a free child. Cancelled (its time limit, the worker stopping), the child
        is killed and replaced; cancelled by request (`job` is cancelled), it has a grace first."""
        child = await self._free.get()
        view = dataclasses.replace(job, _client=None, _stream=None) if job is not None else None
        try:
            child.conn.send((name, payload, view))
            reply = await _receive(child.conn)
        except asyncio.CancelledError:
            current = _CURRENT.get()
            if current is not None and current.cancelled and await self._told_to_stop(child):
                self._free.put_nowait(child)
                raise
            self._replace(child)
            raise
        except (EOFError, OSError):
            code = child.process.exitcode
            self._replace(child)
            raise RemoteError(f"the job's process died (exit code {code})", "ProcessDied", "") from None
        self._free.put_nowait(child)
        _raise(reply)

    async def _told_to_stop(self, child: _Child) -> bool:
        """Tell the child its job is cancelled; True if it returned within the grace."""
        assert child.process.pid is not None
        os.kill(child.process.pid, signal.SIGUSR1)
        try:
            await asyncio.wait_for(_receive(child.conn), CANCEL_GRACE_S)
        except (TimeoutError, EOFError, OSError):
            return False
        return True

    def _replace(self, child: _Child) -> None:
        child.kill()
        self.killed += 1
        self._free.put_nowait(_Child(self.target))


async def _receive(conn: Connection) -> Any:
    loop = asyncio.get_running_loop()
    readable = loop.create_future()
    fd = conn.fileno()

    def wake() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await readable
    finally:
        loop.remove_reader(fd)
    return conn.recv()


def _raise(reply: tuple[Any, ...]) -> None:
    kind = reply[0]
    if kind == "retry":
        raise Retry(reply[2], run_at=reply[3], reason=reply[1])
    if kind == "kill":
        raise Kill(reply[1])
    if kind == "error":
        raise RemoteError(reply[1], reply[2], reply[3])


def pool_runner(pool: ProcessPool, name: str) -> Callable[[Any], Awaitable[Any]]:
    """Run job function `name` in one of the pool's children, as its own task, so that a cancel
    (CurrentJob.cancel) reaches it and nothing else."""

    async def run(payload: Any) -> Any:
        current = _CURRENT.get()
        task = asyncio.ensure_future(pool.call(name, payload, current.job if current else None))
        if current is not None:
            current._task = task
        return await task

    return run

"""`pyqueue worker --pool process`: each job runs in a child process, so a job past its time limit
can really be stopped (the child is killed and replaced), like Celery's hard time limit.

Children are started with the spawn method (nothing crosses a fork) and import the app themselves
from its MODULE:APP name. One job at a time per child; the parent waits on the child's pipe from
the event loop, without a thread per job.
"""

import asyncio
import multiprocessing
import traceback
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from pyqueue.app import Kill, Retry
from pyqueue.worker.execute import RemoteError, arguments
from pyqueue.worker.loading import load_app


def _child(target: str, conn: Connection) -> None:
    """A child's life: run each job the parent sends, answer with what became of it."""
    app: Any = load_app(target)
    while True:
        try:
            name, payload = conn.recv()
        except EOFError:
            return
        function = app.resolve(name)
        args, kwargs = arguments(payload)
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

    async def call(self, name: str, payload: Any) -> None:
        """Run one job in a free child. Cancelled (its time limit), the child is killed and replaced."""
        child = await self._free.get()
        try:
            child.conn.send((name, payload))
            reply = await _receive(child.conn)
        except asyncio.CancelledError:
            self._replace(child)
            raise
        except (EOFError, OSError):
            code = child.process.exitcode
            self._replace(child)
            raise RemoteError(f"the job's process died (exit code {code})", "ProcessDied", "") from None
        self._free.put_nowait(child)
        _raise(reply)

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

"""`Worker`: one Take stream per process; sync handlers in a thread pool, async ones on the loop.

- at most `concurrency` handlers run at once; the stream's prefetch is 4x that, so the next jobs are
  already here while earlier acks wait for their fsync (as Celery's prefetch multiplier);
- an exception fails the job with its type, message and traceback; `Retry` and `Kill` do what they
  say; a job with a timeout has its lease extended while it runs;
- the stream is reopened with backoff when the server goes away (and the worker says so);
- SIGTERM/SIGINT: stop taking, let running jobs finish within the grace period and ack them, exit
  0; a second signal exits at once (the server returns unfinished jobs to the queue).
"""

import asyncio
import contextlib
import logging
import os
import signal
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pyqueue.app import App, Kill, Retry
from pyqueue.client import AsyncClient, AsyncTakeStream, Job
from pyqueue.errors import PyQueueError

log = logging.getLogger("pyqueue.worker")


@dataclass(frozen=True)
class WorkerConfig:
    queues: tuple[str, ...] = ()  # default: every queue the app's job functions use
    concurrency: int = 10
    prefetch_multiplier: int = 4
    grace_s: float = 30.0
    reconnect_max_s: float = 10.0


class Worker:
    def __init__(self, app: App, config: WorkerConfig = WorkerConfig()) -> None:
        self.app = app
        self.config = config
        self.queues = list(config.queues or app.queues or ["default"])
        self.stopping = asyncio.Event()
        self.ran = 0
        self.failed = 0
        self._signals = 0
        self._slots = asyncio.Semaphore(config.concurrency)

    def _on_signal(self) -> None:
        self._signals += 1
        if self._signals == 1:
            log.info(
                "stopping: finishing running jobs (up to %.0fs); signal again to exit at once",
                self.config.grace_s,
            )
            self.stopping.set()
        else:
            log.warning("exiting at once; the server returns unfinished jobs to the queue")
            logging.shutdown()
            os._exit(1)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal)
        self.app.executor = ThreadPoolExecutor(self.config.concurrency, thread_name_prefix="pyqueue-job")
        log.info(
            "worker serving %s with concurrency %d on %s",
            ",".join(self.queues),
            self.config.concurrency,
            self.app.address,
        )
        delay = 0.1
        while not self.stopping.is_set():
            try:
                async with (
                    AsyncClient(self.app.address) as client,
                    client.take(
                        self.queues, prefetch=self.config.concurrency * self.config.prefetch_multiplier
                    ) as stream,
                ):
                    await self._consume(stream)
                delay = 0.1
            except PyQueueError as exc:
                if self.stopping.is_set():
                    break
                log.warning("lost the server (%s: %s); reconnecting in %.1fs", exc.code.name, exc, delay)
                await _sleep_unless(self.stopping, delay)
                delay = min(delay * 2, self.config.reconnect_max_s)
        self.app.executor.shutdown(wait=False, cancel_futures=True)
        log.info("worker stopped: %d jobs ran, %d failed", self.ran, self.failed)
        return 0

    async def _consume(self, stream: AsyncTakeStream) -> None:
        running: set[asyncio.Task[None]] = set()
        stop = asyncio.ensure_future(self.stopping.wait())
        try:
            while not self.stopping.is_set():
                taking = asyncio.ensure_future(stream.next())
                await asyncio.wait({taking, stop}, return_when=asyncio.FIRST_COMPLETED)
                if not taking.done():
                    taking.cancel()
                    break
                job = taking.result()
                if job is None:
                    raise PyQueueError("the take stream ended")
                task = asyncio.ensure_future(self._run(stream, job))
                running.add(task)
                task.add_done_callback(running.discard)
        finally:
            stop.cancel()
            if running:
                _, late = await asyncio.wait(running, timeout=self.config.grace_s)
                for task in late:
                    task.cancel()
                if late:
                    log.warning(
                        "%d jobs did not finish within the grace period; the server requeues them", len(late)
                    )

    async def _run(self, stream: AsyncTakeStream, job: Job) -> None:
        function = self.app.resolve(job.type)
        started = time.perf_counter()
        keeper = asyncio.ensure_future(_keep_lease(stream, job)) if job.timeout_ms else None
        try:
            if function is None:
                raise LookupError(f"no job function named {job.type!r} in this worker's app")
            async with self._slots:  # bounds running handlers; acks below wait outside it
                await function.run(job.payload)
        except Retry as retry:
            at = retry.run_at.timestamp() if retry.run_at else time.time() + (retry.delay or 0)
            await self._settle(
                stream.fail(job.id, str(retry), error_type="Retry", retry_at_ms=int(at * 1000)), job
            )
        except Kill as kill:
            self.failed += 1
            await self._settle(stream.fail(job.id, str(kill), kill=True, error_type="Kill"), job)
        except Exception as exc:
            self.failed += 1
            log.debug("job %d (%s) failed: %r", job.id, job.type, exc)
            await self._settle(
                stream.fail(
                    job.id,
                    str(exc) or repr(exc),
                    error_type=type(exc).__qualname__,
                    backtrace=traceback.format_exc(),
                ),
                job,
            )
        else:
            self.ran += 1
            log.debug("job %d (%s) done in %.1f ms", job.id, job.type, (time.perf_counter() - started) * 1000)
            await self._settle(stream.ack(job.id), job)
        finally:
            if keeper is not None:
                keeper.cancel()

    async def _settle(
        self, answer: "asyncio.Future[object] | asyncio.Future[None] | asyncio.Future[str]", job: Job
    ) -> None:
        try:
            await answer
        except PyQueueError as exc:
            log.warning("job %d (%s): the server refused the outcome: %s", job.id, job.type, exc)


async def _keep_lease(stream: AsyncTakeStream, job: Job) -> None:
    """Extend the lease at half the timeout for as long as the job runs."""
    while True:
        await asyncio.sleep(job.timeout_ms / 2000)
        stream.extend([job.id])


async def _sleep_unless(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)


def run_worker(app: App, config: WorkerConfig) -> int:
    worker = Worker(app, config)
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return asyncio.run(worker.run())
    return uvloop.run(worker.run())

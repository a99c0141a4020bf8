"""`Worker`: one Take stream per process; sync handlers in threads (or child processes), async
ones on the loop.

- a job is taken from the stream only when a slot is free, and taking it starts it (the server is
  told): the stream's prefetch (4x concurrency) waits here unstarted, and is handed back without
  an attempt when the worker stops;
- the concurrency defaults by what a slot costs: 10 where a slot may be a thread (or a child
  process), 50 when every job function is `async def` and a slot is a coroutine;
- each attempt runs under the job's time limit (see execute.py): past it an async handler is
  cancelled, a sync thread abandoned, a child process killed, and the attempt fails;
- an exception fails the job with its type, message and traceback, logged at WARNING; `Retry` and
  `Kill` do what they say;
- a job whose type this app does not know is handed back (no attempt) with a delay, so that a
  worker that knows it can take it, and the worker logs it once per type;
- the stream is reopened with backoff when the server goes away (and the worker says so);
- SIGTERM/SIGINT: stop taking, let running jobs finish within the grace period and answer them,
  then close the stream cleanly: jobs still running are handed back as interrupted (never lost),
  jobs not started without an attempt. A second signal exits at once.
"""

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyqueue import observers
from pyqueue.app import App, JobFunction
from pyqueue.client import AsyncClient, AsyncTakeStream, Job
from pyqueue.context import CurrentJob
from pyqueue.errors import PyQueueError, Unavailable
from pyqueue.worker.execute import AttemptOutcome, execute, thread_runner
from pyqueue.worker.pool import ProcessPool, pool_runner
from pyqueue.worker.threads import HandlerThreads

log = logging.getLogger("pyqueue.worker")

# Threads abandoned past their time limit keep running; the pool may grow by this many beyond the
# concurrency so that a freed slot always finds a thread.
_SPARE_THREADS = 1000

# A sync slot is a thread, and under Django or SQLAlchemy a database connection each. An async slot
# is a coroutine: an app of `async def` handlers waiting on I/O is held back by a small cap, and
# short jobs pay the server round trip per handful of jobs (bench/README.md, worker table).
SYNC_CONCURRENCY = 10
ASYNC_CONCURRENCY = 50


def default_concurrency(app: App, pool: str = "thread") -> int:
    """The worker's concurrency when none is given: ASYNC_CONCURRENCY when every job function of
    the app is `async def` and runs on the event loop, SYNC_CONCURRENCY otherwise."""
    functions = app.jobs.values()
    if pool == "thread" and functions and all(f.is_async for f in functions):
        return ASYNC_CONCURRENCY
    return SYNC_CONCURRENCY


@dataclass(frozen=True)
class WorkerConfig:
    queues: tuple[str, ...] = ()  # default: every queue the app's job functions use
    concurrency: int | None = None  # None (or 0): default_concurrency(app, pool)
    prefetch_multiplier: int = 4
    grace_s: float = 30.0
    reconnect_max_s: float = 10.0
    pool: str = "thread"  # or "process": each job in a child process, killed past its limit
    target: str = ""  # MODULE:APP, for the process pool's children
    unknown_delay_s: float = 30.0  # a job of a type this app lacks comes back after this
    log_jobs: bool = False  # one INFO line per finished job
    summary_s: float = 60.0  # one INFO summary line this often (0: never)


class Worker:
    def __init__(self, app: App, config: WorkerConfig = WorkerConfig()) -> None:
        self.app = app
        self.config = config
        self.queues = list(config.queues or app.queues or ["default"])
        self.stopping = asyncio.Event()
        self.counts: Counter[str] = Counter()
        self._running: dict[int, CurrentJob] = {}  # job id -> what current_job() shows its handler
        self._cancelled: set[int] = set()  # cancelled while prefetched or running, not yet answered
        self._signals = 0
        self.concurrency = config.concurrency or default_concurrency(app, config.pool)
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        self._slots = asyncio.Semaphore(self.concurrency)
        self._unknown_logged: set[str] = set()
        self._pool: ProcessPool | None = None

    @property
    def ran(self) -> int:
        return self.counts["ok"]

    @property
    def failed(self) -> int:
        return sum(n for kind, n in self.counts.items() if kind in ("error", "kill", "timeout"))

    def _on_signal(self) -> None:
        self._signals += 1
        if self._signals == 1:
            log.info(
                "stopping: finishing running jobs (up to %.0fs); signal again to exit at once",
                self.config.grace_s,
            )
            self.stopping.set()
        else:
            log.warning("exiting at once; the server hands back unfinished jobs")
            logging.shutdown()
            os._exit(1)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal)
        self.app.executor = HandlerThreads(self.concurrency + _SPARE_THREADS)
        if self.config.pool == "process":
            self._pool = ProcessPool(self.config.target, self.concurrency)
            self._pool.start()
        log.info(
            "worker serving %s with concurrency %d (%s pool) on %s",
            ",".join(self.queues),
            self.concurrency,
            self.config.pool,
            self.app.address,
        )
        if (self.app.periodic_jobs or self.app.queue_limits) and not await self._declare():
            return 2
        summary = loop.create_task(self._summaries()) if self.config.summary_s > 0 else None
        try:
            await self._serve()
        finally:
            if summary is not None:
                summary.cancel()
            if self._pool is not None:
                self._pool.stop()
            self.app.executor.shutdown(wait=False, cancel_futures=True)
        log.info("worker stopped: %s", self._summary())
        return 0

    async def _declare(self) -> bool:
        """Send the app's periodic jobs and queue limits to the server (waiting for it); False if
        it refuses them."""
        delay = 0.1
        while not self.stopping.is_set():
            try:
                async with AsyncClient(self.app.address) as client:
                    if self.app.periodic_jobs:
                        declared = await client.set_cron(self.app.periodic_jobs.values())
                        log.info(
                            "declared %d periodic jobs: %s",
                            len(declared),
                            ", ".join(e.name for e in declared),
                        )
                    for queue, options in self.app.queue_limits.items():
                        info = await client.set_queue_limit(queue, **options)
                        log.info("declared the limits of %s: %s", queue, info.limits or "none")
                return True
            except Unavailable as exc:
                log.warning(
                    "cannot reach the server to declare periodic jobs (%s); again in %.1fs", exc, delay
                )
                await _sleep_unless(self.stopping, delay)
                delay = min(delay * 2, self.config.reconnect_max_s)
            except PyQueueError as exc:
                log.critical(
                    "the server refused the app's periodic jobs or limits: %s: %s", exc.code.name, exc
                )
                return False
            except ValueError as exc:  # a rate that does not parse
                log.critical("the app's queue limits are wrong: %s", exc)
                return False
        return True

    async def _serve(self) -> None:
        delay = 0.1
        lost_at: float | None = None  # when the server was lost, until a stream is up again
        while not self.stopping.is_set():
            up: asyncio.Future[None] | None = None
            try:
                async with (
                    AsyncClient(self.app.address) as client,
                    client.take(
                        self.queues, prefetch=self.concurrency * self.config.prefetch_multiplier
                    ) as stream,
                ):
                    up = asyncio.ensure_future(stream.connected())
                    if lost_at is not None:
                        up.add_done_callback(_say_back(lost_at))
                    await self._consume(stream)
                delay, lost_at = 0.1, None
            except PyQueueError as exc:
                if self.stopping.is_set():
                    break
                # A stream that was up starts the backoff over: the server's next restart is
                # not waited out at the longest delay the last outage reached.
                if up is not None and up.done() and not up.cancelled():
                    delay, lost_at = 0.1, None
                lost_at = lost_at if lost_at is not None else time.monotonic()
                log.warning("lost the server (%s: %s); reconnecting in %.1fs", exc.code.name, exc, delay)
                await _sleep_unless(self.stopping, delay)
                delay = min(delay * 2, self.config.reconnect_max_s)
            finally:
                if up is not None:
                    up.cancel()

    def _on_cancel(self, job_ids: list[int]) -> None:
        """The server cancelled jobs held here: stop those running (an async handler is
        cancelled; a sync one sees current_job().cancelled); those not started will not run."""
        for job_id in job_ids:
            self._cancelled.add(job_id)
            current = self._running.get(job_id)
            if current is not None:
                current.cancel()

    async def _consume(self, stream: AsyncTakeStream) -> None:
        stream.on_cancel(self._on_cancel)
        running: set[asyncio.Task[None]] = set()
        stop = asyncio.ensure_future(self.stopping.wait())
        try:
            while not self.stopping.is_set():
                # Slots first, then as many jobs as there are free slots: taking a job starts it
                # (and their starts go out together, confirmed on the wire before they run).
                if not await _first(self._slots.acquire(), stop, on_lost=self._slots.release):
                    break
                slots = 1
                while not self._slots.locked():
                    await self._slots.acquire()
                    slots += 1
                jobs: Any = []  # list[Job], or False on stop; if the stream dies here, its slots come back
                try:
                    jobs = await _first(stream.next_batch(slots, confirm_start=True), stop)
                finally:
                    for _ in range(slots - (len(jobs) if jobs else 0)):
                        self._slots.release()
                if jobs is False:
                    break
                if not jobs:
                    raise PyQueueError("the take stream ended")
                for job in jobs:
                    task = asyncio.ensure_future(self._run(stream, job))
                    running.add(task)
                    task.add_done_callback(running.discard)
        finally:
            stop.cancel()
            await self._finish(running)

    async def _finish(self, running: set["asyncio.Task[None]"]) -> None:
        if not running:
            return
        _, late = await asyncio.wait(running, timeout=self.config.grace_s)
        for task in late:
            task.cancel()
        if late:
            await asyncio.gather(*late, return_exceptions=True)
            log.warning(
                "%d jobs did not finish within the %.0fs grace period; they go back to the queue "
                "as interrupted",
                len(late),
                self.config.grace_s,
            )

    async def _run(self, stream: AsyncTakeStream, job: Job) -> None:
        function = self.app.resolve(job.type)
        if function is None:
            self._slots.release()
            self._hand_back_unknown(stream, job)
            return
        with observers.watching(job) as watch:  # an integration's (Sentry's) view of the run
            outcome, status = await self._attempt(stream, job, function)
            watch.finished(outcome, status)

    async def _attempt(
        self, stream: AsyncTakeStream, job: Job, function: JobFunction[Any, Any]
    ) -> tuple[AttemptOutcome, str | None]:
        """Run the job and answer it; the outcome, and the job's status after the server's answer."""
        started = time.perf_counter()
        current = self._running[job.id] = CurrentJob(job, cancelled=job.id in self._cancelled)
        try:
            if current.cancelled:  # cancelled before it started: it does not run
                outcome = AttemptOutcome("cancelled", "cancelled by request", "Cancelled")
            elif job.payload_error:  # the attempt is charged: the job goes dead by its retries
                outcome = AttemptOutcome("error", job.payload_error, "PayloadDecodeError")
            else:
                outcome = await execute(self._runner(function), job, current)
        finally:
            self._slots.release()  # the slot is free once the handler is; the answer waits outside it
            self._running.pop(job.id, None)
            self._cancelled.discard(job.id)
        self.counts[outcome.kind] += 1
        self._log(job, function, outcome, (time.perf_counter() - started) * 1000)
        answer: asyncio.Future[Any]
        try:
            if outcome.kind == "ok":
                answer = stream.ack(job, outcome.result)
            else:
                answer = stream.fail(
                    job,
                    outcome.message,
                    kill=outcome.kind == "kill",
                    error_type=outcome.error_type,
                    backtrace=outcome.backtrace,
                    retry_at_ms=outcome.retry_at_ms,
                )
        except PyQueueError as exc:
            # The stream ended while the job ran: the server already took the attempt back
            # (interrupted or lost), and the job runs again from the next stream.
            log.warning(
                "job %d (%s) finished, but its stream is gone (%s); it will run again", job.id, job.type, exc
            )
            return outcome, None
        return outcome, await self._settle(answer, job)

    def _runner(self, function: JobFunction[Any, Any]) -> Any:
        if self._pool is not None:
            return pool_runner(self._pool, function.name)
        return thread_runner(function, self.app.executor)

    def _hand_back_unknown(self, stream: AsyncTakeStream, job: Job) -> None:
        self.counts["unknown"] += 1
        if job.type not in self._unknown_logged:
            self._unknown_logged.add(job.type)
            log.error(
                "no job function named %r in this worker's app (it has: %s); handing such jobs back "
                "without an attempt, for a worker that knows them (they come back after %.0fs; the "
                "server makes them dead after --max-unknown-handbacks hand-backs)",
                job.type,
                ", ".join(sorted(self.app.jobs)) or "none",
                self.config.unknown_delay_s,
            )
        stream.release(job, int(self.config.unknown_delay_s * 1000), unknown_type=True)

    def _log(self, job: Job, function: JobFunction[Any, Any], outcome: AttemptOutcome, ms: float) -> None:
        if outcome.kind == "ok" and not self.config.log_jobs:
            return  # the common case: nothing to say
        what = f"job {job.id} ({job.type}) attempt {job.attempts}"
        if outcome.kind == "timeout":
            how = (
                "its process was killed"
                if self._pool is not None
                else "it was cancelled"
                if function.is_async
                else "its thread is abandoned and runs on"
            )
            log.warning("%s %s; %s", what, outcome.message, how)
        elif outcome.kind == "kill":
            log.warning("%s killed by its handler: %s", what, outcome.message)
        elif outcome.kind == "error":
            # The traceback as the handler raised it (in a child process: as text).
            log.warning(
                "%s failed: %s: %s\n%s", what, outcome.error_type, outcome.message, outcome.backtrace.rstrip()
            )
        if self.config.log_jobs:
            log.info("%s %s in %.1f ms", what, "done" if outcome.kind == "ok" else outcome.kind, ms)

    def _summary(self) -> str:
        c = self.counts
        return (
            f"{c['ok']} done, {c['error'] + c['kill']} failed, {c['timeout']} timed out, "
            f"{c['retry']} retried, {c['unknown']} handed back (unknown type)"
        )

    async def _summaries(self) -> None:
        last: Counter[str] = Counter()
        while True:
            await asyncio.sleep(self.config.summary_s)
            if self.counts != last:
                log.info("last %.0fs: %s", self.config.summary_s, _delta_summary(self.counts, last))
                last = Counter(self.counts)

    async def _settle(self, answer: "asyncio.Future[Any]", job: Job) -> str | None:
        """The job's status once the server took the outcome (None: it refused it)."""
        try:
            status = await answer
        except PyQueueError as exc:
            log.warning("job %d (%s): the server refused the outcome: %s", job.id, job.type, exc)
            return None
        return "completed" if status is None else str(status)


def _delta_summary(now: Counter[str], before: Counter[str]) -> str:
    d = Counter(now)
    d.subtract(before)
    return (
        f"{d['ok']} done, {d['error'] + d['kill']} failed, {d['timeout']} timed out, "
        f"{d['retry']} retried, {d['unknown']} handed back (unknown type)"
    )


async def _first(work: Any, stop: "asyncio.Future[Any]", on_lost: Any = None) -> Any:
    """The result of `work`, or False when `stop` came first (work is cancelled; `on_lost` undoes
    a result that arrived anyway)."""
    task = asyncio.ensure_future(work)
    await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
        if on_lost is not None:
            on_lost()  # it completed before the cancel reached it
    return False


def _say_back(lost_at: float) -> "Callable[[asyncio.Future[None]], None]":
    def say(up: "asyncio.Future[None]") -> None:
        if not up.cancelled():
            log.info("connected to the server again after %.1fs", time.monotonic() - lost_at)

    return say


async def _sleep_unless(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)


def run_worker(app: App, config: WorkerConfig) -> int:
    worker = Worker(app, config)
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        code = asyncio.run(worker.run())
    else:
        code = uvloop.run(worker.run())
    # The pool was shut down: idle threads leave at once, handlers still running do not.
    deadline = time.monotonic() + 1.0
    for thread in threading.enumerate():
        if thread.name.startswith("pyqueue-job"):
            thread.join(max(deadline - time.monotonic(), 0))
    abandoned = [t for t in threading.enumerate() if t.name.startswith("pyqueue-job") and t.is_alive()]
    if abandoned:
        # Handlers past their limit or the grace period: the interpreter would wait for them at exit.
        log.warning("exiting with %d job threads still running (abandoned)", len(abandoned))
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code

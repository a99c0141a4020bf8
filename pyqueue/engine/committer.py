"""The single writer, with timer-free coalescing and group commit.

Every write goes through here. The writer thread takes the first waiting request plus whatever
queued meanwhile (pyqueue._native.Coalescer), applies them all to one BatchView and writes one
WriteBatch with sync=False. Requests that must be durable before they are answered (enqueue, ack,
fail) then wait in a second coalescer for the syncer thread, which covers every batch waiting
there with one `flush_wal(True)`: while it syncs, the writer keeps writing the next batches, and
those are covered by the next sync. A lone request is written and synced at once; under load the
groups grow by themselves.

Inline commit: while the writer is idle (nothing queued, nothing being written), requests
submitted on the event loop are gathered until the end of the loop's turn, then applied and
written right there as one batch, and answered with `call_soon`. A request then costs no hop to
the writer thread and back, which was most of what one enqueue cost the server beyond gRPC itself
(bench/README.md); gathering to the end of the turn keeps what arrived together in one batch, as
the writer would. Nothing is overtaken: the inbox counts what was pushed and not yet written,
gathered requests go to the inbox in order when the writer turns out busy, and the writer lock
keeps the writer out meanwhile. The RocksDB write holds the GIL wherever it runs, so the loop
loses no time it would have had. The sync stays on the syncer thread: an fsync never blocks the
loop.

Fail-stop: if a sync fails, nothing waiting on it is ever answered and `on_fatal` is called
(the server exits). A sync is never retried: after a failed fsync the kernel may have dropped the
dirty pages, so a retry could "succeed" over lost data.
"""

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from pyqueue import failpoints
from pyqueue._native import Coalescer
from pyqueue.engine.counts import Counts
from pyqueue.engine.errors import EngineError, Internal, Unavailable
from pyqueue.engine.flows.context import Flows
from pyqueue.engine.model import Clock
from pyqueue.engine.telemetry import Telemetry
from pyqueue.engine.view import BatchView, InFlightCache, JobWriteError
from pyqueue.store.contract import Store, StoreFullError

log = logging.getLogger("pyqueue.committer")

Post = Callable[[Callable[[], None]], object]
"""Runs a completion where callers wait (the server passes loop.call_soon_threadsafe)."""


class CommitRequest(Protocol):
    needs_sync: bool
    error: BaseException | None

    def reset(self) -> None:
        """Forget what an abandoned apply gathered."""

    def isolate_job(self, message: str, job_id: int | None = None) -> bool:
        """Set aside the one job to blame for a failed apply (`job_id`, when the failure named
        it; else the one being handled); False if there is none."""

    def apply(self, view: BatchView) -> None:
        """Read, check, then write into the view. Raise an EngineError before writing to refuse."""

    def complete(self) -> None:
        """Runs after the commit (and the sync, where needed): memory effects, then the answer."""


class Committer:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        durable: bool,
        post: Post,
        on_fatal: Callable[[BaseException], None],
        max_batch: int = 4096,
        counts: Counts | None = None,
        telemetry: Telemetry | None = None,
        on_left_flight: Callable[[dict[str, int], dict[str, list[int]]], None] | None = None,
        post_here: Post | None = None,
        flows: Flows | None = None,
    ) -> None:
        """`post_here` (the loop's call_soon) turns inline commits on: `submit` called on the
        thread that calls `start` then commits itself while the writer is idle."""
        self._store = store
        self._clock = clock
        self._durable = durable
        self._post = post
        self._post_here = post_here
        self._here: int | None = None  # the thread that may commit inline (the loop's)
        self._writing = threading.Lock()  # held by whoever applies and writes a batch
        self._gathered: list[CommitRequest] = []  # submitted on the loop this turn, to commit inline
        self._broken = False
        self._on_fatal = on_fatal
        self._max_batch = max_batch
        self._inbox = Coalescer()
        self._syncing = Coalescer()
        self._threads: list[threading.Thread] = []
        self._cache = InFlightCache(counts)  # touched only by the writer thread
        self._telemetry = telemetry or Telemetry()
        self._on_left_flight = on_left_flight
        self.flows = flows
        self.commits = 0
        self.syncs = 0

    def start(self) -> None:
        if self._post_here is not None:
            self._here = threading.get_ident()
        self._threads = [
            threading.Thread(target=self._write_loop, name="pyqueue-writer", daemon=True),
            threading.Thread(target=self._sync_loop, name="pyqueue-syncer", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, request: CommitRequest) -> None:
        if self._here == threading.get_ident() and not self._broken:
            if self._gathered:
                self._gathered.append(request)
                return
            if not self._inbox.unfinished and not self._inbox.closed:
                assert self._post_here is not None
                self._gathered.append(request)
                self._post_here(self._commit_gathered)
                return
        self._push(request)

    def _push(self, request: CommitRequest) -> None:
        try:
            self._inbox.push(request)
        except Exception as exc:
            raise Unavailable("the server is shutting down") from exc

    def hand_over(self) -> None:
        """Send what the loop gathered to the writer (before a stop, which only the writer sees)."""
        requests, self._gathered = self._gathered, []
        for request in requests:
            try:
                self._push(request)
            except Unavailable as exc:  # stopped meanwhile: it was never applied
                request.error = exc
                _complete_all([request])

    def _commit_gathered(self) -> None:
        """At the end of the loop's turn: commit what was gathered here, unless the writer got
        work meanwhile (from another thread; then it goes to the writer, in order) or the server
        is stopping (then it is refused as the writer would refuse it: the syncer may be gone)."""
        if not self._writing.acquire(blocking=False):
            self.hand_over()
            return
        try:
            if self._inbox.unfinished or self._broken or self._inbox.closed:
                self.hand_over()
                return
            assert self._post_here is not None
            while self._gathered:
                requests = self._gathered[: self._max_batch]
                del self._gathered[: self._max_batch]
                self.commit(requests, self._post_here)
        except BaseException as exc:  # as in the writer: answer nothing more, stop
            self._broken = True
            log.critical("the writer failed: %s", exc, exc_info=exc)
            self._on_fatal(exc)
        finally:
            self._writing.release()

    def stop(self) -> None:
        """Finish every request already submitted, then stop both threads."""
        self._inbox.close()
        if self._threads:
            self._threads[0].join()
            with self._writing:  # an inline commit already under way still hands its syncs on
                self._syncing.close()
            self._threads[1].join()

    def _write_loop(self) -> None:
        while True:
            requests = self._inbox.take_batch(self._max_batch)
            if not requests:
                if self._inbox.closed:
                    return
                continue
            if self._broken:  # an inline commit failed: answer nothing more, as below
                return
            try:
                with self._writing:
                    try:
                        self.commit(requests, self._post)
                    finally:
                        self._inbox.finish(len(requests))
            except BaseException as exc:  # a broken writer must not leave callers hanging
                self._broken = True
                log.critical("the writer failed: %s", exc, exc_info=exc)
                self._on_fatal(exc)
                return

    def commit(self, requests: list[CommitRequest], post: Post) -> None:
        """Apply, write, then hand each request on to be answered (by `post` at once, or by the
        syncer after a sync)."""
        while True:
            view = BatchView(self._store, self._clock(), self._cache, self.flows)
            again = self._apply(view, requests, post)
            if again is None:
                break
            requests = again
            if not requests:
                return
        if len(view.batch):
            try:
                self._store.write(view.batch)
            except StoreFullError as exc:
                # RocksDB stays failed after a failed log append: stop, answering nothing more; a
                # restart recovers once there is room (the DiskGuard keeps us from getting here).
                log.critical("the disk is full; stopping without acknowledging anything more: %s", exc)
                self._on_fatal(exc)
                raise
            view.publish()
            self._telemetry.publish(view.events, view.waits, view.jobs_changed)
            if view.left_flight and self._on_left_flight is not None:
                self._on_left_flight(view.left_flight, view.left_flight_keyed)
        self.commits += 1
        waiting = [r for r in requests if r.needs_sync and r.error is None] if self._durable else []
        now = [r for r in requests if not (r.needs_sync and r.error is None)] if waiting else requests
        if now:
            post(functools.partial(_complete_all, now))
        if waiting:
            self._syncing.push(waiting)

    def _apply(
        self, view: BatchView, requests: list[CommitRequest], post: Post
    ) -> list[CommitRequest] | None:
        """Apply every request to the view; None once all are in it.

        An unexpected failure (a bug, a damaged block read) drops the view unwritten and forgets
        the writer's cache (the request may have changed cached records). If one job is to blame,
        its request sets it aside (it will be dead, with the error) and the batch is applied again
        whole; otherwise that one request fails and the batch is applied again without it. The
        caller loops, so many bad jobs in one batch cannot exhaust the stack."""
        for request in requests:
            try:
                try:
                    request.apply(view)
                except EngineError as exc:
                    request.error = exc
                view.flush()  # the request's job writes, in one native call
            except Exception as exc:
                self._cache.clear()
                text = f"the server failed while handling it ({type(exc).__name__}: {exc})"
                isolated = request.isolate_job(
                    text, exc.stored_id if isinstance(exc, JobWriteError) else None
                )
                for other in requests:
                    other.reset()
                if isolated:
                    log.exception(
                        "a job failed inside the writer (in a %s); it is dead with the error",
                        type(request).__name__,
                    )
                    return requests
                log.exception("a %s failed inside the writer; it alone is refused", type(request).__name__)
                request.error = Internal(f"the server failed at this request ({type(exc).__name__}: {exc})")
                post(functools.partial(_complete_all, [request]))
                return [r for r in requests if r is not request]
        return None

    def _sync_loop(self) -> None:
        while True:
            groups = self._syncing.take_batch(1 << 20)
            if not groups:
                if self._syncing.closed:
                    return
                continue
            try:
                failpoints.fail("sync_error")
                started = time.perf_counter()
                self._store.sync()
                self._telemetry.fsync_seconds.observe(time.perf_counter() - started)
            except BaseException as exc:
                log.critical("fsync failed; stopping without acknowledging anything more: %s", exc)
                self._on_fatal(exc)
                return
            self.syncs += 1
            requests = [r for group in groups for r in group]
            self._post(functools.partial(_complete_all, requests))


def _complete_all(requests: list[CommitRequest]) -> None:
    for request in requests:
        try:
            request.complete()
        except Exception:  # one request's bug must not leave the others unanswered
            log.exception("completing %s failed", type(request).__name__)

"""`Client`: enqueue jobs, look them up, and take them as a worker."""

import json
import os
import queue
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar, Unpack

import grpc

from pyqueue import defaults, tracing
from pyqueue.client import calls, codec, native_wire
from pyqueue.client.answers import JobError
from pyqueue.client.batching import Batcher
from pyqueue.client.enqueue_stream import StreamedEnqueues
from pyqueue.client.failover import FAILOVER_S, Failover
from pyqueue.client.history import History
from pyqueue.client.job import Job
from pyqueue.client.native_wire import NativeEnqueues
from pyqueue.client.routing import Routes, unimplemented
from pyqueue.client.security import Security
from pyqueue.client.spec import JobOptions, new_job_message
from pyqueue.client.steering import (
    ChangeResult,
    CronInfo,
    FairKeys,
    QueueInfo,
    WorkerInfo,
)
from pyqueue.client.take import JoinedTakeStream, MultiTakeStream, TakeStream
from pyqueue.client.workflows import BatchInfo, StepLike, WorkflowRun
from pyqueue.cluster import Topology
from pyqueue.errors import (
    FailedPrecondition,
    Unavailable,
    from_rpc_error,
)
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc

DEFAULT_ADDRESS = defaults.ADDRESS
DEFAULT_PRIORITY = defaults.PRIORITY
T = TypeVar("T")


def default_address() -> str:
    return os.environ.get("PYQUEUE_ADDRESS") or DEFAULT_ADDRESS


# A shard that is gone (UNAVAILABLE) or a queue that moved (FAILED_PRECONDITION from a shard).
MOVED_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION)

# Reads change nothing, so gRPC itself sends one again when it fails UNAVAILABLE: a channel that
# sat idle while the server restarted (single enqueues go over the native transport, so the
# grpcio channel may be idle for long) notices the dead connection only on its next call.
_READS = "GetJob ListErrors ListJobs CountJobs ListQueues ListWorkers Metrics History ListCron GetTopology GetBatch ListBatches"
_SERVICE_CONFIG = {
    "methodConfig": [
        {
            "name": [{"service": "pyqueue.v1.Queue", "method": m} for m in _READS.split()],
            "retryPolicy": {
                "maxAttempts": 4,
                "initialBackoff": "0.1s",
                "maxBackoff": "1s",
                "backoffMultiplier": 2,
                "retryableStatusCodes": ["UNAVAILABLE"],
            },
        }
    ]
}

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 << 20),
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.enable_retries", 1),
    ("grpc.service_config", json.dumps(_SERVICE_CONFIG)),
]


def jobs_from(
    messages: list[pb.NewJob], results: list[pb.Enqueued], client: "Client | None" = None
) -> list[Job]:
    now_ms = time.time() * 1000
    return [
        Job(
            id=e.id,
            type=m.type,
            queue=m.queue,
            priority=m.priority,
            payload=codec.decode(m.payload, m.content_type),
            content_type=m.content_type,
            status="scheduled" if m.delay_ms > 0 or m.run_at_ms > now_ms else "ready",
            attempts=0,
            created_at=None,
            updated_at=None,
            run_at=None,
            duplicate=e.duplicate,
            wants_result=m.HasField("keep_result_ms"),
            _client=client,
        )
        for e, m in zip(results, messages, strict=True)
    ]


class Client:
    """A connection to a pyqueue server. Use as a context manager, or call close().

    `tls`, `ca`, `cert`, `key` and `token` say how to reach a server that asks for TLS, client
    certificates or a token; each defaults to its environment variable (client/security.py).
    `routing=False` sends every call to `address` (a sharded server's public address forwards
    each), instead of straight to the shard that owns it."""

    def __init__(
        self,
        address: str | None = None,
        *,
        timeout: float = 30.0,
        batching: bool = True,
        tls: bool | None = None,
        ca: str | Path | None = None,
        cert: str | Path | None = None,
        key: str | Path | None = None,
        token: str | None = None,
        routing: bool = True,
        failover_s: float = FAILOVER_S,
    ) -> None:
        self.address = address or default_address()
        self.timeout = timeout
        self.failover_s = failover_s  # how long an enqueue is sent again through a failover
        self.security = Security.resolve(tls, ca, cert, key, token)
        self._channel = self.security.channel(self.address, CHANNEL_OPTIONS)
        self._stub = pb_grpc.QueueStub(self._channel)
        self._batching = batching
        # Concurrent single enqueues from many threads share calls (see client/batching.py), one
        # batcher per shard so that a combined call never spans shards.
        self._batchers: dict[int, Batcher] = {}
        self._streams: dict[int, StreamedEnqueues | NativeEnqueues] = {}
        self._channels: list[grpc.Channel] = []
        self._routing = routing  # False: every call to `address`, a router that forwards it
        self._routes = Routes(self._stub, self._shard_stub)
        self._lock = threading.Lock()

    def _shard_stub(self, address: str) -> pb_grpc.QueueStub:
        channel = self.security.channel(address, CHANNEL_OPTIONS)
        self._channels.append(channel)
        return pb_grpc.QueueStub(channel)

    def topology(self) -> Topology:
        """The server's shards and the slot map (one shard with an empty address: not sharded),
        asked of the server on first use."""
        topology = self._known_routes.topology
        assert topology is not None
        return topology

    @property
    def _known_routes(self) -> "Routes[pb_grpc.QueueStub]":
        """Where calls go: learnt from the server's topology on first use."""
        with self._lock:
            if self._routes.topology is None and not self._routing:
                self._routes.learn(None)
            if self._routes.topology is None:
                try:
                    self._routes.learn(self._stub.GetTopology(pb.TopologyRequest(), timeout=self.timeout))
                except grpc.RpcError as exc:
                    if not unimplemented(exc):
                        raise from_rpc_error(exc) from None
                    self._routes.learn(None)
            return self._routes

    @property
    def enqueue_calls(self) -> int:
        """Enqueue calls sent on behalf of single enqueues (fewer than the enqueues when batched)."""
        return sum(b.calls for b in self._batchers.values())

    def _batcher(self, shard: int) -> Batcher:
        with self._lock:
            if shard not in self._batchers:
                self._batchers[shard] = Batcher(
                    lambda messages: self._send_to(shard, messages),
                    lambda messages: self._send_streamed(shard, messages),
                )
            return self._batchers[shard]

    def _send_streamed(self, shard: int, messages: list[pb.NewJob]) -> list[pb.Enqueued]:
        """Single enqueues go on a stream kept open per shard (see client/enqueue_stream.py)."""
        routes = self._known_routes
        stub = routes.stub(shard)
        with self._lock:
            stream = self._streams.get(shard)
            if stream is None:
                address = (
                    routes.topology.addresses[shard] if routes.sharded and routes.topology else self.address
                )
                unary = lambda m: self._send_to(shard, m)  # noqa: E731
                stream = self._streams[shard] = (
                    NativeEnqueues(address, self.security.metadata(), unary, self.timeout)
                    if native_wire.usable(address, self.security.tls)
                    else StreamedEnqueues(stub, unary, self.timeout)
                )
        try:
            return stream.send(messages)
        except (Unavailable, FailedPrecondition):
            if self._routes.sharded:
                self._forget_routes()
            raise

    def enqueue(self, type: str, payload: Any = None, **options: Unpack[JobOptions]) -> Job:
        """Enqueue one job; returns once it is committed (fsync'd in the default commit mode).
        `options` are those of JobOptions (pyqueue/client/spec.py): queue, priority, run_at,
        delay, max_retries, timeout, backoff, keep_completed, unique_key, unique_scope,
        unique_in_queue, headers, keep_result, limit_key."""
        spec = {"type": type, "payload": payload, **options}
        message = [new_job_message(spec, tracing.context_headers())]
        failover = Failover(self.failover_s, message)
        while True:
            try:
                shard, _ = self._known_routes.for_queue(message[0].queue)
                results = (
                    self._batcher(shard).submit(message) if self._batching else self._send_to(shard, message)
                )
                return jobs_from(message, results, self)[0]
            except Unavailable as exc:
                delay = failover.next_delay(exc)
                if delay is None:
                    raise
                time.sleep(delay)

    def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[Job]:
        """Enqueue many jobs in one call, all or nothing. Each is a mapping with `type` and optionally
        `payload`, `queue`, `priority` and the keyword options of `enqueue`. On a sharded server,
        jobs for queues of several shards are checked by every shard first, then go in one call
        per shard: a refusal changes nothing (only a shard lost between the two leaves the
        others' jobs in)."""
        context = tracing.context_headers()
        messages = [new_job_message(j, context) for j in jobs]
        failover = Failover(self.failover_s, messages)
        while True:
            try:
                return self._enqueue_all(messages)
            except Unavailable as exc:
                delay = failover.next_delay(exc)
                if delay is None:
                    raise
                time.sleep(delay)

    def _enqueue_all(self, messages: list[pb.NewJob]) -> list[Job]:
        routes = self._known_routes
        by_shard: dict[int, list[int]] = {}
        for i, message in enumerate(messages):
            by_shard.setdefault(routes.for_queue(message.queue)[0], []).append(i)
        results: list[pb.Enqueued | None] = [None] * len(messages)
        if len(by_shard) > 1:
            for shard, indexes in by_shard.items():
                request = pb.EnqueueRequest(jobs=[messages[i] for i in indexes], validate_only=True)
                self._call(routes.stub(shard).Enqueue, request)
        for shard, indexes in by_shard.items():
            for i, result in zip(indexes, self._send_to(shard, [messages[i] for i in indexes]), strict=True):
                results[i] = result
        return jobs_from(messages, [r for r in results if r is not None], self)

    def _send_to(self, shard: int, messages: list[pb.NewJob]) -> list[pb.Enqueued]:
        return list(self._call(self._known_routes.stub(shard).Enqueue, pb.EnqueueRequest(jobs=messages)).jobs)

    # Every call but enqueue and take is written once, in client/calls.py; these carry them.
    def _run(self, call: calls.Call[T]) -> T:
        stub = self._known_routes.for_job(call.job_id) if call.job_id is not None else self._stub
        timeout = call.timeout if call.timeout is not None else self.timeout + call.extra_timeout
        return call.read(self._call(getattr(stub, call.method), call.request, timeout))

    def _drive(self, steps: calls.Steps[T]) -> T:
        """Run a method of several calls: each answer goes back to it, until it returns."""
        try:
            call = next(steps)
            while True:
                call = steps.send(self._run(call))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def get_job(self, job_id: int) -> Job:
        job = self._run(calls.get_job(job_id))
        job._client = self
        return job

    def job_by_key(self, queue: str, unique_key: str) -> Job:
        """The job that last took `unique_key` in `queue` (the newest, whatever its status, until
        it is purged); NotFound when none holds it."""
        job = self._run(calls.job_by_key(queue, unique_key))
        job._client = self
        return job

    def wait_job(self, job_id: int, timeout: float | None = None) -> Job:
        """The job once it is completed or dead, or as it is after `timeout` seconds (None: no
        limit). The server answers when the job ends (a long wait, one call a minute at most)."""
        return self._drive(calls.wait_job(job_id, timeout))

    def result(self, job_id: int, timeout: float | None = None) -> Any:
        """The job's result once it completed (see Job.result); JobFailed if it is dead,
        TimeoutError if it has not ended within `timeout` seconds."""
        return self._drive(calls.result(job_id, timeout))

    def job_errors(self, job_id: int) -> list[JobError]:
        """The job's error history, one entry per failed attempt, oldest first."""
        return self._run(calls.job_errors(job_id))

    # Seeing and steering.
    def _call(self, method: Any, request: Any, timeout: float | None = None) -> Any:
        try:
            return method(request, timeout=timeout if timeout is not None else self.timeout)
        except grpc.RpcError as exc:
            if exc.code() in MOVED_CODES and self._routes.sharded:
                self._forget_routes()
            raise from_rpc_error(exc) from None

    def _forget_routes(self) -> None:
        """A shard went away or the map is stale: learn the topology again on the next call."""
        with self._lock:
            self._routes.forget()
            channels, self._channels = self._channels, []
            self._batchers.clear()
            streams, self._streams = self._streams, {}
        for stream in streams.values():
            stream.close()
        for channel in channels:
            channel.close()

    def list_page(
        self, *, cursor: str = "", limit: int = 50, descending: bool = False, **filters: Any
    ) -> tuple[list[Job], str, str]:
        """One page: (jobs, next_cursor, prev_cursor); empty cursors mean nothing further that way."""
        return self._run(calls.list_page(cursor, limit, descending, filters))

    def list_jobs(self, *, page_size: int = 100, descending: bool = False, **filters: Any) -> Iterator[Job]:
        """Every job matching the filters (see steering.job_filter), by id, following the cursor."""
        cursor = ""
        while True:
            jobs, cursor, _ = self.list_page(cursor=cursor, limit=page_size, descending=descending, **filters)
            yield from jobs
            if not cursor:
                return

    def count_jobs(self, **filters: Any) -> int:
        return self._run(calls.count_jobs(filters))

    def update_jobs(self, changes: Mapping[str, Any], **filters: Any) -> ChangeResult:
        """Change every waiting job the filters select; jobs in flight, completed or dead are refused."""
        return self._run(calls.update_jobs(changes, filters))

    def update_job(self, job_id: int, **changes: Any) -> Job:
        """Change one waiting job (queue, priority, run_at, max_retries, backoff, keep_completed,
        payload); run_at=None makes a scheduled job ready. Returns the job as it now is."""
        return self._drive(calls.update_job(job_id, changes))

    def cancel(self, job_id: int) -> ChangeResult:
        """Cancel one job: see `cancel_jobs`."""
        return self.cancel_jobs(ids=[job_id])

    def cancel_jobs(self, **filters: Any) -> ChangeResult:
        """Cancel jobs (by ids, or the waiting and running ones matching the filters). A waiting
        job is cancelled at once. A running one is told on its worker's stream (an async handler
        is cancelled; a sync one sees `pyqueue.current_job().cancelled`) and ends CANCELLED at its
        next answer, never retried. Ended jobs are refused."""
        return self._run(calls.change("CancelJobs", filters))

    def retry_jobs(self, **filters: Any) -> ChangeResult:
        """Run dead jobs again (by ids, or the dead jobs matching the filters): ready at once,
        their error history kept, their retries granted again. Jobs not dead are refused."""
        return self._run(calls.change("RetryJobs", filters))

    def delete_jobs(self, **filters: Any) -> ChangeResult:
        return self._run(calls.change("DeleteJobs", filters))

    def delete_job(self, job_id: int) -> None:
        self._drive(calls.delete_job(job_id))

    # Workflows (docs/workflows.md).
    def enqueue_workflow(self, workflow: StepLike) -> WorkflowRun:
        """Start a workflow (a Chain, a Group or Batch, or one Task): answered once its first step
        is committed; the server runs the rest."""
        return self._run(calls.enqueue_workflow(workflow))

    def add_to_batch(self, batch_id: int, jobs: Iterable[StepLike]) -> list[int]:
        """Add jobs to a batch that still has a pending job (from inside one of its jobs, say:
        `current_job().job.batch_id`); their indexes in the batch."""
        return self._run(calls.add_to_batch(batch_id, jobs))

    def batch(self, batch_id: int) -> BatchInfo:
        return self._run(calls.batch(batch_id))

    def batches(self, limit: int = 100, before: int = 0) -> list[BatchInfo]:
        """The newest batches first (ids below `before`, when given)."""
        return self._run(calls.batches(limit, before))

    def cancel_workflow(self, workflow_id: int) -> ChangeResult:
        """Cancel what has not run of a workflow (a batch's id is its workflow's); no callback of
        it fires."""
        return self._run(calls.workflow_change("CancelWorkflow", workflow_id))

    def retry_workflow(self, workflow_id: int) -> ChangeResult:
        """Retry a workflow's dead jobs: its batches count them pending again, and callbacks not
        fired yet fire once they complete; a chain that stopped at one goes on."""
        return self._run(calls.workflow_change("RetryWorkflow", workflow_id))

    def queues(self) -> list[QueueInfo]:
        """Every queue with its job count per status, and whether it is paused."""
        return self._run(calls.queues())

    def workers(self) -> list[WorkerInfo]:
        """Every connected worker stream (on every shard), oldest first."""
        return self._run(calls.workers())

    # Periodic jobs.
    def set_cron(self, entries: Iterable[Mapping[str, Any]]) -> list[CronInfo]:
        """Declare periodic jobs, kept and timed by the server (see `cron_message` for the fields).
        Idempotent: an entry that exists gets the new schedule, timezone and job, and keeps
        whether it is paused and its last run."""
        return self._run(calls.set_cron(entries))

    def cron_entries(self) -> list[CronInfo]:
        """Every periodic job, with its next and last run."""
        return self._run(calls.cron_entries())

    def pause_cron(self, name: str) -> CronInfo:
        return self._run(calls.change_cron(name, "pause"))

    def resume_cron(self, name: str) -> CronInfo:
        """Run again from the next tick (the ticks missed while paused are not caught up)."""
        return self._run(calls.change_cron(name, "resume"))

    def delete_cron(self, name: str) -> CronInfo:
        return self._run(calls.change_cron(name, "delete"))

    def backup(self, path: str, timeout: float = 600.0) -> list[int]:
        """Have the server copy its store into `path`, a new directory on the server's machine
        (absolute); the sequence each shard's copy ends at. `pyqueue restore` puts it back."""
        return self._run(calls.backup(path, timeout))

    def history(self, queue: str = "", *, total: bool = False) -> History:
        """The last hour in fixed steps (events and waits), as the dashboard charts it: `queue`'s
        only, or with `total` every queue added up (by the server, as it counts), or (neither)
        every queue's, which is megabytes on a busy server: ask for what you show. `names` lists
        the queues either way. Kept in the server's memory: it starts empty when the server starts."""
        return self._run(calls.history(queue, total))

    def metrics(self) -> str:
        """The server's Prometheus metrics, as its HTTP /metrics serves them (text format)."""
        return self._run(calls.metrics())

    def set_queue_limit(
        self,
        queue: str,
        *,
        max_running: int = 0,
        rate: float | str | None = None,
        burst: float = 0,
        key_max_running: int = 0,
    ) -> QueueInfo:
        """Limit a queue, across all its workers: at most `max_running` jobs in flight, a `rate`
        (jobs a second, or "100/s", "5/m", "60/h") in bursts of `burst` (default: one second's
        worth), and at most `key_max_running` in flight per limit key (jobs enqueued with
        `limit_key`). A limited job stays ready and is delivered the moment it is allowed.
        Calling again replaces the limits; all zero (the defaults) clears them."""
        return self._run(calls.set_queue_limit(queue, max_running, rate, burst, key_max_running))

    def set_fair_weight(self, queue: str, fair_key: str, weight: int) -> FairKeys:
        """Fair share: `fair_key`'s share of the queue's turns, in proportion to `weight` (1 to
        10,000; 1, every key's default, clears it; "" weighs the jobs without a fair key). Kept
        durably; it takes effect on the next job given out."""
        return self._run(calls.set_fair_weight(queue, fair_key, weight))

    def fair_keys(self, queue: str, limit: int = 0) -> FairKeys:
        """The queue's fair keys with the most jobs waiting (at most `limit`; 0: 20), with each
        one's waiting count and oldest job's age, and every weight set."""
        return self._run(calls.fair_keys(queue, limit))

    def pause(self, queue: str) -> QueueInfo:
        """Keep taking enqueues for `queue`, but deliver nothing until `resume` (survives restarts)."""
        return self._run(calls.pause(queue, True))

    def resume(self, queue: str) -> QueueInfo:
        return self._run(calls.pause(queue, False))

    def take(self, queues: str | Iterable[str] = "default", *, prefetch: int = 1) -> TakeStream:
        """Open a Take stream; use as a context manager and iterate it for jobs. Over queues of
        several shards it is one stream per shard behind this one (each with this prefetch)."""
        return self._take([queues] if isinstance(queues, str) else list(queues), prefetch)

    def _take(
        self,
        names: list[str],
        prefetch: int,
        jobs: "queue.SimpleQueue[Any] | None" = None,
        learn: bool = True,
    ) -> TakeStream:
        """`take`, its jobs put into `jobs` if given (client/take.py's JoinedTakeStream)."""
        if learn and self._routes.sharded:
            self._forget_routes()  # a new stream is rare: learn where the shards are now
        routes = self._known_routes
        owners = routes.by_shard(names)
        if len(owners) == 1:
            ((shard, owned),) = owners.items()
            return TakeStream(routes.stub(shard), owned, prefetch, jobs=jobs)
        return MultiTakeStream({shard: routes.stub(shard) for shard in owners}, owners, prefetch, jobs=jobs)

    def _take_joined(self, subscriptions: "list[tuple[list[str], int]]") -> TakeStream:
        """One stream of jobs from several subscriptions, each (queues, prefetch) with its own
        window: control messages that must not wait behind a full window of work."""
        if self._routes.sharded:
            self._forget_routes()  # once: forgetting closes the channels the first part took
        jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        parts = [self._take(names, prefetch, jobs, learn=False) for names, prefetch in subscriptions]
        return JoinedTakeStream(parts, jobs)

    def close(self) -> None:
        for stream in self._streams.values():
            stream.close()
        for channel in self._channels:
            channel.close()
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""The unary calls of Celery's processes, over the native transport: safe in forked children.

Celery's prefork pool forks its children from a worker whose Take stream runs on grpcio, and a
grpcio channel made in a child forked after grpcio started waits forever (grpcio's fork support
makes it work, at about one task a second). The native transport starts a runtime of its own in
each process, so the result backend and every publish (a retry, a chain's next step, a chord's
wait) go over it in every process; the consumer's stream alone stays grpcio's, in the worker's
main process. Where the native transport cannot go (TLS, several addresses), grpcio carries the
calls: run such a worker with `-P threads`, or set GRPC_ENABLE_FORK_SUPPORT=1.

The calls are the client's own (pyqueue/client/calls.py), carried here as bytes.
"""

import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from google.protobuf import message_factory

import pyqueue
from pyqueue._native import WireChannel, WireError
from pyqueue.client import calls, native_wire
from pyqueue.client.calls import Call
from pyqueue.client.job import Job
from pyqueue.client.native_wire import NativeEnqueues
from pyqueue.client.spec import new_job_message
from pyqueue.errors import NotFound
from pyqueue.v1 import queue_pb2 as pb

T = TypeVar("T")
_METHODS = pb.DESCRIPTOR.services_by_name["Queue"].methods_by_name


class UnaryCalls:
    def __init__(
        self, address: str, token: str | None = None, tls: bool | None = None, timeout: float = 30.0
    ) -> None:
        self.address = address
        self.timeout = timeout
        self._token = token
        self._tls = tls
        self._native = native_wire.usable(address, bool(tls))
        self._lock = threading.Lock()
        self._channel: Any = None
        self._channel_pid = 0
        self._stream: NativeEnqueues | None = None  # single enqueues on a kept-open EnqueueStream
        self._stream_pid = 0
        self._client: pyqueue.Client | None = None
        self._client_pid = 0

    def _wire(self) -> Any:
        with self._lock:
            if self._channel_pid != os.getpid():  # a forked child makes its own
                metadata = [("authorization", f"Bearer {self._token}")] if self._token else []
                self._channel = WireChannel(self.address, metadata, native_wire.MAX_MESSAGE)
                self._channel_pid = os.getpid()
            return self._channel

    def grpc(self) -> pyqueue.Client:
        """The grpcio client of this process (for the Take stream, and where native cannot go)."""
        with self._lock:
            if self._client is None or self._client_pid != os.getpid():
                self._client = pyqueue.Client(self.address, token=self._token, tls=self._tls)
                self._client_pid = os.getpid()
            return self._client

    def run(self, call: Call[T]) -> T:
        if not self._native:
            return self.grpc()._run(call)
        answer = message_factory.GetMessageClass(_METHODS[call.method].output_type)
        try:
            raw = self._wire().unary(
                f"/pyqueue.v1.Queue/{call.method}", call.request.SerializeToString(), self.timeout
            )
        except WireError as exc:
            kind, code, message = exc.args
            raise native_wire.wire_error(kind, code, message, self.timeout) from None
        return call.read(answer.FromString(raw))

    # What Celery's transport and backend ask.
    def enqueue(self, specs: Iterable[Mapping[str, Any]]) -> list[int]:
        jobs = [new_job_message(spec) for spec in specs]
        if not self._native:
            return self._unary(jobs)
        return [enqueued.id for enqueued in self._enqueues().send(jobs)]

    def _unary(self, jobs: list[pb.NewJob]) -> list[int]:
        return self.run(
            Call("Enqueue", pb.EnqueueRequest(jobs=jobs), lambda answer: [j.id for j in answer.jobs])
        )

    def _enqueues(self) -> NativeEnqueues:
        with self._lock:
            if self._stream is None or self._stream_pid != os.getpid():
                metadata = [("authorization", f"Bearer {self._token}")] if self._token else []
                self._stream = NativeEnqueues(self.address, metadata, self._unary_answers, self.timeout)
                self._stream_pid = os.getpid()
            return self._stream

    def _unary_answers(self, jobs: list[pb.NewJob]) -> list[pb.Enqueued]:
        """A server without EnqueueStream: one Enqueue call."""
        return self.run(Call("Enqueue", pb.EnqueueRequest(jobs=jobs), lambda answer: list(answer.jobs)))

    def job_by_key(self, queue: str, unique_key: str) -> Job:
        return self.run(calls.job_by_key(queue, unique_key))

    def count(self, **filters: Any) -> int:
        return self.run(calls.count_jobs(filters))

    def change(self, method: str, **filters: Any) -> int:
        """CancelJobs or DeleteJobs: how many jobs it changed."""
        return len(self.run(calls.change(method, filters)).changed)

    def queue_names(self) -> list[str]:
        return [queue.name for queue in self.run(calls.queues())]

    def worker_queues(self) -> set[str]:
        """The queues the connected Take streams consume (the live workers')."""
        return {name for worker in self.run(calls.workers()) for name in worker.queues}

    def find(self, queue: str, unique_key: str) -> Job | None:
        try:
            return self.job_by_key(queue, unique_key)
        except NotFound:
            return None

    def close(self) -> None:
        with self._lock:
            if self._client is not None and self._client_pid == os.getpid():
                self._client.close()
            if self._stream is not None and self._stream_pid == os.getpid():
                self._stream.close()
            self._stream = None
            self._client = self._channel = None

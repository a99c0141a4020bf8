"""`Client`: enqueue jobs, look them up, and take them as a worker."""

import os
from collections.abc import Iterable, Mapping
from typing import Any

import grpc

from pyqueue.client import codec
from pyqueue.client.job import Job
from pyqueue.client.take import TakeStream
from pyqueue.errors import from_rpc_error
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc

DEFAULT_ADDRESS = "127.0.0.1:7411"
DEFAULT_PRIORITY = 32768


def default_address() -> str:
    return os.environ.get("PYQUEUE_ADDRESS") or DEFAULT_ADDRESS


def _new_job(type: str, payload: Any, queue: str, priority: int) -> pb.NewJob:
    raw, content_type = codec.encode(payload)
    return pb.NewJob(type=type, queue=queue, priority=priority, payload=raw, content_type=content_type)


class Client:
    """A connection to a pyqueue server. Use as a context manager, or call close()."""

    def __init__(self, address: str | None = None, *, timeout: float = 30.0) -> None:
        self.address = address or default_address()
        self.timeout = timeout
        self._channel = grpc.insecure_channel(
            self.address,
            options=[
                ("grpc.max_receive_message_length", 64 << 20),
                ("grpc.max_send_message_length", 64 << 20),
                ("grpc.keepalive_time_ms", 10_000),
                ("grpc.keepalive_timeout_ms", 10_000),
            ],
        )
        self._stub = pb_grpc.QueueStub(self._channel)

    def enqueue(
        self, type: str, payload: Any = None, *, queue: str = "default", priority: int = DEFAULT_PRIORITY
    ) -> Job:
        """Enqueue one job; returns once it is committed (fsync'd in the default commit mode)."""
        return self.enqueue_many([{"type": type, "payload": payload, "queue": queue, "priority": priority}])[
            0
        ]

    def enqueue_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[Job]:
        """Enqueue many jobs in one call, all or nothing. Each is a mapping with `type` and optionally
        `payload`, `queue` and `priority`."""
        messages = [
            _new_job(
                j["type"], j.get("payload"), j.get("queue", "default"), j.get("priority", DEFAULT_PRIORITY)
            )
            for j in jobs
        ]
        try:
            response = self._stub.Enqueue(pb.EnqueueRequest(jobs=messages), timeout=self.timeout)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        return [
            Job(
                id=e.id,
                type=m.type,
                queue=m.queue,
                priority=m.priority,
                payload=codec.decode(m.payload, m.content_type),
                content_type=m.content_type,
                status="ready",
                attempts=0,
                created_at=None,
                updated_at=None,
                run_at=None,
            )
            for e, m in zip(response.jobs, messages, strict=True)
        ]

    def get_job(self, job_id: int) -> Job:
        try:
            return Job.from_pb(self._stub.GetJob(pb.GetJobRequest(id=job_id), timeout=self.timeout))
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None

    def take(self, queues: str | Iterable[str] = "default", *, prefetch: int = 1) -> TakeStream:
        """Open a Take stream; use as a context manager and iterate it for jobs."""
        names = [queues] if isinstance(queues, str) else list(queues)
        return TakeStream(self._stub, names, prefetch)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

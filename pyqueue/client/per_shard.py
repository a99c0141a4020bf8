"""One Take stream per shard behind one: the routing both the sync and the asyncio kind share.

Each job id names its shard, so an ack, failure, start, extension or release goes to the stream of that shard; the
combined stream is alive while every shard's stream is, and its failure is the first of theirs."""

import asyncio
from typing import Any, Generic, TypeVar

from pyqueue.client.job import Job
from pyqueue.cluster import shard_of_job
from pyqueue.errors import PyQueueError, Unavailable

S = TypeVar("S")


class PerShard(Generic[S]):
    _by_shard: dict[int, S]

    @property
    def streams(self) -> list[S]:
        return list(self._by_shard.values())

    def _owner(self, job_id: int) -> Any:
        stream = self._by_shard.get(shard_of_job(job_id))
        if stream is None:
            raise Unavailable(f"job {job_id} belongs to a shard this stream does not serve")
        return stream

    def ack(self, job: Job, result: bytes | None = None) -> Any:
        return self._owner(job.id).ack(job, result)

    def fail(self, job: Job, message: str, **options: Any) -> Any:
        return self._owner(job.id).fail(job, message, **options)

    def extend(self, jobs: list[Job], extend_ms: int = 0) -> None:
        for job in jobs:
            self._owner(job.id).extend([job], extend_ms)

    def release(self, job: Job, delay_ms: int = 0, *, unknown_type: bool = False) -> None:
        self._owner(job.id).release(job, delay_ms, unknown_type=unknown_type)

    def _start(self, job: Job, confirm: bool) -> bool:
        return bool(self._owner(job.id)._start(job, confirm))

    async def _start_all(self, jobs: list[Job], confirm: bool) -> list[Job]:
        by_shard: dict[int, list[Job]] = {}
        for job in jobs:
            by_shard.setdefault(shard_of_job(job.id), []).append(job)
        started = await asyncio.gather(
            *(self._owner(group[0].id)._start_all(group, confirm) for group in by_shard.values())
        )
        return [job for group in started for job in group]

    def on_cancel(self, callback: Any) -> None:
        for stream in self._by_shard.values():
            stream.on_cancel(callback)  # type: ignore[attr-defined]

    @property
    def server_stopping(self) -> bool:
        return any(stream._stopping for stream in self._by_shard.values())  # type: ignore[attr-defined]

    async def connected(self) -> None:
        await asyncio.gather(*(stream.connected() for stream in self._by_shard.values()))  # type: ignore[attr-defined]

    def _check_alive(self) -> None:
        for stream in self._by_shard.values():
            stream._check_alive()  # type: ignore[attr-defined]

    def _failure(self) -> PyQueueError | None:
        errors = (stream._error for stream in self._by_shard.values())  # type: ignore[attr-defined]
        return next((e for e in errors if e is not None), None)

"""Every Job method works whichever client took the job: `ack`/`fail` block for a sync stream's
job, `ack_async`/`fail_async` await either kind, and a blocking answer to an async stream's job is
refused before anything is sent."""

import asyncio

import pytest
from harness import ServerProcess

import pyqueue


def test_a_job_of_either_client_is_answered_by_its_own_methods(server: ServerProcess) -> None:
    async def scenario() -> None:
        async with pyqueue.AsyncClient(server.address) as client:
            await client.enqueue_many([{"type": "t", "queue": "a", "max_retries": 0}] * 3)
            async with client.take("a", prefetch=3) as stream:
                first, second, third = [await stream.next(timeout=30) for _ in range(3)]
                assert first is not None and second is not None and third is not None
                with pytest.raises(RuntimeError, match="ack_async"):
                    first.ack()  # would block the loop: refused, and nothing was sent
                await first.ack_async()
                assert await second.fail_async("boom", kill=True) == "dead"
                third.extend(30)
                third.release()
            with pytest.raises(pyqueue.NotFound):
                await client.get_job(first.id)  # completed, and not kept (keep_completed 0)
            assert (await client.get_job(second.id)).status == "dead"
            assert (await client.get_job(third.id)).status == "ready"

        with pyqueue.Client(server.address) as sync, sync.take("b") as stream:
            sync.enqueue("t", queue="b")
            job = stream.next(timeout=30)
            assert job is not None
            await job.ack_async()  # a sync stream's job, awaited from asyncio
            assert sync.count_jobs(queue="b", status="in_flight") == 0

    asyncio.run(scenario())

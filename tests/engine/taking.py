"""Getting jobs in flight on an engine, for the tests that answer them."""

from pyqueue.engine import Engine


async def delivered(e: Engine, n: int) -> list[tuple[int, int]]:
    """Enqueue n jobs and take them all on one consumer: their (id, lease) pairs."""
    for i in range(0, n, 1000):
        await e.enqueue([e.new_job(0, "t", "q", None, b"") for _ in range(min(1000, n - i))])
    consumer = e.consumer(["q"], n)
    pairs: list[tuple[int, int]] = []
    while len(pairs) < n:
        pairs += [(j.record.id, j.record.lease) for j in await consumer.next_jobs(5)]
    return pairs

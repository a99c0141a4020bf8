"""Delivery order: priority first, FIFO within a priority, most urgent across subscribed queues."""

import pyqueue


def take_ids(client: pyqueue.Client, queues: list[str], n: int) -> list[int]:
    ids = []
    with client.take(queues, prefetch=1) as stream:
        for _ in range(n):
            job = stream.next(timeout=10)
            assert job is not None
            ids.append(job.id)
            job.ack()
    return ids


def test_priority_then_fifo(client: pyqueue.Client) -> None:
    specs = [("a", 5), ("b", 1), ("c", 5), ("d", 0), ("e", 1), ("f", 65535), ("g", 0)]
    jobs = {name: client.enqueue("t", name, priority=p).id for name, p in specs}
    order = take_ids(client, ["default"], len(specs))
    expected = [jobs[n] for n in ["d", "g", "b", "e", "a", "c", "f"]]
    assert order == expected


def test_most_urgent_across_queues_first(client: pyqueue.Client) -> None:
    low = client.enqueue("t", queue="mail", priority=100).id
    urgent = client.enqueue("t", queue="video", priority=1).id
    middle = client.enqueue("t", queue="mail", priority=50).id
    other = client.enqueue("t", queue="ignored", priority=0).id
    assert take_ids(client, ["mail", "video"], 3) == [urgent, middle, low]
    assert client.get_job(other).status == "ready"


def test_batch_enqueue_keeps_order_within_priority(client: pyqueue.Client) -> None:
    created = client.enqueue_many([{"type": "t", "payload": i} for i in range(50)])
    assert [j.id for j in created] == sorted(j.id for j in created)
    assert take_ids(client, ["default"], 50) == [j.id for j in created]

"""See and steer the queue: list, filter, count, change, delete, unique jobs, pause and resume."""

import itertools
import threading
from datetime import UTC, datetime, timedelta

import pytest
from harness import ServerProcess, assert_nothing_else_comes

import pyqueue


@pytest.fixture
def known(client: pyqueue.Client):  # type: ignore[no-untyped-def]
    """A store of known content: 2 queues x 2 types, in four statuses. Returns {id: (queue, type, status)}."""
    content = {}
    for queue, type_ in itertools.product(["a", "b"], ["x", "y"]):
        for _ in range(2):
            content[client.enqueue(type_, queue=queue).id] = (queue, type_, "ready")
        content[client.enqueue(type_, queue=queue, delay=3600).id] = (queue, type_, "scheduled")
    # Some dead, some in flight. Failing frees credit, so the stream is then sent two more jobs:
    # once it holds four again nothing moves, and GetJob (a record read, not the indexes the
    # listing uses) says where everything is.
    holder = client.take(["a", "b"], prefetch=4)
    taken = [holder.next(timeout=30) for _ in range(4)]
    for job in taken[:2]:
        assert job is not None
        job.fail("no", kill=True)
    assert all(holder.next(timeout=30) is not None for _ in range(2))
    content = {i: (q, t, client.get_job(i).status) for i, (q, t, _) in content.items()}
    assert sorted(s for _, _, s in content.values()).count("in_flight") == 4
    yield content
    holder.close()


FILTER_VALUES = {
    "queues": [["a"], ["b"], ["a", "b"]],
    "types": [["x"], ["y"]],
    "statuses": [["ready"], ["scheduled"], ["dead"], ["in_flight"], ["ready", "dead"], ["completed"]],
}


def combinations():  # type: ignore[no-untyped-def]
    names = list(FILTER_VALUES)
    for r in range(len(names) + 1):
        for chosen in itertools.combinations(names, r):
            for values in itertools.product(*(FILTER_VALUES[n] for n in chosen)):
                yield dict(zip(chosen, values, strict=True))


def expected(content, f) -> list[int]:  # type: ignore[no-untyped-def]
    return sorted(
        i
        for i, (q, t, s) in content.items()
        if q in f.get("queues", [q]) and t in f.get("types", [t]) and s in f.get("statuses", [s])
    )


def test_every_combination_of_indexed_filters_in_both_orders(client: pyqueue.Client, known) -> None:  # type: ignore[no-untyped-def]
    for f in combinations():
        want = expected(known, f)
        assert [j.id for j in client.list_jobs(page_size=3, **f)] == want, f
        assert [j.id for j in client.list_jobs(page_size=2, descending=True, **f)] == want[::-1], f
        assert client.count_jobs(**f) == len(want), f


def test_pages_and_cursors_both_ways(client: pyqueue.Client, known) -> None:  # type: ignore[no-untyped-def]
    everything = sorted(known)
    first, next_cursor, prev_cursor = client.list_page(limit=5)
    assert [j.id for j in first] == everything[:5] and prev_cursor == ""
    second, next2, prev2 = client.list_page(limit=5, cursor=next_cursor)
    assert [j.id for j in second] == everything[5:10]
    back, _, before_back = client.list_page(limit=5, cursor=prev2)
    assert [j.id for j in back] == everything[:5] and before_back == ""
    last_page, end, _ = client.list_page(limit=100, cursor=next2)
    assert [j.id for j in last_page] == everything[10:] and end == ""
    assert client.list_page(queue="nope")[0] == []
    assert client.list_page(ids=[everything[3], 12345])[0][0].id == everything[3]


def test_ranges_and_ids(client: pyqueue.Client) -> None:
    low = client.enqueue("t", priority=10).id
    high = client.enqueue("t", priority=60000).id
    soon = client.enqueue("t", run_at=datetime.now(UTC) + timedelta(hours=1)).id
    assert [j.id for j in client.list_jobs(priority=(None, 100))] == [low]
    assert [j.id for j in client.list_jobs(priority=(50000, None))] == [high]
    later = datetime.now(UTC) + timedelta(minutes=30)
    assert [j.id for j in client.list_jobs(run_at=(later, None))] == [soon]
    assert [j.id for j in client.list_jobs(ids=[high, low], attempts=(0, 0))] == [low, high]
    assert client.count_jobs(priority=(None, 100)) == 1


def test_bad_listing_requests_are_refused(client: pyqueue.Client) -> None:
    with pytest.raises(pyqueue.InvalidArgument, match="limit"):
        client.list_page(limit=1001)
    with pytest.raises(pyqueue.InvalidArgument, match="cursor"):
        client.list_page(cursor="zzz")
    with pytest.raises(ValueError, match="unknown status"):
        client.count_jobs(status="running")


def test_an_update_that_changes_nothing_is_refused(client: pyqueue.Client) -> None:
    job = client.enqueue("t", queue="q")
    for update in (lambda: client.update_jobs({}, ids=[job.id]), lambda: client.update_job(job.id)):
        with pytest.raises(pyqueue.InvalidArgument, match="the update changes nothing"):
            update()


def test_queues_show_counts_per_status(client: pyqueue.Client, known) -> None:  # type: ignore[no-untyped-def]
    queues = {q.name: q for q in client.queues()}
    for name in "ab":
        want: dict[str, int] = {}
        for q, _, s in known.values():
            if q == name:
                want[s] = want.get(s, 0) + 1
        assert queues[name].counts == want
        assert not queues[name].paused


def test_update_in_every_status(client: pyqueue.Client, known) -> None:  # type: ignore[no-untyped-def]
    by_status = {s: i for i, (_, _, s) in known.items()}
    for status in ("in_flight", "dead"):
        with pytest.raises(pyqueue.FailedPrecondition, match=status):
            client.update_job(by_status[status], priority=1)
    assert client.update_job(by_status["ready"], priority=7).priority == 7
    assert client.update_job(by_status["scheduled"], run_at=None).status == "ready"
    later = datetime.now(UTC) + timedelta(hours=2)
    moved = client.update_job(by_status["ready"], run_at=later)
    assert moved.status == "scheduled"
    with pytest.raises(pyqueue.NotFound):
        client.update_job(424242, priority=1)
    with pytest.raises(pyqueue.InvalidArgument, match="queue"):
        client.update_job(by_status["scheduled"], queue="bad queue")


def test_moved_and_reprioritised_jobs_come_out_in_their_new_order(client: pyqueue.Client) -> None:
    first = client.enqueue("t", queue="src", priority=100).id
    second = client.enqueue("t", queue="src", priority=100).id
    third = client.enqueue("t", queue="dst", priority=100).id
    client.update_job(second, queue="dst", priority=1)
    client.update_job(third, priority=200)
    with client.take("dst", prefetch=1) as stream:
        order = []
        for _ in range(2):
            job = stream.next(timeout=30)
            assert job is not None
            order.append(job.id)
            job.ack()
        assert order == [second, third]
    with client.take("src") as stream:
        job = stream.next(timeout=30)
        assert job is not None and job.id == first
        job.ack()
        assert_nothing_else_comes(client, stream, "src")  # the moved job does not also come out of it


def test_payload_can_change_while_waiting(client: pyqueue.Client) -> None:
    job_id = client.enqueue("t", {"v": 1}).id
    client.update_job(job_id, payload={"v": 2})
    with client.take() as stream:
        job = stream.next(timeout=30)
        assert job is not None and job.payload == {"v": 2}


def test_bulk_update_and_delete_by_filter(client: pyqueue.Client, known) -> None:  # type: ignore[no-untyped-def]
    result = client.update_jobs({"priority": 5}, queue="a")
    assert sorted(result.changed) == sorted(
        i for i, (q, _, s) in known.items() if q == "a" and s in ("ready", "scheduled")
    )
    assert {r.code for r in result.rejected} == {"FAILED_PRECONDITION"}
    deleted = client.delete_jobs(queue="b", status="scheduled")
    assert sorted(deleted.changed) == expected(known, {"queues": ["b"], "statuses": ["scheduled"]})
    assert client.count_jobs(queue="b", status="scheduled") == 0
    with pytest.raises(pyqueue.InvalidArgument, match="at least one condition"):
        client.delete_jobs()


def test_a_deleted_scheduled_job_never_runs(client: pyqueue.Client) -> None:
    job_id = client.enqueue("t", delay=0.5).id
    client.delete_job(job_id)
    with client.take() as stream:
        assert stream.next(timeout=1.5) is None
    with pytest.raises(pyqueue.NotFound):
        client.delete_job(job_id)


def test_a_job_deleted_in_flight_is_not_delivered_again_and_its_ack_is_refused(
    client: pyqueue.Client,
) -> None:
    job_id = client.enqueue("t").id
    with client.take() as stream:
        job = stream.next(timeout=30)
        assert job is not None
        client.delete_job(job_id)
        with pytest.raises(pyqueue.NotFound):
            job.ack()
    with client.take() as stream:
        assert_nothing_else_comes(client, stream)


def test_unique_scopes_across_the_lifecycle(server: ServerProcess) -> None:
    with pyqueue.Client(server.address) as client:
        first = client.enqueue("t", unique_key="k-queued")
        again = client.enqueue("t", unique_key="k-queued")
        assert again.duplicate and again.id == first.id and not first.duplicate
        active = client.enqueue("t", queue="act", unique_key="k-active", unique_scope="active")
        exists = client.enqueue(
            "t", queue="ex", unique_key="k-exists", unique_scope="exists", keep_completed=60
        )

        with client.take(["default", "act", "ex"], prefetch=3) as stream:
            held = {j.id: j for j in (stream.next(timeout=30) for _ in range(3)) if j is not None}
            # In flight: "queued" releases the key, "active" and "exists" keep it.
            released = client.enqueue("t", unique_key="k-queued")
            assert not released.duplicate and released.id != first.id
            assert client.enqueue("t", queue="act", unique_key="k-active", unique_scope="active").duplicate
            held[active.id].fail("retry me", retry_at=datetime.now(UTC) + timedelta(hours=1))
            # Back to scheduled by a retry: held again.
            assert (
                client.enqueue("t", queue="act", unique_key="k-active", unique_scope="active").id == active.id
            )
            held[exists.id].ack()
            held[first.id].ack()
        # Completed but kept: "exists" still holds it.
        assert client.enqueue("t", queue="ex", unique_key="k-exists", unique_scope="exists").id == exists.id
        client.delete_job(exists.id)
        assert not client.enqueue("t", queue="ex", unique_key="k-exists", unique_scope="exists").duplicate
    server.stop()
    server.restart()
    with pyqueue.Client(server.address) as client:
        assert client.enqueue("t", unique_key="k-queued").id == released.id


def test_concurrent_duplicate_enqueues_make_one_job(client: pyqueue.Client, server: ServerProcess) -> None:
    results: list[pyqueue.Job] = []
    lock = threading.Lock()

    def enqueue() -> None:
        with pyqueue.Client(server.address) as c:
            job = c.enqueue("t", unique_key="race")
        with lock:
            results.append(job)

    threads = [threading.Thread(target=enqueue) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len({j.id for j in results}) == 1
    assert sum(not j.duplicate for j in results) == 1
    assert client.count_jobs(status="ready") == 1


def test_pause_and_resume_survive_a_restart(server: ServerProcess) -> None:
    with pyqueue.Client(server.address) as client:
        assert client.pause("mail").paused
        job_id = client.enqueue("t", queue="mail").id
        with client.take(["mail", "probe"]) as stream:
            assert_nothing_else_comes(client, stream, "probe")  # a paused queue delivers nothing
    server.stop()
    server.restart()
    with pyqueue.Client(server.address) as client:
        assert {q.name: q.paused for q in client.queues()}["mail"]
        with client.take(["mail", "probe"]) as stream:
            assert_nothing_else_comes(client, stream, "probe")
            assert not client.resume("mail").paused
            job = stream.next(timeout=30)
            assert job is not None and job.id == job_id


def test_dead_jobs_run_again_with_their_history_and_their_retries(server, client: pyqueue.Client) -> None:  # type: ignore[no-untyped-def]
    dead = client.enqueue("t", queue="mail", max_retries=1)
    waiting = client.enqueue("t", queue="mail", delay=3600)
    with client.take("mail") as stream:
        for attempt in range(2):  # the first attempt is retried at once, the second is the last
            job = stream.next(timeout=30)
            assert job is not None and job.id == dead.id
            assert job.fail(f"boom {attempt}", retry_at=datetime.now(UTC)) == (
                "scheduled" if attempt == 0 else "dead"
            )
    assert client.get_job(dead.id).status == "dead"

    result = client.retry_jobs(ids=[dead.id, waiting.id, 12345])
    assert result.changed == [dead.id]
    assert {(r.id, r.code) for r in result.rejected} == {
        (waiting.id, "FAILED_PRECONDITION"),
        (12345, "NOT_FOUND"),
    }
    again = client.get_job(dead.id)
    assert (again.status, again.attempts) == ("ready", 2)
    assert [e.message for e in client.job_errors(dead.id)] == ["boom 0", "boom 1"]
    with client.take("mail") as stream:
        job = stream.next(timeout=30)
        assert job is not None and job.id == dead.id
        assert job.fail("boom 2") == "scheduled", "a retried job gets its retries again"
    assert [e.message for e in client.job_errors(dead.id)] == ["boom 0", "boom 1", "boom 2"]
    assert client.get_job(waiting.id).status == "scheduled", "refused jobs are unchanged"


def test_retry_by_filter_takes_only_the_dead_and_refuses_other_statuses(
    server, client: pyqueue.Client
) -> None:  # type: ignore[no-untyped-def]
    ready = client.enqueue("t", queue="mail")
    dead = [client.enqueue("t", queue="mail", max_retries=0) for _ in range(2)]
    other = client.enqueue("t", queue="other", max_retries=0)
    with client.take(["mail", "other"], prefetch=4) as stream:
        for _ in range(4):
            job = stream.next(timeout=30)
            assert job is not None
            if job.id == ready.id:
                job.release()
            else:
                job.fail("no")
    result = client.retry_jobs(queues=["mail"])
    assert sorted(result.changed) == sorted(j.id for j in dead) and not result.rejected
    assert client.get_job(other.id).status == "dead"
    with pytest.raises(pyqueue.errors.InvalidArgument, match="only dead jobs"):
        client.retry_jobs(queues=["mail"], statuses=["ready"])

"""Per-key caps: jobs enqueued with a `limit_key` run at most `key_max_running` per key at once.

A capped key's next job waits ready and goes out when one of the key's jobs leaves flight; other
keys, and jobs without a key, go on meanwhile. The keys survive a kill -9: the rebuild restores
them from the status index, and the cap holds again at once."""

from harness import ServerProcess, assert_nothing_else_comes, check_store

import pyqueue


def _enqueue(client: pyqueue.Client) -> dict[str, list[int]]:
    ids: dict[str, list[int]] = {"a": [], "b": [], "": []}
    for key in ("a", "a", "b", "", "a", "b", ""):
        job = client.enqueue("t", key, queue="k", limit_key=key or None)
        ids[key].append(job.id)
    return ids


def test_a_capped_key_waits_while_other_keys_and_plain_jobs_go_on(server: ServerProcess) -> None:
    with pyqueue.Client(server.address, timeout=20) as client:
        info = client.set_queue_limit("k", key_max_running=1)
        assert info.limits == "max 1 running per key"
        ids = _enqueue(client)
        assert client.get_job(ids["a"][0]).limit_key == "a"
        with client.take(["k"], prefetch=100) as stream:
            first = [stream.next(timeout=30) for _ in range(4)]
            assert [job.id for job in first if job] == sorted([ids["a"][0], ids["b"][0], *ids[""]])
            assert_nothing_else_comes(client, stream, "k")  # a's and b's next jobs wait
            held_a = next(job for job in first if job and job.id == ids["a"][0])
            held_a.ack()
            nxt = stream.next(timeout=30)
            assert nxt is not None and nxt.id == ids["a"][1], "a's next job goes out once its first ends"
            assert_nothing_else_comes(client, stream, "k")
            nxt.fail("boom")  # a failed attempt also frees the key's slot (it retries later)
            again = stream.next(timeout=30)
            assert again is not None and again.id == ids["a"][2] and again.limit_key == "a"


def test_the_keys_and_the_cap_survive_a_kill(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data").start()
    try:
        with pyqueue.Client(server.address, timeout=20) as client:
            client.set_queue_limit("k", key_max_running=1)
            ids = _enqueue(client)
            stream = client.take(["k"], prefetch=100)
            assert stream.next(timeout=30) is not None  # jobs in flight at the kill
            server.kill()
        server.restart()
        server.wait_for("rebuilt the in-memory sets")
        with pyqueue.Client(server.address, timeout=20) as client, client.take(["k"], prefetch=100) as stream:
            got = [stream.next(timeout=30) for _ in range(4)]
            assert sorted(job.id for job in got if job) == sorted([ids["a"][0], ids["b"][0], *ids[""]])
            assert_nothing_else_comes(client, stream, "k")
            for job in got:
                assert job is not None
                job.ack()
            rest = [stream.next(timeout=30) for _ in range(2)]
            assert sorted(job.id for job in rest if job) == [ids["a"][1], ids["b"][1]]
        server.stop()
        assert check_store(tmp_path / "data").returncode == 0
    finally:
        server.close()


def test_a_bad_limit_key_is_refused_and_changes_nothing(server: ServerProcess) -> None:
    with pyqueue.Client(server.address, timeout=20) as client:
        for bad in ("tab\there", "x" * 200):
            try:
                client.enqueue("t", queue="k", limit_key=bad)
            except pyqueue.InvalidArgument as exc:
                assert "limit key" in str(exc)
            else:
                raise AssertionError(f"limit key {bad[:20]!r} was taken")
        assert client.count_jobs() == 0
        try:
            client.set_queue_limit("k", key_max_running=2_000_000)
        except pyqueue.InvalidArgument as exc:
            assert "key_max_running" in str(exc)
        else:
            raise AssertionError("a cap beyond the range was taken")

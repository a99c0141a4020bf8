"""Fair share by key: within a queue and a priority, the next job comes from the fair keys in turn
(FIFO within a key, jobs without a key as one key of their own), in proportion to each key's
weight. Priorities still come first. Keys and weights survive a kill -9 and hold per queue on a
sharded server."""

import json
import subprocess
from pathlib import Path

import pytest
from harness import (
    ServerProcess,
    assert_nothing_else_comes,
    check_store,
    json_call,
    pyqueue_command,
    queue_on,
)

import pyqueue


def _turns(client: pyqueue.Client, queue: str, count: int) -> list[int]:
    """The next `count` jobs of `queue`, one at a time: each is claimed after the last one's ack,
    so the order is the index's choice and not a prefetch's."""
    got: list[int] = []
    with client.take([queue], prefetch=1) as stream:
        for _ in range(count):
            job = stream.next(timeout=30)
            assert job is not None, f"only {len(got)} of {count} jobs came"
            got.append(job.id)
            job.ack()
    return got


def _backlog(client: pyqueue.Client, queue: str) -> dict[str, list[int]]:
    """Tenant a's six jobs, then b's two, then one without a key, then an urgent one of c's."""
    ids: dict[str, list[int]] = {"a": [], "b": [], "": [], "c": []}
    for key in ["a"] * 6 + ["b"] * 2 + [""]:
        ids[key].append(client.enqueue("t", queue=queue, fair_key=key or None).id)
    ids["c"].append(client.enqueue("t", queue=queue, fair_key="c", priority=0).id)
    return ids


def _expected_turns(ids: dict[str, list[int]]) -> list[int]:
    a, b, plain, c = ids["a"], ids["b"], ids[""], ids["c"]
    return [c[0], a[0], b[0], plain[0], a[1], b[1], *a[2:]]


def test_keys_take_turns_within_a_priority_and_priorities_come_first(server: ServerProcess) -> None:
    with pyqueue.Client(server.address, timeout=20) as client:
        ids = _backlog(client, "k")
        assert client.get_job(ids["a"][0]).fair_key == "a"
        assert client.get_job(ids[""][0]).fair_key == ""
        assert _turns(client, "k", 10) == _expected_turns(ids)
        with client.take(["k"], prefetch=1) as stream:
            assert_nothing_else_comes(client, stream, "k")


def test_a_key_alone_is_not_held_back(server: ServerProcess) -> None:
    """Work-conserving: with one key waiting, it has every turn (and every prefetch slot)."""
    with pyqueue.Client(server.address, timeout=20) as client:
        ids = [client.enqueue("t", queue="k", fair_key="only").id for _ in range(20)]
        with client.take(["k"], prefetch=20) as stream:
            got = [stream.next(timeout=30) for _ in range(20)]
            assert [job.id for job in got if job] == ids


def test_cancelled_deleted_and_changed_jobs_leave_their_keys(server: ServerProcess) -> None:
    """The index finds a leaving job by its key (it keeps no table from job to key): a cancel,
    a delete and a change of priority or queue take the job out of its key's turn and its count."""
    with pyqueue.Client(server.address, timeout=20) as client:
        a = [client.enqueue("t", queue="k", fair_key="a").id for _ in range(4)]
        b = [client.enqueue("t", queue="k", fair_key="b").id for _ in range(2)]
        client.cancel(a[0])
        client.delete_job(b[0])
        client.update_job(a[1], priority=0)  # now before every other job of the queue
        client.update_job(a[2], queue="elsewhere")
        waiting = {key.fair_key: key.waiting for key in client.fair_keys("k").keys}
        assert waiting == {"a": 2, "b": 1}, waiting
        assert _turns(client, "k", 3) == [a[1], b[1], a[3]]  # a had its turn at priority 0
        assert _turns(client, "elsewhere", 1) == [a[2]]
        assert client.fair_keys("k").key_count == 0
        with client.take(["k"], prefetch=1) as stream:
            assert_nothing_else_comes(client, stream, "k")


def test_weights_give_shares_and_are_listed(server: ServerProcess) -> None:
    with pyqueue.Client(server.address, timeout=20) as client:
        keys = client.set_fair_weight("k", "b", 3)
        assert keys.weights == {"b": 3}
        a = [client.enqueue("t", queue="k", fair_key="a").id for _ in range(12)]
        b = [client.enqueue("t", queue="k", fair_key="b").id for _ in range(12)]
        listed = client.fair_keys("k")
        assert listed.key_count == 2
        assert [(k.fair_key, k.waiting, k.weight) for k in listed.keys] == [("a", 12, 1), ("b", 12, 3)]
        assert all(k.oldest_seconds >= 0 for k in listed.keys)
        assert [k.fair_key for k in client.fair_keys("k", limit=1).keys] == ["a"]
        first = _turns(client, "k", 8)
        assert sum(1 for i in first if i in b) == 6, "weight 3 against 1: three of every four turns"
        assert [i for i in first if i in a] == a[:2] and [i for i in first if i in b] == b[:6]
        # Back to even: 1 clears the weight, and it takes effect on the next claim.
        assert client.set_fair_weight("k", "b", 1).weights == {}
        rest = _turns(client, "k", 4)
        assert sorted(1 if i in b else 0 for i in rest) == [0, 0, 1, 1]
        assert client.fair_keys("k").keys[0].waiting == 8


def test_bad_weights_and_keys_are_refused_and_change_nothing(server: ServerProcess) -> None:
    with pyqueue.Client(server.address, timeout=20) as client:
        for weight in (0, 10_001, -3):
            with pytest.raises(pyqueue.InvalidArgument, match="weight"):
                client.set_fair_weight("k", "a", weight)
        with pytest.raises(pyqueue.InvalidArgument, match="fair key"):
            client.set_fair_weight("k", "x" * 300, 2)
        assert client.fair_keys("k").weights == {}
        # The largest weight the native index keeps is the largest the API takes.
        assert client.set_fair_weight("k", "a", 10_000).weights == {"a": 10_000}
        assert client.set_fair_weight("k", "a", 1).weights == {}
        for bad in ("tab\there", "x" * 300):
            with pytest.raises(pyqueue.InvalidArgument, match="fair key"):
                client.enqueue("t", queue="k", fair_key=bad)
        with pytest.raises(pyqueue.InvalidArgument, match="not both"):
            client.enqueue("t", queue="k", fair_key="a", limit_key="a")
        assert client.count_jobs() == 0
        status, body = json_call(
            f"http://{server.http_address}/v1/jobs", json.dumps({"type": "t", "fair_key": 7}).encode()
        )
        assert status == 400 and "fair_key" in json.dumps(body)
        assert client.count_jobs() == 0


def test_the_http_api_takes_a_fair_key(server: ServerProcess) -> None:
    status, body = json_call(
        f"http://{server.http_address}/v1/jobs",
        json.dumps({"type": "t", "queue": "k", "fair_key": "tenant-9"}).encode(),
    )
    assert status == 200, body
    with pyqueue.Client(server.address, timeout=20) as client:
        assert client.get_job(int(body["id"])).fair_key == "tenant-9"


def test_keys_and_weights_survive_a_kill(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    try:
        with pyqueue.Client(server.address, timeout=20) as client:
            client.set_fair_weight("k", "b", 2)
            a = [client.enqueue("t", queue="k", fair_key="a").id for _ in range(6)]
            b = [client.enqueue("t", queue="k", fair_key="b").id for _ in range(6)]
            stream = client.take(["k"], prefetch=1)
            held = stream.next(timeout=30)  # in flight at the kill: back to ready after it
            assert held is not None and held.id == a[0]
            server.kill()
        server.restart()
        server.wait_for("rebuilt the in-memory sets")
        with pyqueue.Client(server.address, timeout=20) as client:
            assert client.fair_keys("k").weights == {"b": 2}
            first = _turns(client, "k", 9)
            assert sum(1 for i in first if i in b) == 6, "b's weight 2 holds after the kill"
            assert [i for i in first if i in a] == a[:3], "FIFO within a key, the held job first"
        server.stop()
        assert check_store(tmp_path / "data").returncode == 0
    finally:
        server.close()


def test_two_shards_keep_turns_per_queue(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    try:
        with pyqueue.Client(server.address, timeout=20) as client:
            topology = client.topology()
            assert topology is not None
            for shard in (0, 1):
                queue = queue_on(topology, shard)
                client.set_fair_weight(queue, "b", 2)
                a = [client.enqueue("t", queue=queue, fair_key="a").id for _ in range(6)]
                b = [client.enqueue("t", queue=queue, fair_key="b").id for _ in range(6)]
                assert client.fair_keys(queue).weights == {"b": 2}
                first = _turns(client, queue, 6)
                assert sum(1 for i in first if i in b) == 4 and first[:1] == a[:1], (shard, first)
    finally:
        server.close()


def test_an_app_takes_its_fair_key_from_an_argument(server: ServerProcess) -> None:
    app = pyqueue.App(server.address)

    @app.job(queue="k", fair_key="tenant", name="report")
    def report(tenant: str, month: int = 1) -> None: ...

    @app.job(queue="k", name="bill", fair_key=lambda tenant, month=1: f"{tenant}/{month}")
    def bill(tenant: str, month: int = 1) -> None: ...

    with pyqueue.Client(server.address, timeout=20) as client:
        assert client.get_job(report.enqueue("t-42", month=3).id).fair_key == "t-42"
        assert client.get_job(report.enqueue(tenant="t-7").id).fair_key == "t-7"
        assert client.get_job(bill.enqueue("t-1", 2).id).fair_key == "t-1/2"
        assert client.get_job(report.options(fair_key="fixed").enqueue("t-9").id).fair_key == "fixed"
    with pytest.raises(TypeError, match="no argument 'customer'"):

        @app.job(fair_key="customer", name="wrong")
        def wrong(tenant: str) -> None: ...


def test_the_cli_shows_keys_and_sets_weights(server: ServerProcess) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        result = pyqueue_command("--address", server.address, *args)
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    with pyqueue.Client(server.address, timeout=20) as client:
        for key in ["big"] * 5 + ["small"]:
            client.enqueue("t", queue="k", fair_key=key)
    table = run("queues", "--keys", "k", "--weight", "small=4").stdout
    assert "big" in table and "small" in table and "2 fair keys" in table, table
    shown = json.loads(run("queues", "--keys", "k", "--json").stdout)
    assert shown["weights"] == {"small": 4}
    assert [(k["fair_key"], k["waiting"], k["weight"]) for k in shown["keys"]] == [
        ("big", 5, 1),
        ("small", 1, 4),
    ]
    refused = pyqueue_command("--address", server.address, "queues", "--keys", "k", "--weight", "x")
    assert refused.returncode != 0 and "KEY=N" in refused.stderr


def test_metrics_count_the_keys_per_queue(server: ServerProcess) -> None:
    import urllib.request

    with pyqueue.Client(server.address, timeout=20) as client:
        for key in ("a", "b", "c", "a"):
            client.enqueue("t", queue="k", fair_key=key)
    with urllib.request.urlopen(f"http://{server.http_address}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    assert 'pyqueue_queue_fair_keys{queue="k"} 3.0' in text, [
        line for line in text.splitlines() if "fair" in line
    ]

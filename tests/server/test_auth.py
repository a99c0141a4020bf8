"""Tokens with rights (--auth-file), the whole matrix: every role against every call, on a queue its
grant covers and on one it does not, one process and sharded. A missing or unknown token is
UNAUTHENTICATED, a right not held is PERMISSION_DENIED naming the right and the queue, and neither
changes anything. The HTTP port asks for the same tokens, and every change is in the audit log."""

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from auth_files import GRANTS, write_auth_file
from harness import ServerProcess, pyqueue_command

import pyqueue
from pyqueue.tokens import hash_token

QUEUES = ("emails", "other")  # with two shards, "emails" and "other" live on different ones


@pytest.fixture(params=[1, 2], ids=["one-process", "two-shards"])
def secured(request, tmp_path: Path) -> Iterator[tuple[ServerProcess, dict[str, str]]]:  # type: ignore[no-untyped-def]
    secrets = write_auth_file(tmp_path / "auth.toml")
    server = ServerProcess(
        tmp_path / "data", "--shards", str(request.param), "--auth-file", str(tmp_path / "auth.toml")
    ).start()
    yield server, secrets
    server.close()


def _take(client: pyqueue.Client, queue: str, job_id: int) -> None:
    with client.take(queue) as stream:
        job = stream.next(timeout=30)  # the queue holds `job_id` at least
        assert job is not None and job.queue == queue
        job.ack()


def _pause(client: pyqueue.Client, queue: str, job_id: int) -> None:
    client.pause(queue)
    client.resume(queue)


def _limit(client: pyqueue.Client, queue: str, job_id: int) -> None:
    client.set_queue_limit(queue, max_running=5)
    client.set_queue_limit(queue)


def _cron(client: pyqueue.Client, queue: str, job_id: int) -> None:
    client.set_cron(
        [{"name": f"nightly-{queue}", "schedule": "0 0 1 1 *", "job": {"type": "t", "queue": queue}}]
    )
    client.delete_cron(f"nightly-{queue}")


def _by_key(client: pyqueue.Client, queue: str, job_id: int) -> None:
    with pytest.raises(pyqueue.NotFound):  # allowed, and no job holds the key
        client.job_by_key(queue, f"no-such-key-{job_id}")


# (call, the roles any one of which allows it, what it does given a client, a queue and a fresh job)
CALLS: list[tuple[str, tuple[str, ...], Callable[[pyqueue.Client, str, int], Any]]] = [
    ("enqueue", ("produce",), lambda c, q, j: c.enqueue("t", queue=q)),
    ("get", ("produce", "read"), lambda c, q, j: c.get_job(j)),
    ("get by key", ("produce", "read"), _by_key),
    ("wait", ("produce", "read"), lambda c, q, j: c.wait_job(j, timeout=0.05)),
    ("take", ("work",), _take),
    ("list", ("read",), lambda c, q, j: list(c.list_jobs(queues=[q]))),
    ("count", ("read",), lambda c, q, j: c.count_jobs(queues=[q])),
    ("count by id", ("read",), lambda c, q, j: c.count_jobs(ids=[j])),
    ("errors", ("read",), lambda c, q, j: c.job_errors(j)),
    ("update", ("admin",), lambda c, q, j: c.update_jobs({"priority": 7}, ids=[j])),
    ("retry", ("admin",), lambda c, q, j: c.retry_jobs(queues=[q])),
    ("cancel", ("admin",), lambda c, q, j: c.cancel(j)),
    ("delete", ("admin",), lambda c, q, j: c.delete_job(j)),
    ("pause", ("admin",), _pause),
    ("limit", ("admin",), _limit),
    ("cron", ("admin",), _cron),
]


def _allowed(name: str, roles: tuple[str, ...], queue: str) -> bool:
    return any(
        (role == granted_role or granted_role == "admin") and (pattern == "*" or pattern == queue)
        for granted_role, pattern in (g.split(":") for g in GRANTS[name])
        for role in roles
    )


def _state(root: pyqueue.Client) -> Any:
    """Everything a refused call must leave as it was."""
    jobs = [(j.id, j.queue, j.status, j.priority) for j in root.list_jobs()]
    queues = [(q.name, q.paused, q.limits) for q in root.queues()]
    return jobs, queues, [c.name for c in root.cron_entries()]


def test_every_role_against_every_call(secured) -> None:  # type: ignore[no-untyped-def]
    server, secrets = secured
    with pyqueue.Client(server.address, token=secrets["root"]) as root:
        for name in GRANTS:
            with pyqueue.Client(server.address, token=secrets[name]) as client:
                for call, roles, do in CALLS:
                    for queue in QUEUES:
                        fresh = root.enqueue("t", queue=queue).id
                        if _allowed(name, roles, queue):
                            do(client, queue, fresh)
                            continue
                        before = _state(root)
                        with pytest.raises(pyqueue.PermissionDenied) as refused:
                            do(client, queue, fresh)
                        assert f"{name!r} lacks the" in str(refused.value), refused.value
                        assert repr(queue) in str(refused.value), refused.value
                        assert _state(root) == before, f"{name} {call} on {queue} changed something"


def test_listings_show_what_the_token_may_read_and_metrics_need_read_everywhere(secured) -> None:  # type: ignore[no-untyped-def]
    server, secrets = secured
    with pyqueue.Client(server.address, token=secrets["root"]) as root:
        for queue in QUEUES:
            root.enqueue("t", queue=queue)
        assert "pyqueue_" in root.metrics()
        assert set(QUEUES) <= set(root.history().queues)
        root.set_cron(
            [
                {"name": f"nightly-{q}", "schedule": "0 0 1 1 *", "job": {"type": "t", "queue": q}}
                for q in QUEUES
            ]
        )
    with pyqueue.Client(server.address, token=secrets["reader"]) as reader:
        assert [q.name for q in reader.queues()] == ["emails"]
        assert [c.name for c in reader.cron_entries()] == ["nightly-emails"]
        assert reader.workers() == []
        with pyqueue.Client(server.address, token=secrets["root"]) as root, root.take("other") as stream:
            stream.next(timeout=30)  # the stream is open and serving "other"
            assert [w.queues for w in root.workers()] == [["other"]]
            assert reader.workers() == [], "a worker of a queue the token may not read is not shown"
        with pytest.raises(pyqueue.PermissionDenied, match=r"read right on every queue"):
            reader.metrics()
        with pytest.raises(pyqueue.PermissionDenied, match=r"read right on every queue"):
            reader.history()  # every queue's hour: the dashboard's charts ask as /metrics does
        with pytest.raises(pyqueue.PermissionDenied):
            reader.count_jobs()  # no queue named: every queue
    with pyqueue.Client(server.address, token=secrets["producer"]) as producer:
        for listing in (producer.queues, producer.cron_entries, producer.workers):
            with pytest.raises(pyqueue.PermissionDenied):
                listing()


def test_no_token_or_an_unknown_one_is_unauthenticated_and_changes_nothing(secured) -> None:  # type: ignore[no-untyped-def]
    server, secrets = secured
    for token in ("", "pq_not-a-token"):
        with pyqueue.Client(server.address, token=token) as stranger:
            with pytest.raises(pyqueue.Unauthenticated):
                stranger.enqueue("t", queue="emails")
            with pytest.raises(pyqueue.Unauthenticated), stranger.take("emails") as stream:
                stream.next(timeout=10)
    with pyqueue.Client(server.address, token=secrets["root"]) as root:
        assert root.count_jobs(queues=list(QUEUES)) == 0


def _http(url: str, token: str | None = None, method: str = "GET", body: object = None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if method == "POST":
        headers["X-Pyqueue-Action"] = "1"
        headers["Content-Type"] = "application/json"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=20) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_http_port_asks_for_the_same_tokens(secured) -> None:  # type: ignore[no-untyped-def]
    server, secrets = secured
    base = f"http://{server.http_address}"
    with pyqueue.Client(server.address, token=secrets["root"]) as root:
        job = root.enqueue("t", queue="emails").id
    assert _http(f"{base}/healthz")[0] == 200  # load balancers need no token
    assert _http(f"{base}/")[0] == 200  # the page itself; its API calls need one
    assert _http(f"{base}/metrics")[0] == 401
    assert _http(f"{base}/metrics", "pq_wrong")[0] == 401
    assert _http(f"{base}/metrics", secrets["reader"])[0] == 403
    assert _http(f"{base}/metrics", secrets["root"])[0] == 200
    assert _http(f"{base}/api/queues")[0] == 401
    assert _http(f"{base}/api/queues", secrets["producer"])[0] == 403
    status, body = _http(f"{base}/api/queues", secrets["reader"])
    assert status == 200 and [q["name"] for q in json.loads(body)] == ["emails"]
    assert _http(f"{base}/api/jobs/{job}/delete", secrets["reader"], "POST")[0] == 403
    assert _http(f"{base}/api/jobs/{job}/delete", secrets["admin"], "POST")[0] == 200
    # Jobs over HTTP/JSON: the produce right on the job's queue.
    status, body = _http(f"{base}/v1/jobs", None, "POST", {"type": "t", "queue": "emails"})
    assert (status, json.loads(body)["code"]) == (401, "UNAUTHENTICATED"), body
    status, body = _http(f"{base}/v1/jobs", secrets["producer"], "POST", {"type": "t", "queue": "other"})
    assert (status, json.loads(body)["code"]) == (403, "PERMISSION_DENIED"), body
    status, body = _http(f"{base}/api/queues")
    assert (status, json.loads(body)["code"]) == (401, "UNAUTHENTICATED"), body
    status, body = _http(f"{base}/v1/jobs", secrets["producer"], "POST", {"type": "t", "queue": "emails"})
    assert status == 200
    assert _http(f"{base}/v1/jobs/{json.loads(body)['id']}", secrets["worker"])[0] == 403
    assert _http(f"{base}/v1/jobs/{json.loads(body)['id']}", secrets["producer"])[0] == 200
    # Workflows over HTTP: the produce right on every queue of the workflow.
    flow = {"group": [{"type": "t", "queue": "emails"}], "on_complete": {"type": "r", "queue": "other"}}
    status, body = _http(f"{base}/v1/workflows", secrets["producer"], "POST", flow)
    assert (status, json.loads(body)["code"]) == (403, "PERMISSION_DENIED"), body
    flow["on_complete"] = {"type": "r", "queue": "emails"}
    status, body = _http(f"{base}/v1/workflows", secrets["producer"], "POST", flow)
    assert status == 200, body


def test_changes_are_logged_with_the_token_name_and_the_address(secured) -> None:  # type: ignore[no-untyped-def]
    server, secrets = secured
    with pyqueue.Client(server.address, token=secrets["admin"]) as admin:
        job = admin.enqueue("t", queue="emails").id
        admin.delete_job(job)
        admin.pause("emails")
    for call in ("DeleteJobs", "PauseQueue"):
        line = server.wait_for(f"{call} by admin from ")
        assert "127.0.0.1" in line, line
    # Logged once, where the change is made: a sharded server's router passes the client's address on.
    assert len([line for line in server.lines if "PauseQueue by admin" in line]) == 1


def test_the_audit_log_says_each_outcome_and_every_refusal_of_rights(secured) -> None:  # type: ignore[no-untyped-def]
    server, secrets = secured
    with pyqueue.Client(server.address, token=secrets["admin"]) as admin:
        job = admin.enqueue("t", {"card": "4111-secret"}, queue="emails").id
        admin.update_job(job, payload={"card": "5500-secret"})
        with pytest.raises(pyqueue.InvalidArgument):
            admin.update_job(job, priority=70_000)
        with (
            pyqueue.Client(server.address, token=secrets["reader"]) as reader,
            pytest.raises(pyqueue.PermissionDenied),
        ):
            reader.delete_job(job)
        admin.delete_job(job)
    with (
        pyqueue.Client(server.address, token=secrets["producer"]) as producer,
        pytest.raises(pyqueue.PermissionDenied),
    ):
        producer.enqueue("t", queue="other")
    done = server.wait_for("DeleteJobs by admin from ")
    assert ": done (1 changed, 0 refused)" in done, done
    server.wait_for("UpdateJobs by admin from ")
    updates = [line for line in server.lines if "UpdateJobs by admin" in line]
    assert any("done (1 changed" in line and "<left out>" in line for line in updates), updates
    assert any("refused INVALID_ARGUMENT" in line for line in updates), updates
    assert "refused PERMISSION_DENIED" in server.wait_for("DeleteJobs by reader from ")
    assert "refused PERMISSION_DENIED" in server.wait_for("Enqueue by producer from ")
    assert not [line for line in server.lines if "secret" in line], "no payload reaches the log"


def test_token_create_prints_a_working_token_and_its_entry(tmp_path: Path) -> None:
    made = pyqueue_command("token", "create", "ci", "--grant", "produce:builds", "--grant", "read:*")
    assert made.returncode == 0, made.stderr
    token = made.stdout.split("token: ", 1)[1].split()[0]
    entry = made.stdout.split("# add to the auth file:\n", 1)[1]
    (tmp_path / "auth.toml").write_text(entry)
    assert token not in entry, "the file holds the hash only"
    server = ServerProcess(tmp_path / "data", "--auth-file", str(tmp_path / "auth.toml")).start()
    try:
        with pyqueue.Client(server.address, token=token) as client:
            client.enqueue("t", queue="builds")
            assert client.count_jobs(queues=["builds"]) == 1
            with pytest.raises(pyqueue.PermissionDenied, match="produce right on queue 'other'"):
                client.enqueue("t", queue="other")
    finally:
        server.close()
    bad = pyqueue_command("token", "create", "x", "--grant", "owner:*")
    assert bad.returncode != 0 and "ROLE:PATTERN" in bad.stderr


def test_unique_keys_scoped_to_a_queue_cannot_be_squatted_from_another(tmp_path: Path) -> None:
    secrets = write_auth_file(tmp_path / "auth.toml")
    (tmp_path / "auth.toml").write_text(
        (tmp_path / "auth.toml").read_text()
        + f'[[token]]\nname = "other-team"\nsha256 = "{hash_token("pq_other")}"\ngrants = ["produce:other"]\n'
    )
    server = ServerProcess(
        tmp_path / "data", "--auth-file", str(tmp_path / "auth.toml"), "--unique-per-queue"
    ).start()
    try:
        with pyqueue.Client(server.address, token="pq_other") as squatter:
            squatted = squatter.enqueue("t", queue="other", unique_key="invoice-1")
        with pyqueue.Client(server.address, token=secrets["producer"]) as owner:
            mine = owner.enqueue("t", queue="emails", unique_key="invoice-1")
            assert not mine.duplicate and mine.id != squatted.id, "another queue's key did not block it"
            again = owner.enqueue("t", queue="emails", unique_key="invoice-1")
            assert again.duplicate and again.id == mine.id, "within the queue, the key holds"
            shown = owner.get_job(mine.id)
            assert (shown.unique_key, shown.unique_in_queue) == ("invoice-1", True)
            with pytest.raises(pyqueue.InvalidArgument, match="unique key must be printable"):
                owner.enqueue("t", queue="emails", unique_key="invoice\x1f1")
    finally:
        server.close()


def test_keys_hold_per_queue_by_default_and_across_queues_when_asked(tmp_path: Path) -> None:
    default = ServerProcess(tmp_path / "per-queue").start()
    try:
        with pyqueue.Client(default.address) as client:
            a = client.enqueue("t", queue="a", unique_key="k")
            b = client.enqueue("t", queue="b", unique_key="k")
            assert not b.duplicate and b.id != a.id, "another queue's key does not block it"
            assert client.enqueue("t", queue="b", unique_key="k").id == b.id
    finally:
        default.close()
    across = ServerProcess(tmp_path / "across", "--unique-across-queues").start()
    try:
        with pyqueue.Client(across.address) as client:
            everywhere = client.enqueue("t", queue="a", unique_key="k")
            scoped = client.enqueue("t", queue="b", unique_key="k", unique_in_queue=True)
            assert not scoped.duplicate and scoped.id != everywhere.id
            assert client.enqueue("t", queue="b", unique_key="k", unique_in_queue=True).id == scoped.id
            assert client.enqueue("t", queue="b", unique_key="k").id == everywhere.id  # the global key
    finally:
        across.close()
    refused = pyqueue_command(
        "serve",
        "--data-dir",
        str(tmp_path / "x"),
        "--shards",
        "2",
        "--unique-across-queues",
        "--listen",
        "127.0.0.1:0",
    )
    assert refused.returncode != 0 and "--unique-across-queues needs --shards 1" in refused.stderr


def test_a_refused_fan_out_is_an_answer_not_an_error_in_the_log(tmp_path: Path) -> None:
    secrets = write_auth_file(tmp_path / "auth.toml")
    server = ServerProcess(
        tmp_path / "data", "--shards", "2", "--auth-file", str(tmp_path / "auth.toml")
    ).start()
    try:
        with pyqueue.Client(server.address, token=secrets["reader"]) as reader:
            for _ in range(20):  # every shard refuses: the call spans queues the token cannot read
                with pytest.raises(pyqueue.PermissionDenied):
                    reader.count_jobs(types=["t"])
        with pyqueue.Client(server.address, token=secrets["root"]) as root:
            root.enqueue("marker", queue="emails")
            assert root.count_jobs(types=["marker"]) == 1  # a positive marker: the log is caught up
        noise = [line for line in server.lines if "Abort already called" in line or "Traceback" in line]
        assert noise == [], "".join(noise[:5])
        assert len("".join(server.lines)) < 20_000, "a refusal costs the log at most an audit line"
    finally:
        server.close()

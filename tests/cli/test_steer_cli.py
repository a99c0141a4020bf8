"""`pyqueue jobs | queues | update | retry | delete | pause | resume` against a real server."""

import json
import subprocess
import sys

import pyqueue


def run(server, *args: str, ok: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    result = subprocess.run(
        [sys.executable, "-m", "pyqueue", "--address", server.address, *args],
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
    )
    assert (result.returncode == 0) == ok, result.stdout + result.stderr
    return result


def test_jobs_lists_as_a_table_and_as_json(server, client: pyqueue.Client) -> None:  # type: ignore[no-untyped-def]
    a = client.enqueue("send", queue="mail").id
    client.enqueue("resize", queue="media")
    table = run(server, "jobs", "--queue", "mail").stdout
    assert str(a) in table and "send" in table and "resize" not in table
    listed = json.loads(run(server, "jobs", "--status", "ready", "--json", "--desc").stdout)
    assert [j["type"] for j in listed] == ["resize", "send"]


def test_queues_shows_counts(server, client: pyqueue.Client) -> None:  # type: ignore[no-untyped-def]
    client.enqueue("t", queue="mail")
    client.enqueue("t", queue="mail", delay=600)
    (mail,) = json.loads(run(server, "queues", "--json").stdout)
    assert mail == {"name": "mail", "paused": False, "counts": {"ready": 1, "scheduled": 1}}
    assert "mail" in run(server, "queues").stdout


def test_tables_fit_80_columns_and_never_cut_a_status_or_a_type(server, client: pyqueue.Client) -> None:  # type: ignore[no-untyped-def]
    import os

    long_type = "reports.build_the_monthly_report_for_one_customer"
    client.enqueue(long_type, queue="reports-eu-west", delay=3600)
    client.enqueue("t", queue="mail")
    env = {**os.environ, "COLUMNS": "80"}
    for command in ("jobs", "queues"):
        out = subprocess.run(
            [sys.executable, "-m", "pyqueue", "--address", server.address, command],
            capture_output=True, text=True, timeout=60, env=env,
        ).stdout  # fmt: skip
        assert "…" not in out, out
        assert all(len(line) <= 80 for line in out.splitlines()), out
        assert "scheduled" in out and "ready" in out, out
        if command == "jobs":  # the type is whole: folded onto the next line of its cell, never cut
            lines = out.splitlines()
            at = next(n for n, line in enumerate(lines) if "reports.build" in line)
            column = lines[at].index("reports.build")
            pieces = [line[column:].split()[0] for line in lines[at : at + 3] if line[column:].strip()]
            assert long_type in {"".join(pieces[:k]) for k in range(1, len(pieces) + 1)}, out


def test_update_and_delete(server, client: pyqueue.Client) -> None:  # type: ignore[no-untyped-def]
    job_id = client.enqueue("t", delay=600).id
    run(server, "update", str(job_id), "--priority", "3", "--now")
    job = client.get_job(job_id)
    assert (job.priority, job.status) == (3, "ready")
    for _ in range(3):
        client.enqueue("t", queue="junk")
    refused = run(server, "delete", "--queue", "junk", stdin="n\n", ok=False)
    assert "Aborted" in refused.stderr
    assert client.count_jobs(queue="junk") == 3
    assert "3 changed" in run(server, "delete", "--queue", "junk", "--yes").stdout
    assert client.count_jobs(queue="junk") == 0
    assert "give job ids, or a filter" in run(server, "delete", ok=False).stderr


def test_pause_and_resume(server, client: pyqueue.Client) -> None:  # type: ignore[no-untyped-def]
    client.enqueue("t", queue="mail")
    assert "paused" in run(server, "pause", "mail").stdout
    assert client.queues()[0].paused
    assert "running" in run(server, "resume", "mail").stdout
    assert not {q.name: q.paused for q in client.queues()}.get("mail", False)


def test_retry_runs_the_dead_jobs_of_a_queue_again_after_a_confirmation(
    server, client: pyqueue.Client
) -> None:  # type: ignore[no-untyped-def]
    for _ in range(2):
        client.enqueue("t", queue="mail", max_retries=0)
    with client.take("mail", prefetch=2) as stream:
        for _ in range(2):
            job = stream.next(timeout=30)
            assert job is not None
            job.fail("no")
    assert client.count_jobs(queue="mail", status="dead") == 2
    assert "Aborted" in run(server, "retry", "--queue", "mail", stdin="n\n", ok=False).stderr
    assert client.count_jobs(queue="mail", status="dead") == 2
    assert "2 changed" in run(server, "retry", "--queue", "mail", "--yes").stdout
    assert client.count_jobs(queue="mail", status="ready") == 2
    assert "give job ids, or a filter" in run(server, "retry", ok=False).stderr


def test_pausing_a_queue_that_does_not_exist_asks_first(server, client: pyqueue.Client) -> None:  # type: ignore[no-untyped-def]
    client.enqueue("t", queue="mail")
    refused = run(server, "pause", "mial", stdin="n\n", ok=False)  # a typo
    assert "no queue named 'mial'" in refused.stderr and "Aborted" in refused.stderr
    assert {q.name for q in client.queues()} == {"mail"}, "nothing was created"
    assert "paused" in run(server, "pause", "later", "--yes").stdout
    assert {q.name: q.paused for q in client.queues()}["later"]


def test_limit_sets_shows_and_clears_a_queues_limits(server, client: pyqueue.Client) -> None:  # type: ignore[no-untyped-def]
    assert (
        "mail: max 5 running, 10/s, max 2 running per key"
        in run(
            server, "limit", "mail", "--max-running", "5", "--rate", "10/s", "--key-max-running", "2"
        ).stdout
    )
    (mail,) = json.loads(run(server, "queues", "--json").stdout)
    assert mail["limits"] == {"max_running": 5, "rate_per_s": 10.0, "burst": 0.0, "key_max_running": 2}
    assert "is not N/s" in run(server, "limit", "mail", "--rate", "fast", ok=False).stderr
    assert (
        "give --max-running, --rate and/or --key-max-running, or --clear"
        in run(server, "limit", "mail", ok=False).stderr
    )
    assert "mail: no limits" in run(server, "limit", "mail", "--clear").stdout
    assert all(q.limits == "" for q in client.queues())


def test_cancelled_jobs_can_be_listed_and_counted(server, client: pyqueue.Client) -> None:  # type: ignore[no-untyped-def]
    job = client.enqueue("t", queue="mail")
    client.cancel(job.id)
    listed = json.loads(run(server, "jobs", "--queue", "mail", "--status", "cancelled", "--json").stdout)
    assert [j["id"] for j in listed] == [str(job.id)]
    (mail,) = json.loads(run(server, "queues", "--json").stdout)
    assert mail["counts"] == {"cancelled": 1}

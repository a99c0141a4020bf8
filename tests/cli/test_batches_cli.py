"""`pyqueue batches` and `pyqueue batch ID` (--retry, --cancel) against a real server."""

import json

from test_steer_cli import run

import pyqueue


def test_batches_and_batch_show_progress_and_retry_and_cancel(server, client: pyqueue.Client) -> None:  # type: ignore[no-untyped-def]
    members = [pyqueue.Task({"type": "resize", "queue": "images", "max_retries": 0}) for _ in range(2)]
    done = pyqueue.Task({"type": "report", "queue": "mail"})
    run_ = client.enqueue_workflow(pyqueue.Batch(members, on_complete=done, name="album"))
    with client.take("images", prefetch=2) as stream:
        first, second = stream.next(timeout=30), stream.next(timeout=30)
        assert first is not None and second is not None
        first.ack()
        second.fail("unreadable")
    table = run(server, "batches").stdout
    assert str(run_.batch_id) in table and "album" in table and "complete" in table
    (listed,) = json.loads(run(server, "batches", "--json").stdout)
    assert (listed["completed"], listed["dead"], listed["fired"]) == (1, 1, ["complete"])

    shown = run(server, "batch", str(run_.batch_id)).stdout
    assert f"dead jobs: {second.id}" in shown and "--retry" in shown
    retried = run(server, "batch", str(run_.batch_id), "--retry", "--json").stdout
    assert "retried 1 jobs" in retried
    assert json.loads(retried.split("\n", 1)[1])["pending"] == 1

    # What has not run: the retried member, and the on_complete callback it fired (still waiting)
    assert "cancelled 2 jobs" in run(server, "batch", str(run_.batch_id), "--cancel").stdout
    after = json.loads(run(server, "batch", str(run_.batch_id), "--json").stdout)
    assert after["workflow_cancelled"] and after["pending"] == 0 and after["cancelled"] == 1

    missing = run(server, "batch", "12345", ok=False)
    assert "NOT_FOUND" in missing.stderr

"""Chains, groups with .then (chords) and batches with callbacks, through a real two-shard server
and `drain`: each step is handed what the one before gave, across shards, once."""

import time
from typing import Any

import flow_app
import pytest
from flow_app import build_album, caption, celebrate, cover, publish, ran, report, resize, send_digest, split

import pyqueue
from pyqueue.testing import drain

QUEUES = ["images", "albums", "publish", "mail"]


def run_until(app: pyqueue.App, done: Any, timeout: float = 60) -> None:
    """Drain the queues until `done()` holds (the relay carries steps between shards meanwhile)."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not done after {timeout}s; ran: {ran()}"
        drain(app, QUEUES, idle_s=0.1)


def names() -> list[str]:
    return [entry[0] for entry in ran()]


def test_a_group_then_a_chain_hands_results_on_across_shards(flows: pyqueue.App) -> None:
    images = ["a.jpg", "b.jpg", "c.jpg"]
    workflow = flows.group(resize.s(i) for i in images).then(build_album.s("holiday")).then(publish.s())
    run = workflow.enqueue()
    assert run.batch_id == run.workflow_id
    run_until(flows, lambda: "publish" in names())
    entries = ran()
    album = next(e for e in entries if e[0] == "build_album")
    assert album[1:] == [["small-a.jpg", "small-b.jpg", "small-c.jpg"], "holiday"]  # in order
    assert next(e for e in entries if e[0] == "publish")[1] == {"album": "holiday", "size": 3}
    assert names().count("build_album") == 1 and names().count("publish") == 1


def test_a_batch_calls_on_complete_with_its_dead_jobs_and_on_success_once_they_are_retried(
    flows: pyqueue.App,
) -> None:
    batch = pyqueue.Batch(
        [resize.s("a.jpg"), resize.s("bad.jpg")],
        on_complete=report.s("ops"),
        on_success=celebrate.s(),
        name="thumbnails",
    )
    run = batch.enqueue()
    run_until(flows, lambda: "report" in names())
    status = next(e for e in ran() if e[0] == "report")[1]
    assert status["completed"] == 1 and status["dead"] == 1 and len(status["dead_jobs"]) == 1
    info = flows.client.batch(run.batch_id)
    assert (info.pending, info.completed, info.dead, info.fired) == (0, 1, 1, ("complete",))
    assert info.name == "thumbnails" and info.dead_jobs == tuple(status["dead_jobs"])
    assert "celebrate" not in names()

    # The cause is mended, the dead job retried: the batch is pending again, then succeeds.
    flow_app.BROKEN.clear()
    assert flows.client.retry_workflow(run.workflow_id).changed == list(info.dead_jobs)
    run_until(flows, lambda: "celebrate" in names())
    assert names().count("report") == 1 and names().count("celebrate") == 1


def test_a_call_that_does_not_fit_its_function_is_refused_at_enqueue(flows: pyqueue.App) -> None:
    with pytest.raises(TypeError, match="resize"):
        flows.chain(resize.s("a.jpg", "extra")).enqueue()
    with pytest.raises(TypeError, match="build_album"):  # handed a result, plus two: one too many
        flows.chain(resize.s("a.jpg"), build_album.s("x", "y")).enqueue()
    with pytest.raises(TypeError, match="a member is a job or a chain of jobs"):
        pyqueue.Group([flows.chain(resize.s("a"), pyqueue.Group([publish.s()]))])
    with pytest.raises(TypeError, match="not a group"):
        pyqueue.Group([resize.s("a")], on_success=pyqueue.Group([resize.s("b")]))
    with pytest.raises(TypeError, match="must be a job"):
        flows.chain(resize.s("a"), 42)  # type: ignore[arg-type]


def test_a_group_inside_a_chain_gets_the_step_before_and_hands_its_results_on(flows: pyqueue.App) -> None:
    workflow = flows.chain(cover.s("trip"), flows.group([resize.s(), resize.s()]), build_album.s("trip"))
    run = workflow.enqueue()
    assert run.batch_id == 0 and run.job_id  # the first step is a job, made at once on its shard
    run_until(flows, lambda: "build_album" in names())
    assert [e[1:] for e in ran() if e[0] == "resize"] == [["trip.jpg"], ["trip.jpg"]]
    assert next(e for e in ran() if e[0] == "build_album")[1] == ["small-trip.jpg", "small-trip.jpg"]


def test_a_job_adds_jobs_to_its_own_batch_and_the_callback_waits_for_them(flows: pyqueue.App) -> None:
    run = pyqueue.Batch([split.s("book", 3)], on_complete=report.s("editor")).enqueue()
    run_until(flows, lambda: "report" in names())
    assert names().count("resize") == 3 and names().index("report") > max(
        i for i, n in enumerate(names()) if n == "resize"
    )
    status = next(e for e in ran() if e[0] == "report")[1]
    assert status["total"] == 4 and status["completed"] == 4
    with pytest.raises((pyqueue.FailedPrecondition, pyqueue.NotFound), match="finished"):
        flows.client.add_to_batch(run.batch_id, [resize.s("late.jpg")])


def test_folded_events_reach_the_function_as_one_list(flows: pyqueue.App) -> None:
    later = send_digest.options(delay=30)  # it waits: everything of the next half minute joins it
    jobs = [later.fold({"event": i}, key="daily", max_items=3) for i in range(4)]
    assert [j.duplicate for j in jobs] == [False, True, True, False]  # the fourth starts a new one
    assert jobs[1].id == jobs[2].id == jobs[0].id != jobs[3].id
    flows.client.update_jobs({"run_at": None}, ids=[jobs[0].id, jobs[3].id])  # due now
    run_until(flows, lambda: names().count("send_digest") == 2)
    digests = sorted((e[1] for e in ran() if e[0] == "send_digest"), key=len, reverse=True)
    assert digests == [[{"event": 0}, {"event": 1}, {"event": 2}], [{"event": 3}]]
    with pytest.raises(TypeError, match="build_album"):
        build_album.fold("x", key="k")  # called with one list: build_album needs two arguments


def test_cancelling_a_workflow_cancels_its_jobs_on_every_shard_and_fires_nothing(flows: pyqueue.App) -> None:
    members = [resize.s("a.jpg"), resize.s("b.jpg"), build_album.si(["x"], "y")]  # shards 0, 0 and 1
    run = pyqueue.Batch(members, on_complete=report.s("ops")).enqueue()
    result = flows.client.cancel_workflow(run.workflow_id)
    assert not result.rejected

    def all_cancelled() -> bool:
        info = flows.client.batch(run.batch_id)
        return info.cancelled == 3

    deadline = time.monotonic() + 60
    while not all_cancelled():  # the member on the other shard may reach it after the cancel
        assert time.monotonic() < deadline
        time.sleep(0.05)
    info = flows.client.batch(run.batch_id)
    assert info.workflow_cancelled and info.fired == () and info.pending == 0
    drain(flows, QUEUES)
    assert ran() == []
    assert flows.client.count_jobs(queues=["mail"]) == 0  # no callback was made


def test_a_group_of_chains_counts_each_chain_once_and_hands_its_last_result_on(flows: pyqueue.App) -> None:
    # Celery's group of chains: each chain is one member, done when its last job is, across shards.
    workflow = flows.group(
        [flows.chain(resize.s("a.jpg"), caption.s()), resize.s("b.jpg")], name="captioned"
    ).then(build_album.s("holiday"))
    workflow.enqueue()
    run_until(flows, lambda: "build_album" in names())
    album = next(e for e in ran() if e[0] == "build_album")
    assert album[1:] == [["small-a.jpg (captioned)", "small-b.jpg"], "holiday"], "in member order"
    assert names().count("build_album") == 1 and names().count("caption") == 1


def test_a_chain_member_that_dies_is_dead_in_its_batch_and_goes_on_once_retried(flows: pyqueue.App) -> None:
    batch = pyqueue.Batch(
        [flows.chain(resize.s("bad.jpg"), caption.s()), resize.s("a.jpg")],
        on_complete=report.s("ops"),
        on_success=celebrate.s(),
        keep=3600,  # its counts are read once it has succeeded
    )
    run = batch.enqueue()
    run_until(flows, lambda: "report" in names())
    info = flows.client.batch(run.batch_id)
    assert (info.total, info.completed, info.dead) == (2, 1, 1), "the chain is one member"
    assert "caption" not in names(), "the chain stopped at its dead job"

    flow_app.BROKEN.clear()
    assert flows.client.retry_workflow(run.workflow_id).changed == list(info.dead_jobs)
    run_until(flows, lambda: "celebrate" in names())
    assert names().count("caption") == 1 and names().count("celebrate") == 1
    info = flows.client.batch(run.batch_id)
    assert (info.total, info.completed, info.dead, info.pending) == (2, 2, 0, 0)

"""The hour of steps behind the dashboard's charts, driven by an injected clock."""

from pyqueue.engine.history import StepCounts
from pyqueue.server.history import merge, shard_history
from pyqueue.v1 import queue_pb2 as pb

EVERY = pb.HistoryRequest()

BOUNDS = (0.01, 0.1, 1.0)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_events_and_waits_land_in_the_step_of_their_time_and_the_window_slides() -> None:
    clock = Clock(1000.0)  # step 100 of 10 s
    history = StepCounts(BOUNDS, step_seconds=10, steps=3, clock=clock)
    history.record({("enqueued", "a"): 5, ("lost", "a"): 1}, {"a": [0.005, 0.5, 7.0]})
    clock.now = 1010.0
    history.record({("completed", "a"): 2, ("enqueued", "b"): 1}, {})

    last, queues = history.read()
    assert last == 101
    assert queues["a"].events["enqueued"] == [0, 5, 0]
    assert queues["a"].events["completed"] == [0, 0, 2]
    assert queues["a"].waits[1] == [1, 0, 1, 1]  # 5 ms, 0.5 s, and 7 s past the last bound
    assert queues["b"].events["enqueued"] == [0, 0, 1]

    clock.now = 1030.0  # step 103: a's events of step 100 and 101 have left the window
    last, queues = history.read()
    assert (last, queues["a"].events["completed"]) == (103, [2, 0, 0])
    clock.now = 1100.0
    assert history.read() == (110, {})  # idle for a whole window: the queues are let go
    assert history._queues == {}


def test_shards_answers_merge_by_step_even_when_one_answered_a_step_earlier() -> None:
    clock = Clock(1000.0)
    one, two = (StepCounts(BOUNDS, step_seconds=10, steps=3, clock=clock) for _ in range(2))
    one.record({("enqueued", "a"): 1}, {"a": [0.05]})
    two.record({("enqueued", "b"): 4}, {})
    early = shard_history(two, EVERY)  # read at step 100
    clock.now = 1010.0
    one.record({("enqueued", "a"): 2}, {})
    merged = merge([shard_history(one, EVERY), early])

    assert merged.last_step == 101
    by_queue = {q.queue: q for q in merged.queues}
    assert list(by_queue["a"].enqueued) == [0, 1, 2]
    assert list(by_queue["b"].enqueued) == [0, 4, 0]  # shifted one step older, into its place
    assert list(by_queue["a"].waits) == [0] * 4 + [0, 1, 0, 0] + [0] * 4


def test_past_the_queue_cap_the_rest_are_added_up_under_one_name() -> None:
    from pyqueue.engine.history import OTHER_QUEUES

    history = StepCounts(BOUNDS, step_seconds=10, steps=3, clock=Clock(1000.0), max_queues=2)
    history.record({("enqueued", f"q{i}"): 1 for i in range(5)}, {})
    _, queues = history.read()
    assert set(queues) == {"q0", "q1", OTHER_QUEUES}  # the first two by name, the rest in one
    assert sum(queues[OTHER_QUEUES].events["enqueued"]) == 3


def test_a_chart_asks_for_one_queue_or_the_total_kept_ready() -> None:
    clock = Clock(1000.0)
    one, two = (StepCounts(BOUNDS, step_seconds=10, steps=3, clock=clock) for _ in range(2))
    one.record({("enqueued", "a"): 1, ("enqueued", "c"): 5}, {"a": [0.05]})
    two.record({("enqueued", "b"): 4}, {"b": [0.5]})
    early = shard_history(two, pb.HistoryRequest(total=True))  # read at step 100
    clock.now = 1010.0
    one.record({("enqueued", "a"): 2}, {})

    total = merge([shard_history(one, pb.HistoryRequest(total=True)), early])
    assert not total.queues and list(total.queue_names) == ["a", "b", "c"]
    assert list(total.total.enqueued) == [0, 10, 2]  # b's 4 shifted into its step
    assert list(total.total.waits) == [0] * 4 + [0, 1, 1, 0] + [0] * 4

    only_a = merge(
        [shard_history(one, pb.HistoryRequest(queue="a")), shard_history(two, pb.HistoryRequest(queue="a"))]
    )
    assert [q.queue for q in only_a.queues] == ["a"] and list(only_a.queues[0].enqueued) == [0, 1, 2]
    assert list(only_a.queue_names) == ["a", "b", "c"]
    assert not only_a.HasField("total")

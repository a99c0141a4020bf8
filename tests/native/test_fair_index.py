"""The fair-share ready index against a model written to be read, not to be fast.

Hypothesis drives both with random enqueues (with and without fair keys, over priorities),
claims, fails (the job is back, same id), acks, deletes, weight changes and restarts (a fresh
index loaded from what is left, the weights applied again, as the engine does at start); every
claim must return exactly the model's jobs in the model's order.

The model is stride scheduling said plainly: each key has a pass; the next job is the most urgent
priority's head with the lowest pass (ties by id), the jobs without a key bidding as one key; a
key's pass moves on by STRIDE / weight when it has a turn, and a key that was idle joins at the
pass of the last turn given (so it cannot bank turns while it had nothing waiting). The unkeyed
jobs' turns count from the lane's first keyed job on: a lane that never saw a fair key pays
nothing for fairness, so the first key to come bids at the unkeyed jobs' pass (ties by id)."""

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pyqueue import _native

STRIDE = 720_720 << 16
QUEUE = "q"
KEYS = [None, "a", "b", "c"]  # None: no fair key
WEIGHED = ["a", "b", "c", ""]  # "": the weight of the jobs without a key
Job = tuple[int, int]  # (priority, id)


class Model:
    def __init__(self, weights: dict[str, int]) -> None:
        self.weights = weights
        self.groups: dict[str, tuple[set[Job], int]] = {}
        self.plain: set[Job] = set()
        self.vtime = 0
        self.plain_pass = 0
        self.keyed_seen = False  # the lane has had a job with a fair key since it was made

    def stride(self, key: str) -> int:
        return STRIDE // self.weights.get(key, 1)

    def insert(self, job: Job, key: str | None) -> None:
        if key is None:
            self.plain.add(job)
            return
        self.keyed_seen = True
        jobs, pass_ = self.groups.get(key, (set(), self.vtime))
        jobs.add(job)
        self.groups[key] = (jobs, pass_)

    def remove(self, job: Job) -> None:
        self.plain.discard(job)
        for key, (jobs, _) in list(self.groups.items()):
            jobs.discard(job)
            if not jobs:
                del self.groups[key]

    def claim_one(self) -> int | None:
        bids: list[tuple[int, int, int, str | None]] = []
        if self.plain:
            p, i = min(self.plain)
            bids.append((p, max(self.plain_pass, self.vtime), i, None))
        for name, (jobs, pass_) in self.groups.items():
            p, i = min(jobs)
            bids.append((p, pass_, i, name))
        if not bids:
            return None
        p, pass_, i, key = min(bids, key=lambda bid: bid[:3])
        if key is None:
            self.plain.remove((p, i))
            if self.keyed_seen:
                self.vtime = pass_
                self.plain_pass = pass_ + self.stride("")
        else:
            jobs, _ = self.groups[key]
            jobs.remove((p, i))
            self.vtime = max(self.vtime, pass_)
            if jobs:
                self.groups[key] = (jobs, pass_ + self.stride(key))
            else:
                del self.groups[key]
        return i


class FairIndexMatchesTheModel(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.weights: dict[str, int] = {}
        self.ready: dict[int, tuple[int, str | None]] = {}  # id -> (priority, key), waiting
        self.flight: dict[int, tuple[int, str | None]] = {}
        self.next_id = 1
        self.fresh_index()

    def fresh_index(self) -> None:
        self.index = _native.ReadyIndex()
        self.model = Model(self.weights)
        for key, weight in self.weights.items():
            self.index.set_fair_weight(QUEUE, key, weight)
        self.selection = self.index.select([QUEUE])

    @rule(priority=st.sampled_from([0, 1, 2]), key=st.sampled_from(KEYS), count=st.integers(1, 6))
    def enqueue(self, priority: int, key: str | None, count: int) -> None:
        for _ in range(count):
            job_id, self.next_id = self.next_id, self.next_id + 1
            self.put(job_id, priority, key)

    def put(self, job_id: int, priority: int, key: str | None) -> None:
        self.ready[job_id] = (priority, key)
        self.model.insert((priority, job_id), key)
        if key is None:
            self.index.insert(QUEUE, priority, job_id)
        else:
            self.index.insert_fair(QUEUE, priority, job_id, key)

    @rule(n=st.integers(1, 8))
    def claim(self, n: int) -> None:
        expected = [i for i in (self.model.claim_one() for _ in range(n)) if i is not None]
        assert self.selection.claim(n) == expected
        for job_id in expected:
            self.flight[job_id] = self.ready.pop(job_id)

    @precondition(lambda self: self.flight)
    @rule(data=st.data(), back=st.booleans())
    def end(self, data: st.DataObject, back: bool) -> None:
        """An ack (the job is done) or a fail (it is ready again, same id and key)."""
        job_id = data.draw(st.sampled_from(sorted(self.flight)))
        priority, key = self.flight.pop(job_id)
        if back:
            self.put(job_id, priority, key)

    @precondition(lambda self: self.ready)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.ready)))
        priority, key = self.ready.pop(job_id)
        self.model.remove((priority, job_id))
        if key is not None:
            assert not self.index.remove(QUEUE, priority, job_id, key + "-other"), "another key's"
        assert self.index.remove(QUEUE, priority, job_id, key or "")

    @rule(key=st.sampled_from(WEIGHED), weight=st.sampled_from([1, 2, 3, 7, 10_000]))
    def weigh(self, key: str, weight: int) -> None:
        if weight == 1:
            self.weights.pop(key, None)
        else:
            self.weights[key] = weight
        self.index.set_fair_weight(QUEUE, key, weight)

    @rule()
    def restart(self) -> None:
        """What a kill -9 leaves: the ready jobs (those in flight are ready again) loaded in
        (priority, id) order into a fresh index, the weights applied before."""
        self.ready.update(self.flight)
        self.flight.clear()
        self.fresh_index()
        plain: list[tuple[int, int]] = []
        fair: list[tuple[int, int, str]] = []
        for job_id, (priority, key) in sorted(self.ready.items(), key=lambda kv: (kv[1][0], kv[0])):
            self.model.insert((priority, job_id), key)
            if key is None:
                plain.append((priority, job_id))
            else:
                fair.append((priority, job_id, key))
        self.index.begin_loading([QUEUE])
        self.index.load(QUEUE, plain, [], fair)
        self.index.finish_loading(QUEUE)

    @invariant()
    def counts_agree(self) -> None:
        assert self.index.count(QUEUE) == len(self.ready)
        keys = {key for _, key in self.ready.values() if key is not None}
        assert self.index.fair_key_count(QUEUE) == len(keys)
        assert self.index.fair_weights(QUEUE) == sorted(self.weights.items())


FairIndexMatchesTheModel.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_fair_index_matches_the_model = FairIndexMatchesTheModel.TestCase


def test_the_busiest_keys_come_with_their_counts_and_oldest_job() -> None:
    index = _native.ReadyIndex()
    for job_id, key in enumerate(["a", "b", "b", "c", "b", "a"], start=1):
        index.insert_fair(QUEUE, 1 if job_id == 5 else 2, job_id, key)
    index.insert_fair(QUEUE, 0, 9, "a")
    assert index.fair_busiest(QUEUE, 10) == [("a", 3, 1), ("b", 3, 2), ("c", 1, 4)]
    assert index.fair_busiest(QUEUE, 1) == [("a", 3, 1)]
    index.select([QUEUE]).claim(100)
    assert index.fair_busiest(QUEUE, 10) == [] and index.fair_key_count(QUEUE) == 0


def test_a_weight_past_the_largest_is_kept_as_the_largest() -> None:
    index = _native.ReadyIndex()
    index.set_fair_weight(QUEUE, "a", _native.MAX_FAIR_WEIGHT + 1)
    assert index.fair_weights(QUEUE) == [("a", _native.MAX_FAIR_WEIGHT)]

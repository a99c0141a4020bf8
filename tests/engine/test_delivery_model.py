"""A randomized walk over the engine's worker-facing operations, with an invariant checker.

Hypothesis drives enqueue, subscribe, start, ack (current and stale), fail, release, close (clean
and abrupt), time passing (the reaper and the scheduler), pause and resume, against a real
RocksDB store. Each consumer has a pusher task like a server stream's. After every step:
- delivery is level-triggered: within a bound, no consumer has credit while one of its unpaused
  queues has a ready job;
- attempts count only started attempts, losses only abrupt ends of started ones;
- an answer naming an attempt that is over changes nothing;
- the store, the in-memory ready set and the counts agree, and no job is held twice.
"""

import asyncio
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from pyqueue.engine import Engine, EngineConfig, Failure
from pyqueue.engine.consumer import Consumer
from pyqueue.engine.model import JobView
from pyqueue.engine.retry import RetryPolicy
from pyqueue.store import Family, RocksStore, Status
from pyqueue.store import keys as store_keys
from pyqueue.store.records import JobRecord

QUEUES = ("a", "b")
T0 = 1_800_000_000_000
SETTLE_S = 2.0  # the bound for "within milliseconds", generous for a loaded machine


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


class Stream:
    """A consumer and its pusher, as the gRPC Take stream drives them."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.delivered: list[JobView] = []
        # The send of a batch waits while this is clear: the model decides how long a send takes,
        # and so whether jobs become ready while the stream is busy sending.
        self.send_done = asyncio.Event()
        self.send_done.set()
        self.task = asyncio.get_running_loop().create_task(self._push())

    @property
    def sending(self) -> bool:
        return not self.send_done.is_set()

    async def _push(self) -> None:
        while not self.consumer.closed:
            jobs = await self.consumer.next_jobs(0.05)
            self.delivered.extend(jobs)
            if jobs:
                await self.send_done.wait()

    def unstarted(self) -> list[JobView]:
        held = self.consumer.held
        return [
            j
            for j in self.delivered
            if j.record.id in held
            and not held[j.record.id].started_ms
            and held[j.record.id].lease == j.record.lease
        ]

    def started(self) -> list[JobView]:
        held = self.consumer.held
        return [
            j
            for j in self.delivered
            if j.record.id in held
            and held[j.record.id].started_ms
            and held[j.record.id].lease == j.record.lease
            and not held[j.record.id].answering
        ]


class DeliveryModel(RuleBasedStateMachine):
    @initialize()
    def open_engine(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.dir = tempfile.mkdtemp(prefix="pyqueue-model-")
        self.store = RocksStore(Path(self.dir) / "db")
        self.clock = Clock()
        policy = RetryPolicy(max_retries=3, base_s=1, exponent=0, jitter_s=0, keep_completed_ms=0)
        self.engine = Engine(self.store, EngineConfig(durable=False, retry=policy), clock=self.clock)
        self.run(self.engine.start(services=False))
        self.run(self.engine.wait_rebuilt())
        self.streams: list[Stream] = []
        self.starts: Counter[int] = Counter()  # started attempts per job
        self.losses: Counter[int] = Counter()  # abrupt ends of started attempts per job
        self.jobs: set[int] = set()

    def teardown(self) -> None:
        if not hasattr(self, "engine"):
            return
        self.run(self._stop())
        self.store.close()
        self.loop.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    async def _stop(self) -> None:
        for stream in self.streams:
            stream.send_done.set()
            stream.consumer.close(clean=True)
        await asyncio.gather(*(s.task for s in self.streams), return_exceptions=True)
        await self.engine.stop()

    def run(self, coro):  # type: ignore[no-untyped-def]
        return self.loop.run_until_complete(coro)

    def on_loop(self, call) -> None:  # type: ignore[no-untyped-def]
        """Run a plain call as the server would: on the running event loop."""

        async def inside() -> None:
            call()

        self.run(inside())

    def open_streams(self) -> list[Stream]:
        return [s for s in self.streams if not s.consumer.closed]

    # Producers and steering.
    @rule(queue=st.sampled_from(QUEUES), priority=st.integers(0, 2), timeout_ms=st.sampled_from([0, 1_000]))
    def enqueue(self, queue: str, priority: int, timeout_ms: int) -> None:
        new = self.engine.new_job(0, "t", queue, priority, b"", timeout_ms=timeout_ms)
        ((job_id, _),) = self.run(self.engine.enqueue([new]))
        self.jobs.add(job_id)

    @rule(
        queues=st.lists(st.sampled_from(QUEUES), min_size=2, max_size=5),
        gaps=st.lists(st.integers(0, 6), min_size=5, max_size=5),
    )
    def enqueue_burst(self, queues: list[str], gaps: list[int]) -> None:
        """Separate enqueues a moment apart: they land while streams are busy claiming
        and sending, which is where a wake-up can be missed."""

        async def burst() -> list[list[tuple[int, bool]]]:
            loop = asyncio.get_running_loop()
            tasks = []
            for queue, gap in zip(queues, gaps, strict=False):
                new = self.engine.new_job(0, "t", queue, None, b"")
                tasks.append(loop.create_task(self.engine.enqueue([new])))
                await asyncio.sleep(gap / 2000)  # 0 to 3 ms: about one commit
            return await asyncio.gather(*tasks)

        for ((job_id, _),) in self.run(burst()):
            self.jobs.add(job_id)

    @rule(queue=st.sampled_from(QUEUES), paused=st.booleans())
    def pause_or_resume(self, queue: str, paused: bool) -> None:
        self.run(self.engine.set_paused(queue, paused))

    @rule(ms=st.sampled_from([100, 1_000, 5_000]))
    def time_passes(self, ms: int) -> None:
        self.clock.now += ms
        self.run(self.engine.services[1].run_once())  # reaper
        self.run(self.engine.services[0].run_once())  # scheduler

    # Workers.
    @rule(queues=st.sampled_from([("a",), ("b",), ("a", "b")]), prefetch=st.integers(1, 3))
    def subscribe(self, queues: tuple[str, ...], prefetch: int) -> None:
        if len(self.open_streams()) >= 3:
            return

        async def make() -> Stream:
            return Stream(self.engine.consumer(list(queues), prefetch, reports_starts=True))

        self.streams.append(self.run(make()))

    # Which stream and which job a rule picks are drawn as plain numbers, so that the draws
    # do not depend on the timing of deliveries (hypothesis needs them to replay alike).
    def pick(self, streams: list[Stream], n: int) -> Stream | None:
        return streams[n % len(streams)] if streams else None

    @rule(n=st.integers(0, 5), m=st.integers(0, 5))
    def start(self, n: int, m: int) -> None:
        stream = self.pick([s for s in self.open_streams() if s.unstarted()], n)
        if stream is None:
            return
        jobs = stream.unstarted()
        job = jobs[m % len(jobs)]
        self.on_loop(lambda: stream.consumer.start([(job.record.id, job.record.lease)]))
        self.starts[job.record.id] += 1

    @rule(n=st.integers(0, 5), m=st.integers(0, 5), stale=st.booleans())
    def ack(self, n: int, m: int, stale: bool) -> None:
        stream = self.pick([s for s in self.open_streams() if s.started()], n)
        if stream is None:
            return
        jobs = stream.started()
        job = jobs[m % len(jobs)]
        job_id, lease = job.record.id, job.record.lease
        if stale:
            before = self.record(job_id)
            outcome = self.run(stream.consumer.ack([(job_id, lease - 1)]))
            assert outcome.done == [] and outcome.rejected[0].code == "FAILED_PRECONDITION"
            assert self.record(job_id) == before, "a stale answer changed nothing"
            return
        outcome = self.run(stream.consumer.ack([(job_id, lease), (job_id, lease)]))
        self.on_loop(lambda: stream.consumer.release(outcome))
        assert len(outcome.done) <= 1, "a repeated id is answered once"

    @rule(n=st.integers(0, 5), m=st.integers(0, 5))
    def fail(self, n: int, m: int) -> None:
        stream = self.pick([s for s in self.open_streams() if s.started()], n)
        if stream is None:
            return
        jobs = stream.started()
        job = jobs[m % len(jobs)]
        failure = Failure(job.record.id, "boom")
        outcome = self.run(stream.consumer.fail([(failure, job.record.lease)]))
        self.on_loop(lambda: stream.consumer.release(outcome))

    @rule(n=st.integers(0, 5), m=st.integers(0, 5), delay_ms=st.sampled_from([0, 1_000]))
    def release(self, n: int, m: int, delay_ms: int) -> None:
        stream = self.pick([s for s in self.open_streams() if s.unstarted()], n)
        if stream is None:
            return
        jobs = stream.unstarted()
        job = jobs[m % len(jobs)]
        self.run(stream.consumer.hand_back([(job.record.id, job.record.lease)], delay_ms))

    @rule(n=st.integers(0, 5), slow=st.booleans())
    def send_speed(self, n: int, slow: bool) -> None:
        """A stream's next sends take until further notice (slow), or end now."""
        stream = self.pick(self.open_streams(), n)
        if stream is not None:
            stream.send_done.clear() if slow else stream.send_done.set()

    @rule(n=st.integers(0, 5), clean=st.booleans())
    def close(self, n: int, clean: bool) -> None:
        stream = self.pick(self.open_streams(), n)
        if stream is None:
            return
        if not clean:
            for job in stream.started():
                # An attempt the reaper already ended (its time limit passed) is over: the
                # stream still holds it, but its abrupt end loses nothing more.
                record = self.record(job.record.id)
                if (
                    record is not None
                    and record.status == Status.IN_FLIGHT
                    and record.lease == job.record.lease
                ):
                    self.losses[job.record.id] += 1
        stream.send_done.set()
        self.on_loop(lambda: stream.consumer.close(clean=clean))
        self.run(stream.task)
        self.run(self.engine.wait_background())

    # The checks.
    def record(self, job_id: int) -> JobRecord | None:
        raw = self.store.get(Family.DATA, store_keys.job_key(job_id))
        return JobRecord.decode(job_id, raw) if raw is not None else None

    def starved(self) -> list[str]:
        """Streams with credit beside ready work, or still between claiming and holding."""
        return [
            f"a stream on {s.consumer.queues} has credit {s.consumer.credit} and ready jobs"
            if s.consumer.credit > 0 and s.consumer._selection.has_ready()
            else f"a stream on {s.consumer.queues} is still claiming"
            for s in self.open_streams()
            if (not s.sending and s.consumer.credit > 0 and s.consumer._selection.has_ready())
            or s.consumer._claiming
        ]

    @invariant()
    def level_triggered(self) -> None:
        if not hasattr(self, "engine"):
            return

        async def settle() -> list[str]:
            deadline = time.monotonic() + SETTLE_S
            while True:
                await asyncio.sleep(0.002)  # let the streams a step woke run
                await self.engine.wait_background()
                starved = self.starved()
                if not starved or time.monotonic() > deadline:
                    return starved

        assert self.run(settle()) == []

    @invariant()
    def store_memory_and_counts_agree(self) -> None:
        if not hasattr(self, "engine"):
            return
        by_status: Counter[tuple[str, int]] = Counter()
        for job_id in self.jobs:
            record = self.record(job_id)
            if record is None:
                continue  # completed
            # Holders of the current attempt (a stream may still hold one the reaper ended).
            held_by = sum(
                1
                for s in self.open_streams()
                if (h := s.consumer.held.get(job_id)) is not None and h.lease == record.lease
            )
            by_status[(record.queue, int(record.status))] += 1
            assert held_by <= 1, f"job {job_id} is held by {held_by} streams"
            if record.status != Status.IN_FLIGHT:
                assert record.attempts == self.starts[job_id], (
                    f"job {job_id}: {record.attempts} attempts, {self.starts[job_id]} started"
                )
                assert record.lost == self.losses[job_id]
            else:
                assert held_by == 1, f"job {job_id} is in flight but no stream holds it"
        for queue in QUEUES:
            assert self.engine.memory.ready.count(queue) == by_status[(queue, int(Status.READY))]
        counts = {
            (queue, Status[label.upper()].value): n
            for queue, by_label in self.engine.memory.counts.by_queue().items()
            for label, n in by_label.items()
        }
        assert all(n > 0 for n in counts.values())
        assert counts == {k: n for k, n in by_status.items() if n}


DeliveryModel.TestCase.settings = settings(
    max_examples=int(__import__("os").environ.get("PYQUEUE_MODEL_EXAMPLES", "150")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_delivery_model = DeliveryModel.TestCase

"""What the engine counts for metrics: events per queue and a few histograms, kept as plain numbers.

The hot path only adds to dicts and lists (no lock, no library call per job): the single writer
gathers a batch's events in its BatchView and publishes them here once per commit, the sync thread
observes fsyncs, the event loop observes enqueue calls. The metrics endpoint reads these at scrape
time (pyqueue/server/metrics.py) and formats them with prometheus_client. A reader may see a
histogram between two increments; the next scrape is whole again.
"""

import threading
from collections import Counter
from collections.abc import Mapping

from pyqueue.engine.history import StepCounts
from pyqueue.histogram import SECONDS, Histogram

WAIT_SECONDS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
JOBS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)

EVENTS = ("enqueued", "completed", "failed", "dead", "lost")


class Telemetry:
    def __init__(self, history: StepCounts | None = None) -> None:
        self.history = history or StepCounts(
            WAIT_SECONDS
        )  # the last hour, in steps, for the dashboard's charts
        self.events: Counter[tuple[str, str]] = Counter()  # (event, queue) -> count
        self.enqueue_seconds = Histogram(SECONDS)
        self.fsync_seconds = Histogram(SECONDS)
        self.commit_jobs = Histogram(JOBS)
        self.job_wait_seconds: dict[str, Histogram] = {}
        self._lock = threading.Lock()  # the writer publishes, a scrape copies

    def publish(
        self, events: Mapping[tuple[str, str], int], waits: dict[str, list[float]], jobs: int
    ) -> None:
        """One commit's worth, from the single writer."""
        if jobs:
            self.commit_jobs.observe(jobs)
        if events:
            with self._lock:
                self.events.update(events)
        if events or waits:
            self.history.record(events, waits)
        for queue, seconds in waits.items():
            histogram = self.job_wait_seconds.get(queue)
            if histogram is None:
                histogram = self.job_wait_seconds.setdefault(queue, Histogram(WAIT_SECONDS))
            histogram.observe_many(seconds)

    def event_counts(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self.events)

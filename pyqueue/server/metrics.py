"""The Prometheus metrics: what one shard serves, and their merge into one view across shards.

A shard formats what its engine counted (engine/telemetry.py) and what it can read at scrape time
(queue counts, workers, the oldest ready job, the store's size) with prometheus_client. A sharded
server's supervisor asks every shard (the Metrics RPC) and adds the samples up by name and labels:
queues live on one shard each, and counters and histogram buckets add up, so the sum is the
server's own view. docs/metrics.md documents each metric.
"""

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from pyqueue.engine import Engine, Status
from pyqueue.engine.telemetry import EVENTS
from pyqueue.histogram import Histogram

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_EVENT_HELP = {
    "enqueued": "Jobs created by enqueues (duplicates of unique jobs not counted).",
    "completed": "Jobs acknowledged as done.",
    "failed": "Failed attempts: a failure the worker reported, or a time limit passed.",
    "dead": "Jobs that became dead: retries exhausted, killed, or lost too often.",
    "lost": "Attempts lost with their worker or with the server (a crash, a kill, a host gone silent).",
}


def shard_families(
    engine: Engine, workers: dict[str, int], reads_paused_s: float = 0.0, front_requests: int = 0
) -> list[Metric]:
    """Every metric of one shard; `workers` is the number of Take streams serving each queue;
    `reads_paused_s`, how long reads were held back for writes (server/read_share.py);
    `front_requests`, the enqueue requests the native front took (server/front.py)."""
    families: list[Metric] = [
        CounterMetricFamily(
            "pyqueue_reads_paused_seconds",
            "How long reads (listings, counts, history, metrics) waited so that writes kept the loop.",
            value=reads_paused_s,
        ),
        CounterMetricFamily(
            "pyqueue_native_front_requests",
            "Enqueue requests taken by the native front (its own port) rather than by grpcio.",
            value=front_requests,
        ),
    ]
    events = engine.telemetry.event_counts()
    for event in EVENTS:
        counter = CounterMetricFamily(f"pyqueue_jobs_{event}", _EVENT_HELP[event], labels=["queue"])
        for (name, queue), n in sorted(events.items()):
            if name == event:
                counter.add_metric([queue], n)
        families.append(counter)

    counts = engine.memory.counts.by_queue()
    jobs = GaugeMetricFamily(
        "pyqueue_queue_jobs", "Jobs in each queue by status.", labels=["queue", "status"]
    )
    for queue in sorted(counts):
        for status in Status:
            jobs.add_metric([queue, status.label], counts[queue].get(status.label, 0))
    families.append(jobs)

    gauge = GaugeMetricFamily(
        "pyqueue_workers", "Take streams (workers) serving each queue.", labels=["queue"]
    )
    for queue, n in sorted(workers.items()):
        gauge.add_metric([queue], n)
    families.append(gauge)

    oldest = GaugeMetricFamily(
        "pyqueue_queue_oldest_ready_seconds",
        "How long the oldest ready job of each queue has been ready (0: none ready).",
        labels=["queue"],
    )
    now_ms = engine.clock()
    for queue in sorted(counts):
        since = engine.oldest_ready_ms(queue) if counts[queue].get("ready") else None
        oldest.add_metric([queue], max(now_ms - since, 0) / 1000 if since is not None else 0.0)
    families.append(oldest)

    fair = GaugeMetricFamily(
        "pyqueue_queue_fair_keys",
        "Fair keys (NewJob.fair_key) with jobs waiting, per queue (queues without any are left out).",
        labels=["queue"],
    )
    for queue in sorted(counts):
        n = engine.memory.ready.fair_key_count(queue) if counts[queue].get("ready") else 0
        if n:
            fair.add_metric([queue], n)
    families.append(fair)

    telemetry = engine.telemetry
    families.append(
        _histogram(
            "pyqueue_enqueue_seconds",
            "Enqueue calls, from the request to its answer (after the fsync).",
            telemetry.enqueue_seconds,
        )
    )
    families.append(
        _histogram(
            "pyqueue_fsync_seconds", "Group-commit fsyncs of the write-ahead log.", telemetry.fsync_seconds
        )
    )
    families.append(
        _histogram(
            "pyqueue_commit_jobs", "Jobs written per commit of the single writer.", telemetry.commit_jobs
        )
    )
    wait = HistogramMetricFamily(
        "pyqueue_job_wait_seconds",
        "From ready (enqueued, promoted, retried) to delivered to a worker.",
        labels=["queue"],
    )
    for queue, histogram in sorted(telemetry.job_wait_seconds.items()):
        wait.add_metric([queue], [(b, float(n)) for b, n in histogram.buckets()], histogram.sum)
    families.append(wait)

    families += _workflow_families(engine)
    stats = engine.store.stats()
    families.append(
        GaugeMetricFamily(
            "pyqueue_store_bytes", "Size of the store's files on disk.", value=stats["disk_bytes"]
        )
    )
    families.append(
        GaugeMetricFamily(
            "pyqueue_store_pending_compaction_bytes",
            "RocksDB's estimate of the bytes compaction still has to rewrite.",
            value=stats["pending_compaction_bytes"],
        )
    )
    cluster = getattr(engine.store, "families", None)  # a cluster's owner: its changelog's figures
    if cluster is not None:
        families += cluster()
    return families


_WORKFLOW_HELP = {
    "workflows_started": "Workflows started here (EnqueueWorkflow).",
    "batches_opened": "Batches opened here (a group step started).",
    "jobs_created": "Workflow jobs made here (steps, members, callbacks).",
    "callbacks_fired": "Batch callbacks started (on_success, on_complete, the step after a group).",
    "events_counted": "Batch members that changed state here (completed, dead, ... or pending again).",
    "outbox_entries": "Entries written for other shards (jobs to make, members' new states).",
    "inbox_applied": "Entries from other shards applied here (each once).",
    "inputs_too_large": "Steps after a group not started: its results were too large to hand on.",
}


def _workflow_families(engine: Engine) -> list[Metric]:
    stats = engine.flows.stats
    counter = CounterMetricFamily(
        "pyqueue_workflow_events", "What workflows did on this shard (docs/workflows.md).", labels=["event"]
    )
    for event in _WORKFLOW_HELP:
        counter.add_metric([event], stats.get(event, 0))
    backlog = GaugeMetricFamily(
        "pyqueue_workflow_outbox_waiting",
        "Entries for other shards written here and not yet applied there (the relay's backlog).",
        value=max(engine.flows.next_seq - 1 - engine.flows.trimmed_seq, 0),
    )
    return [counter, backlog]


def _histogram(name: str, documentation: str, histogram: Histogram) -> HistogramMetricFamily:
    return HistogramMetricFamily(
        name, documentation, buckets=[(b, float(n)) for b, n in histogram.buckets()], sum_value=histogram.sum
    )


class _Families:
    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def render(families: Iterable[Metric]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry)


def merge(texts: Iterable[str]) -> list[Metric]:
    """The shards' metrics as one: samples with the same name and labels are added up."""
    merged: dict[str, Metric] = {}
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            if family.name not in merged:
                merged[family.name] = Metric(family.name, family.documentation, family.type)
                values[family.name] = {}
            into = values[family.name]
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                into[key] = into.get(key, 0.0) + sample.value
    for name, metric in merged.items():
        for (sample_name, labels), value in values[name].items():
            metric.add_sample(sample_name, dict(labels), value)
    return list(merged.values())

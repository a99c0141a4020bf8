"""The owner's store: every batch is appended to the shard's changelog, acknowledged by the
JetStream quorum, before it is written locally (and so before anything it holds is answered).

Each append names the sequence it expects to follow (`Nats-Expected-Last-Sequence`): once a new
owner has appended its fence, this owner's next append is refused, and it stops at once (the
committer's fail-stop: nothing more is answered). An append whose answer is lost is sent again
with the same message id, so JetStream keeps it once; if no answer comes within half a lease, the
owner stops too, as its lease would lapse anyway.
"""

import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

from pyqueue.cluster.changelog import APPLIED, FENCE, RecordingBatch
from pyqueue.cluster.fail_stop import lost
from pyqueue.cluster.nats_link import NatsLink
from pyqueue.histogram import SECONDS, Histogram
from pyqueue.store.contract import Batch, Family
from pyqueue.store.rocks import RocksStore

log = logging.getLogger("pyqueue.cluster")
WRONG_LAST_SEQUENCE = 10071  # JetStream's error code for a refused Nats-Expected-Last-Sequence


class Fenced(Exception):
    """Another node appended to this shard's changelog: this one is no longer its owner."""


class ChangelogUnavailable(Exception):
    """No quorum answered an append within half a lease."""


class Appender:
    """Appends entries to one shard's changelog, each expecting the last one's sequence."""

    def __init__(self, link: NatsLink, shard: int, last: int) -> None:
        self.link = link
        self.subject = link.config.subject(shard)
        self.stream = link.config.stream(shard)
        self.last = last
        self.budget_s = link.config.lease_s / 2
        self.appends = 0
        self.bytes = 0
        self.append_seconds = Histogram(SECONDS)  # appended on the writer thread only

    def append(self, entry: bytes) -> int:
        from nats.js.errors import APIError

        headers = {"Nats-Expected-Last-Sequence": str(self.last), "Nats-Msg-Id": uuid.uuid4().hex}
        started = time.monotonic()
        give_up = started + self.budget_s
        while True:
            try:
                ack = self.link.call(
                    lambda: self.link.js.publish(self.subject, entry, timeout=1.0, headers=dict(headers)),
                    2.0,
                )
                break
            except APIError as exc:
                if exc.err_code == WRONG_LAST_SEQUENCE:
                    raise Fenced(
                        f"{self.stream} has moved past {self.last}: another node owns this shard now"
                    ) from None
                error: Exception = exc
            except Exception as exc:  # a timeout, a NATS server gone: send it again
                error = exc
            if time.monotonic() > give_up:
                raise ChangelogUnavailable(
                    f"no JetStream quorum answered an append to {self.stream} within {self.budget_s:g}s "
                    f"({type(error).__name__}: {error})"
                )
            time.sleep(0.05)
        self.last = int(ack.seq)
        self.appends += 1
        self.bytes += len(entry)
        self.append_seconds.observe(time.monotonic() - started)
        return self.last

    def fence(self, expected: int) -> bool:
        """Append a new owner's fence after `expected`; False if someone appended first."""
        self.last = expected
        try:
            self.append(FENCE)
        except Fenced:
            return False
        return True


class ReplicatedStore:
    """A RocksStore whose writes go through the changelog first; reads are local."""

    def __init__(self, store: RocksStore, appender: Appender, max_entry_bytes: int) -> None:
        self.inner = store
        self.path: Path = store.path
        self.appender = appender
        self.max_entry_bytes = max_entry_bytes

    def batch(self) -> RecordingBatch:
        return RecordingBatch(self.inner.batch())

    def write(self, batch: Batch) -> None:
        assert isinstance(batch, RecordingBatch), "a batch from another store"
        try:
            for entry in batch.entries(self.max_entry_bytes):
                self.appender.append(entry)
        except (Fenced, ChangelogUnavailable) as exc:
            lost(str(exc))
        batch.inner.put(Family.DATA, APPLIED, self.appender.last.to_bytes(8, "big"))
        self.inner.write(batch.inner)

    def families(self) -> list[Metric]:
        """This owner's part of /metrics (added up over the shards by the node's public address)."""
        a = self.appender
        return [
            CounterMetricFamily(
                "pyqueue_cluster_changelog_appends",
                "Entries this owner appended to its shard's changelog.",
                value=a.appends,
            ),
            CounterMetricFamily(
                "pyqueue_cluster_changelog_bytes",
                "Bytes this owner appended to its shard's changelog.",
                value=a.bytes,
            ),
            HistogramMetricFamily(
                "pyqueue_cluster_append_seconds",
                "Changelog appends, from sending to the JetStream quorum's answer (retries included).",
                buckets=[(b, float(n)) for b, n in a.append_seconds.buckets()],
                sum_value=a.append_seconds.sum,
            ),
        ]

    # Reads, syncs and the rest are the local store's.
    def sync(self) -> None:
        self.inner.sync()

    def latest_sequence(self) -> int:
        return self.inner.latest_sequence()

    def get(self, family: Family, key: bytes) -> bytes | None:
        return self.inner.get(family, key)

    def get_many(self, family: Family, keys: Sequence[bytes]) -> list[bytes | None]:
        return self.inner.get_many(family, keys)

    def scan(
        self, family: Family, lo: bytes, hi: bytes, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        return self.inner.scan(family, lo, hi, reverse=reverse)

    def last_key(self, family: Family, lo: bytes, hi: bytes) -> bytes | None:
        return self.inner.last_key(family, lo, hi)

    def stats(self) -> dict[str, int]:
        return self.inner.stats()

    def compact(self) -> None:
        self.inner.compact()

    def checkpoint(self, path: Path) -> int:
        return self.inner.checkpoint(path)

    def close(self) -> None:
        self.inner.close()

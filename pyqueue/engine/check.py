"""A full consistency check of a stopped data directory (`pyqueue check`, and the crash tests).

It reads every job record and every index entry, and rebuilds the in-memory sets exactly as a
starting server would, then reports every disagreement:
- a record without its status, queue or type index entry, or without its payload;
- an index entry whose record is missing or says otherwise;
- a rebuilt ready or timer set, or a queue's counts, that differ from what the records say.
"""

from collections import defaultdict
from dataclasses import dataclass, field

from pyqueue._native import TimerSet
from pyqueue.engine.dispatcher import Dispatcher
from pyqueue.engine.memory import Memory
from pyqueue.engine.rebuild import rebuild
from pyqueue.engine.recovery import LAYOUT, READY_IN_RUN_ORDER
from pyqueue.store import keys
from pyqueue.store.contract import Family, Store
from pyqueue.store.records import ENDED, CorruptRecordError, JobRecord, Status

FAR_FUTURE = 2**62


@dataclass
class Report:
    jobs: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check(store: Store) -> Report:
    report = Report()
    if store.get(Family.DATA, LAYOUT) != READY_IN_RUN_ORDER and next(
        store.scan(Family.DATA, *keys.job_range()), None
    ):
        report.problems.append(
            "the store was written by an older version (ready jobs keyed by id): start the server "
            "once, which rewrites those keys, then check again"
        )
        return report
    ready: dict[str, set[tuple[int, int]]] = defaultdict(set)
    scheduled: set[tuple[int, int]] = set()
    expiring: set[tuple[int, int]] = set()
    status_entries: dict[bytes, bytes] = {}
    counts: dict[str, int] = defaultdict(int)
    by_queue: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for key, raw in store.scan(Family.DATA, *keys.job_range()):
        job_id = keys.id_suffix(key)
        report.jobs += 1
        try:
            record = JobRecord.decode(job_id, raw)
        except CorruptRecordError as exc:
            report.problems.append(
                f"{exc}: listings show it as a damaged entry; restore the store from a backup to have it back"
            )
            continue
        counts[record.status.label] += 1
        by_queue[record.queue][record.status.label] += 1
        status_entries[record.status_key()] = record.status_value()
        _expect_present(store, report, Family.DATA, keys.payload_key(job_id), f"job {job_id}: payload")
        _expect_present(
            store,
            report,
            Family.INDEX,
            keys.queue_key(record.queue, record.status, job_id),
            f"job {job_id}: queue index",
        )
        _expect_present(
            store, report, Family.INDEX, keys.type_key(record.type, job_id), f"job {job_id}: type index"
        )
        if record.status == Status.READY:
            ready[record.queue].add((record.priority, job_id))
        elif record.status == Status.SCHEDULED:
            scheduled.add((record.run_at_ms, job_id))
        elif record.status in ENDED and record.expires_ms:
            expiring.add((record.expires_ms, job_id))
    report.by_status = dict(counts)

    seen = 0
    for key, value in store.scan(Family.INDEX, keys.STATUS, bytes((keys.STATUS[0] + 1,))):
        seen += 1
        expected = status_entries.get(key)
        if expected is None:
            report.problems.append(f"status index entry {key.hex()} has no matching record")
        elif expected != value:
            report.problems.append(f"status index entry {key.hex()} disagrees with its record")
    if seen != len(status_entries):
        report.problems.append(f"{len(status_entries)} records but {seen} status index entries")

    memory = Memory(Dispatcher())
    rebuild(store, memory)
    for queue in sorted(set(ready) | set(memory.ready.queues())):
        memory.ready.set_paused(queue, False)  # a paused lane gives nothing out; compare its contents
        selection = memory.ready.select([queue])
        got = selection.claim(memory.ready.count(queue) + 1)
        want = [job_id for _, job_id in sorted(ready.get(queue, set()))]
        if got != want:
            report.problems.append(
                f"queue {queue!r}: rebuilt ready set ({len(got)} jobs) differs from the records "
                f"({len(want)} jobs)"
            )
    rebuilt_counts = memory.counts.by_queue()
    expected_counts = {q: dict(c) for q, c in by_queue.items()}
    if rebuilt_counts != expected_counts:
        report.problems.append(
            f"the queue counts rebuilt from the index ({rebuilt_counts}) differ from the records"
        )
    if any(n < 0 for c in rebuilt_counts.values() for n in c.values()):
        report.problems.append("a queue count is negative")
    _compare_timers(report, "scheduled", memory.scheduled, scheduled)
    _compare_timers(report, "expiring", memory.expiring, expiring)
    return report


def _expect_present(store: Store, report: Report, family: Family, key: bytes, what: str) -> None:
    if store.get(family, key) is None:
        report.problems.append(f"{what} is missing")


def _compare_timers(report: Report, name: str, timers: TimerSet, expected: set[tuple[int, int]]) -> None:
    got = timers.pop_due(FAR_FUTURE, len(timers) + 1)
    if got != sorted(expected):
        report.problems.append(
            f"rebuilt {name} set ({len(got)} keys) differs from the records ({len(expected)})"
        )
